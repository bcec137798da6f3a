# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulated arm checks its 1 kHz command as a Franka does (core/control/command_check.py).

A harness publishes trajectories to ``dreamzero-sim-arm`` over DDS and reads its diagnostics:
quintic points pass, the same motion as cubic points steps the acceleration and is flagged.
"""

from node_support import ARM, node_diagnostics
import pytest

from dreamzero_ros.core.control.command_check import FRANKA_ERRORS

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


def test_the_simulated_arm_flags_what_a_franka_would_abort(closed_loop):
    """Quintic points pass a Franka's checks; as cubics the same points step the acceleration."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from dreamzero_ros.core.robot.panda import PANDA_READY
    from dreamzero_ros.ros.conversions import ROS_MESSAGES

    loop = closed_loop('franka_check_harness')
    arm_log = loop.start_sim('gripper.interface:=none').log
    harness = loop.harness
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    publisher = harness.node.create_publisher(
        JointTrajectory, 'joint_trajectory_controller/joint_trajectory', 10
    )

    def report(since):
        return node_diagnostics(harness, since, name='sim_arm')

    def move(degree, offset):
        # joint 2 up 0.5 rad at 2 rad/s, then another 0.5 rad to rest, from where it is
        msg = JointTrajectory(joint_names=ARM)
        for seconds, step, speed in ((0.5, 0.5, 2.0), (1.0, 1.0, 0.0)):
            position = list(PANDA_READY)
            position[1] += offset + step
            velocity = [0.0] * 7
            velocity[1] = speed
            msg.points.append(
                JointTrajectoryPoint(
                    positions=position,
                    velocities=velocity,
                    accelerations=[0.0] * 7 if degree == 'quintic' else [],
                    time_from_start=ROS_MESSAGES.duration(int(seconds * 1e9)),
                )
            )
        publisher.publish(msg)

    harness.wait_for(lambda: report(0.0), 30, 'the simulated arm', arm_log)
    harness.wait_for(lambda: publisher.get_subscription_count() > 0, 10, 'the arm', arm_log)
    move('quintic', 0.0)
    moved = harness.now() + 2.0
    status, values = harness.wait_for(lambda: report(moved), 10, 'a report', arm_log)
    assert values['trajectories_accepted'] == '1', values
    assert all(values[name] == '0' for name in FRANKA_ERRORS.values()), values
    assert status.level == DiagnosticStatus.OK, status.message
    assert max(float(v) for v in values['acceleration_jump_max'].split()) < 1e-3
    move('cubic', 1.0)  # the same motion back: +-4 rad/s^2 cubics, 8 rad/s^2 steps
    moved = harness.now() + 2.0
    status, values = harness.wait_for(lambda: report(moved), 10, 'a report', arm_log)
    jerk = FRANKA_ERRORS['jerk']
    assert int(values[jerk]) > 0, values
    assert status.level == DiagnosticStatus.ERROR and jerk in status.message
    assert float(values['acceleration_jump_max'].split()[1]) > 7.9
    assert float(values['jerk_max'].split()[1]) > float(values['jerk_limit'].split()[1])
    harness.wait_for(lambda: f'breaks a Franka limit: {jerk}' in arm_log(), 5, 'a log', arm_log)
