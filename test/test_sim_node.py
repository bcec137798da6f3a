# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-sim`` over DDS: a real robot's interfaces, on simulated time, for action groups.

The simulator runs in its own process with the bimanual scene and the groups of
``config/sim_bimanual_groups.yaml``; this harness commands one arm through its
joint_trajectory_controller topic and its gripper through the gripper controller's topic, as the
policy node's group outputs do, and reads what a robot would give: joint states of both arms
(measured by the physics), ``/clock``, each camera's images, the task and its reset.
"""

import subprocess
import sys

from node_support import REPO, Harness, ros_env
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0


@pytest.fixture(scope='module')
def bimanual(tmp_path_factory):
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String

    log_path = tmp_path_factory.mktemp('sim_node') / 'sim.log'
    log = open(log_path, 'w')  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, '-m', 'dreamzero_ros.ros.mujoco_sim', '--ros-args',
         '-p', 'scene:=bimanual', '-p', 'seed:=7',
         '-p', f'action_groups:={REPO / "config" / "sim_bimanual_groups.yaml"}'],
        stdout=log, stderr=subprocess.STDOUT, env={**ros_env(), 'PYTHONUNBUFFERED': '1'},
    )  # fmt: skip
    harness = Harness('sim_node_harness')
    harness.record('states', JointState, 'joint_states')
    harness.record('clock', Clock, '/clock')
    harness.record('top', Image, 'top_camera_images_rgb')
    harness.record('left', Image, 'left_camera_images_rgb')
    harness.record('task', String, '/dreamzero_sim/task')
    yield harness, log_path.read_text
    process.terminate()
    process.wait(20)
    log.close()
    harness.close()


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def test_groups_are_served_on_simulated_time_with_physics(bimanual):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    harness, log = bimanual
    harness.wait_for(lambda: len(harness.messages('states')) > 20, TIMEOUT, 'joint states', log)
    assert 'ready: 6 joints on left_arm_controller/joint_trajectory' in log()
    state = harness.messages('states')[-1]
    names = list(state.name)
    assert set(names) == {f'{s}_joint{i}' for s in ('left', 'right') for i in range(1, 7)} | {
        'left_gripper',
        'right_gripper',
    }
    start = np.array(state.position)
    arm = harness.node.create_publisher(JointTrajectory, 'left_arm_controller/joint_trajectory', 10)
    gripper = harness.node.create_publisher(
        JointTrajectory, 'left_gripper_controller/joint_trajectory', 10
    )
    joints = [f'left_joint{i}' for i in range(1, 7)]
    target = start[[names.index(j) for j in joints]] + np.array([0.3, 0.2, -0.2, 0.0, 0.3, 0.5])
    harness.wait_for(lambda: arm.get_subscription_count() and gripper.get_subscription_count(),
                     TIMEOUT, 'the controllers', log)  # fmt: skip
    arm.publish(JointTrajectory(joint_names=joints, points=[
        JointTrajectoryPoint(positions=list(target), velocities=[0.0] * 6,
                             time_from_start=Duration(sec=1))]))  # fmt: skip
    gripper.publish(JointTrajectory(joint_names=['left_gripper'], points=[
        JointTrajectoryPoint(positions=[0.021], time_from_start=Duration(sec=1))]))  # fmt: skip
    sent = _seconds(harness.messages('clock')[-1].clock)

    def reached():
        latest = harness.messages('states')[-1]
        if _seconds(latest.header.stamp) < sent + 2.0:
            return None
        return latest

    latest = harness.wait_for(reached, TIMEOUT, '2 simulated seconds', log)
    measured = np.array(latest.position)
    np.testing.assert_allclose(measured[[names.index(j) for j in joints]], target, atol=0.01)
    assert measured[names.index('left_gripper')] == pytest.approx(0.021, abs=2e-3)
    # the right arm holds where it started; efforts are the servos' torques
    right = [names.index(f'right_joint{i}') for i in range(1, 7)]
    np.testing.assert_allclose(measured[right], start[right], atol=0.01)
    assert len(latest.effort) == len(names)
    # simulated time: /clock and the stamps agree, and started from zero
    clock = [_seconds(m.clock) for m in harness.messages('clock')]
    assert clock == sorted(clock) and clock[-1] < 1000
    image = harness.messages('top')[-1]
    assert (image.height, image.width, image.encoding) == (180, 320, 'rgb8')
    assert harness.messages('left')
    assert harness.messages('task')[-1].data == 'put the red cube in the bin'


def test_reset_starts_the_next_seed(bimanual):
    from std_srvs.srv import Trigger

    harness, log = bimanual
    answer = harness.call(Trigger, '/dreamzero_sim/reset', Trigger.Request(), timeout=30.0)
    assert answer.success and answer.message.startswith('seed 8: put the red cube in the bin')


def test_tf_gives_the_urdf_frames_and_the_objects(tmp_path):
    """/tf and /tf_static as robot_state_publisher gives them, where tf2_msgs is installed."""
    import json

    from interface_support import interface_env

    from dreamzero_ros.core.kinematics import LinkPoints

    env = {**ros_env(), 'PYTHONUNBUFFERED': '1', **interface_env('tf2_msgs')}
    log_path = tmp_path / 'sim.log'
    with open(log_path, 'w') as log:
        sim = subprocess.Popen(
            [sys.executable, '-m', 'dreamzero_ros.ros.mujoco_sim', '--ros-args',
             '-p', 'real_time_factor:=1.0'],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        try:
            peer = subprocess.run(
                [sys.executable, str(REPO / 'test' / 'tf_listener_peer.py'), '20'],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        finally:
            sim.terminate()
            sim.wait(20)
    assert peer.returncode == 0, peer.stderr + log_path.read_text()
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


def test_a_yam_policy_drives_both_simulated_arms_through_the_action_groups(tmp_path):
    """The node on a random YAM checkpoint, its groups the bimanual scene's, on simulated time."""
    from diagnostic_msgs.msg import DiagnosticArray
    from embodiment_support import write_shipped_checkpoint
    from node_support import NodeProcess
    from sensor_msgs.msg import JointState
    from test_node_action_groups import _parameters, _params_file

    from dreamzero_ros.sim.bimanual import VIPERX_HOME

    groups = REPO / 'config' / 'sim_bimanual_groups.yaml'
    checkpoint = write_shipped_checkpoint(tmp_path / 'yam', 'yam')
    parameters = {
        **_parameters(checkpoint, 'yam', groups, (range(12), range(2), ())),
        'camera_topics': ['top_camera_images_rgb', 'left_camera_images_rgb',
                          'right_camera_images_rgb'],
        'start_enabled': True,
    }  # fmt: skip
    harness = Harness('yam_sim_harness', use_sim_time=True)
    harness.record('states', JointState, 'joint_states')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    log_path = tmp_path / 'sim.log'
    log = open(log_path, 'w')  # noqa: SIM115 - closed below
    sim = subprocess.Popen(
        [sys.executable, '-m', 'dreamzero_ros.ros.mujoco_sim', '--ros-args',
         '-p', 'scene:=bimanual', '-p', f'action_groups:={groups}'],
        stdout=log, stderr=subprocess.STDOUT, env={**ros_env(), 'PYTHONUNBUFFERED': '1'},
    )  # fmt: skip
    node = NodeProcess(
        tmp_path / 'node.log', 'use_sim_time:=true',
        params_file=_params_file(tmp_path, **parameters),
    )  # fmt: skip

    def logs():
        return node.log()[-4000:] + '\n--- sim:\n' + log_path.read_text()[-3000:]

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

    try:
        harness.wait_for(
            lambda: min(accepted('left_arm'), accepted('right_arm')) >= 2
            and min(moved('left'), moved('right')) > 1e-3,
            TIMEOUT * 2, 'both arms following trajectories', logs,
        )  # fmt: skip
        assert 'rejected' not in log_path.read_text()
    finally:
        node.stop()
        sim.terminate()
        sim.wait(20)
        log.close()
        harness.close()
