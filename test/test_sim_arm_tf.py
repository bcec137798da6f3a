# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulated arm publishes its link frames on tf as robot_state_publisher does, over DDS.

``dreamzero-sim-arm`` (its own process) publishes the packaged Panda's fixed joints on
``/tf_static`` and its moving joints on ``/tf`` with each joint state. A tf listener (its own
process, tf2_msgs built from its definition where no wheel has it) composes the frames from
the description's root to the hand and fingers; they agree with pinocchio's forward kinematics
of the joint state of the same stamp, the mimic finger included.
"""

from importlib import resources
import json
import subprocess
import sys

from closed_loop import start_sim
from interface_support import tf2_msgs_env
from machine_load import load_factor
from node_support import REPO, ros_env
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

PANDA = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
ARM = [f'panda_joint{i}' for i in range(1, 8)]


def _matrix(xyz, quaternion) -> np.ndarray:
    x, y, z, w = quaternion
    matrix = np.eye(4)
    matrix[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    matrix[:3, 3] = xyz
    return matrix


def test_sim_arm_publishes_its_links_on_tf_as_robot_state_publisher(tmp_path):
    from dreamzero_ros.core.robot.kinematics import LinkPoints

    env = {**ros_env(), **tf2_msgs_env(), 'PYTHONUNBUFFERED': '1'}
    with start_sim(tmp_path, 'gripper.initial_position:=0.03', env=tf2_msgs_env()) as arm:
        seconds = 60 * load_factor()
        result = subprocess.run(
            [sys.executable, str(REPO / 'test' / 'tf_listener_peer.py'), str(seconds)],
            env=env, capture_output=True, text=True, timeout=seconds + 60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr + arm.log()
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out['stamp'] is not None, arm.log()
    static, dynamic = out['static'], out['dynamic']
    # fixed joints once on /tf_static, moving ones (the mimic finger too) on /tf, as RSP does
    assert set(static) == {'panda_link0', 'panda_link8', 'panda_hand', 'panda_hand_tcp'}
    assert set(dynamic) == {f'panda_link{i}' for i in range(1, 8)} | {
        'panda_leftfinger',
        'panda_rightfinger',
    }
    assert dynamic['panda_link1'][0] == 'panda_link0' and static['panda_hand'][0] == 'panda_link8'
    frames = {**static, **dynamic}

    def pose(link: str) -> np.ndarray:
        parent, xyz, quaternion = frames[link]
        own = _matrix(xyz, quaternion)
        return own if parent == 'panda_link0' else pose(parent) @ own

    joints = out['joints']
    q = np.array([joints[name] for name in ARM])
    np.testing.assert_allclose(q, [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785], atol=1e-9)
    assert joints['panda_finger_joint1'] == pytest.approx(0.03)
    links = ['panda_link4', 'panda_link8', 'panda_hand_tcp']
    expected = LinkPoints(PANDA, ARM, links, frame='panda_link0').positions(q)[0]
    for link, point in zip(links, expected, strict=True):
        np.testing.assert_allclose(pose(link)[:3, 3], point, atol=1e-9)
    # the fingers open 0.03 m each, the right one mimicking the left, along the hand's y axis
    hand = pose('panda_hand')
    left = np.linalg.inv(hand) @ pose('panda_leftfinger')
    right = np.linalg.inv(hand) @ pose('panda_rightfinger')
    np.testing.assert_allclose(left[1, 3] - right[1, 3], 0.06, atol=1e-9)
