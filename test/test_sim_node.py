# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-sim`` over DDS: a real robot's interfaces, on simulated time, for action groups.

The simulator runs in its own process with the bimanual scene and the groups of
``config/sim_bimanual_groups.yaml``; this harness commands one arm through its
joint_trajectory_controller topic and its gripper through the gripper controller's topic, as the
policy node's group outputs do, and reads what a robot would give: joint states of both arms
(measured by the physics), ``/clock``, each camera's images, the task and its reset.
"""

from closed_loop import ClosedLoop
from node_support import REPO
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0


@pytest.fixture(scope='module')
def bimanual(tmp_path_factory):
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String

    with ClosedLoop(tmp_path_factory.mktemp('sim_node'), 'sim_node_harness') as loop:
        sim = loop.start_sim(
            'scene:=bimanual',
            'seed:=7',
            f'action_groups:={REPO / "config" / "sim_bimanual_groups.yaml"}',
            simulator='mujoco',
        )
        harness = loop.harness
        harness.record('states', JointState, 'joint_states')
        harness.record('clock', Clock, '/clock')
        harness.record('top', Image, 'top_camera_images_rgb')
        harness.record('left', Image, 'left_camera_images_rgb')
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        harness.record('task', String, '/dreamzero_sim/task', latched)
        yield harness, sim.log


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
