# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The dataset layout of an embodiment, and DROID's derived columns from joint positions."""

import numpy as np
import pytest

from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.errors import DatasetError, EmbodimentError
from dreamzero_ros.export.droid_columns import DroidColumns, euler_xyz
from dreamzero_ros.export.layout import embodiment_for_export, layout_for

ARM = tuple(f'panda_joint{i}' for i in range(1, 8))
HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _rotation(roll, pitch, yaw):
    cx, sx, cy, sy, cz, sz = (f(a) for a in (roll, pitch, yaw) for f in (np.cos, np.sin))
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx  # extrinsic x, then y, then z: SciPy's 'xyz'


def test_euler_angles_are_extrinsic_xyz():
    angles = np.array([[0.3, -0.4, 2.5], [-3.0, 1.2, -0.1], [0.0, 0.0, 0.0]])
    rotations = np.stack([_rotation(*a) for a in angles])
    np.testing.assert_allclose(euler_xyz(rotations), angles, atol=1e-12)


@pytest.fixture(scope='module')
def droid():
    urdf = (EMBODIMENTS_DIR.parent / 'descriptions' / 'panda.urdf').read_text()
    return DroidColumns(urdf, ARM)


def test_droid_state_and_action_follow_droids_franka_code(droid):
    import pinocchio

    urdf = (EMBODIMENTS_DIR.parent / 'descriptions' / 'panda.urdf').read_text()
    model = pinocchio.buildModelFromXML(urdf)
    data = model.createData()
    q = pinocchio.neutral(model)
    q[:7] = HOME
    pinocchio.framesForwardKinematics(model, data, q)
    base = data.oMf[model.getFrameId('panda_link0')]
    flange = base.inverse() * data.oMf[model.getFrameId('panda_link8')]
    target = HOME + np.array([0.02, -0.01, 0.0, 0.03, 0.0, 0.0, -0.05])
    state, action = droid.rows(HOME[None], np.array([0.2]), target[None], np.array([1.3]))
    np.testing.assert_allclose(state[0, :3], flange.translation, atol=1e-12)
    np.testing.assert_allclose(
        _rotation(*state[0, 3:6]), flange.rotation, atol=1e-12
    )  # the pose's orientation as xyz Euler angles
    assert state[0, 6] == 0.2 and np.array_equal(state[0, 7:], HOME)
    assert action[0, 12] == 1.0  # the gripper target clipped to [0, 1] ...
    assert action[0, 13] == pytest.approx((1.0 - 0.2) / 0.25)  # ... and its velocity from it
    np.testing.assert_array_equal(action[0, 14:21], target)
    np.testing.assert_allclose(action[0, 21:], (target - HOME) / 0.2)
    target_pose, _ = droid.poses(target[None])
    np.testing.assert_array_equal(action[0, :6], target_pose[0])
    np.testing.assert_allclose(action[0, 6:9], (target_pose[0, :3] - state[0, :3]) / 0.075)
    turn = _rotation(*target_pose[0, 3:]) @ _rotation(*state[0, 3:6]).T
    np.testing.assert_allclose(_rotation(*(action[0, 9:12] * 0.15)), turn, atol=1e-12)
    _, still = droid.rows(HOME[None], np.array([0.5]), HOME[None], np.array([0.5]))
    np.testing.assert_allclose(still[0, 6:12], 0.0, atol=1e-12)


def test_layouts_of_droid_and_of_another_embodiment():
    droid = layout_for(embodiment_for_export('oxe_droid'))
    assert (droid.fps, droid.state_dim, droid.action_dim) == (15.0, 14, 28)
    assert droid.relative_keys == ('joint_position',)
    assert droid.slice_of('action', 'joint_position') == slice(14, 21)
    assert [name for name, _, _ in droid.columns()][:2] == ['observation.state', 'action']
    yam = layout_for(embodiment_for_export('yam'), fps=15.0, action_horizon=16)
    assert (yam.fps, yam.state_dim, yam.action_horizon) == (15.0, 14, 16)
    assert yam.language_columns == ('annotation.task',)
    assert yam.features()['observation.images.top_camera-images-rgb']['shape'] == [480, 640, 3]


def test_what_cannot_be_exported_is_refused_naming_it(tmp_path):
    with pytest.raises(DatasetError, match=r"velocity action keys \['robot_velocity'\]"):
        layout_for(embodiment_for_export('agibot'))
    odd = (EMBODIMENTS_DIR / 'oxe_droid.yaml').read_text().replace('height: 180', 'height: 181')
    (tmp_path / 'odd.yaml').write_text(odd)
    with pytest.raises(DatasetError, match='odd height or width'):
        layout_for(embodiment_for_export(str(tmp_path / 'odd.yaml')))
    with pytest.raises(EmbodimentError, match='no embodiment file nope'):
        embodiment_for_export('nope')
