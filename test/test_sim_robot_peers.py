# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-sim`` over DDS with the other nodes a robot has: tf listeners, the policy node.

Each test starts its own simulator (one ``/clock`` per ROS domain at a time: test_sim_node.py's
simulator has ended when this module runs). ``/tf`` and ``/tf_static`` as robot_state_publisher
gives them, read by a listener process (tf2_msgs built for the test); a random-weight YAM
policy driving the bimanual scene through the node's action groups on simulated time.
"""

import subprocess
import sys

from closed_loop import start_sim
from node_support import REPO, ros_env
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0


def test_tf_gives_the_urdf_frames_and_the_objects(tmp_path):
    """/tf and /tf_static as robot_state_publisher gives them, where tf2_msgs is installed."""
    import json

    from interface_support import tf2_msgs_env

    from dreamzero_ros.core.robot.kinematics import LinkPoints

    env = {**ros_env(), 'PYTHONUNBUFFERED': '1', **tf2_msgs_env()}
    with start_sim(tmp_path, 'real_time_factor:=1.0', simulator='mujoco', env=env) as sim:
        peer = subprocess.run(
            [sys.executable, str(REPO / 'test' / 'sim_tf_listener_peer.py'), '20'],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert peer.returncode == 0, peer.stderr + sim.log()
    seen = json.loads(peer.stdout.strip().splitlines()[-1])
    frames, static = seen['frames'], set(seen['static'])
    # the chain of the URDF, each link in its parent: the moving ones on /tf
    for index in range(1, 8):
        parent = 'panda_link0' if index == 1 else f'panda_link{index - 1}'
        assert frames[f'panda_link{index}'][0] == parent
        assert f'panda_link{index}' not in static
    assert frames['panda_hand'][0] == 'panda_link8' and 'panda_hand' in static
    assert frames['base'][0] == 'world' and 'base' in static
    assert frames['red_block'][0] == 'world' and 'red_block' not in static
    assert frames['wrist_image_left'][0] == 'panda_hand' and 'wrist_image_left' in static
    # composed, the transforms put the flange where the URDF's kinematics put it at the home pose
    urdf = (REPO / 'dreamzero_ros' / 'descriptions' / 'panda.urdf').read_text()
    home = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
    expected = LinkPoints(urdf, [f'panda_joint{i}' for i in range(1, 8)], ['panda_link8'],
                          frame='panda_link0').positions(np.array(home))[0, 0]  # fmt: skip
    position, rotation = np.zeros(3), np.eye(3)
    for link in ['panda_link0', *(f'panda_link{i}' for i in range(1, 9))][1:]:
        _, x, y, z, w, qx, qy, qz, _ = frames[link]
        position = position + rotation @ np.array([x, y, z])
        rotation = rotation @ _matrix(w, qx, qy, qz)
    np.testing.assert_allclose(position, expected, atol=2e-3)  # the servos hold within 2 mm


def _matrix(w: float, x: float, y: float, z: float) -> np.ndarray:
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


@pytest.mark.parametrize('output', ['joint_trajectory', 'follow_joint_trajectory'])
def test_a_yam_policy_drives_both_simulated_arms_through_the_action_groups(
    tmp_path, monkeypatch, closed_loop, output
):
    """The node on a random YAM checkpoint, its groups the bimanual scene's, on simulated time.

    Each arm's joint_trajectory_controller by its topic, or by its FollowJointTrajectory action
    (control_msgs built for the test): every chunk a goal the simulator's JTC accepts.
    """
    from closed_loop import embodiment_parameters, params_file
    from diagnostic_msgs.msg import DiagnosticArray
    from embodiment_support import write_shipped_checkpoint
    from interface_support import control_msgs_env
    from sensor_msgs.msg import JointState
    import yaml

    from dreamzero_ros.sim.bimanual import VIPERX_HOME

    groups = REPO / 'config' / 'sim_bimanual_groups.yaml'
    if output == 'follow_joint_trajectory':
        data = yaml.safe_load(groups.read_text())
        for group in data['groups']:
            if group['output'] == 'joint_trajectory':
                group['output'] = output
                group['target'] = group['target'].replace('joint_trajectory', output)
        groups = tmp_path / 'groups.yaml'
        groups.write_text(yaml.safe_dump(data))
        for name, value in control_msgs_env().items():  # no wheel: built from source
            monkeypatch.setenv(name, value)
    checkpoint = write_shipped_checkpoint(tmp_path / 'yam', 'yam')
    parameters = {
        **embodiment_parameters(checkpoint, 'yam', groups, (range(12), range(2), ())),
        'camera_topics': ['top_camera_images_rgb', 'left_camera_images_rgb',
                          'right_camera_images_rgb'],
        'start_enabled': True,
    }  # fmt: skip
    loop = closed_loop('yam_sim_harness', use_sim_time=True)
    harness = loop.harness
    harness.record('states', JointState, 'joint_states')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    sim = loop.start_sim('scene:=bimanual', f'action_groups:={groups}', simulator='mujoco')
    node = loop.start_node('use_sim_time:=true', params_file=params_file(tmp_path, **parameters))

    def logs():
        return node.log()[-4000:] + '\n--- sim:\n' + sim.log()[-3000:]

    def accepted(group):
        counts = [
            int(value.value)
            for array in harness.messages('diagnostics')
            for status in array.status
            if status.name.startswith('dreamzero_sim')
            for value in status.values
            if value.key == f'{group}.trajectories_accepted'
        ]
        return max(counts, default=0)

    def moved(side):  # the arm's largest distance from its start (gym-aloha's pose), rad
        states = harness.messages('states')
        if not states:
            return 0.0
        names = list(states[-1].name)
        position = np.array([states[-1].position[names.index(f'{side}_joint{i}')]
                             for i in range(1, 7)])  # fmt: skip
        return float(np.abs(position - VIPERX_HOME).max())

    harness.wait_for(
        lambda: min(accepted('left_arm'), accepted('right_arm')) >= 2
        and min(moved('left'), moved('right')) > 1e-3,
        TIMEOUT * 2, 'both arms following trajectories', logs,
    )  # fmt: skip
    assert 'rejected' not in sim.log()
