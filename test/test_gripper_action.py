# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's GripperCommand goals reach a gripper action server with DROID's sign, over DDS.

control_msgs has no wheel: the test builds control_msgs/action/GripperCommand (the upstream
definition) with rosidl first. Four processes: a scripted OpenPI policy (gripper 1.0 = closed for
the first chunks, then 0.0 = open), the policy node on it (``engine.backend: remote``,
``gripper.interface: action``), ``dreamzero-sim-arm`` serving ``gripper_action`` on a Franka
hand range (0.04 m open, 0.0 closed), and this harness publishing the cameras.
"""

from interface_support import control_msgs_env
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0


def test_gripper_goals_close_when_the_policy_says_one(closed_loop, monkeypatch):
    from sensor_msgs.msg import JointState

    from dreamzero_ros.droid_clips import demo_clips

    for name, value in control_msgs_env().items():
        monkeypatch.setenv(name, value)
    loop = closed_loop('gripper_action_harness')
    harness, log = loop.harness, loop.log
    loop.serve_policy('gripper', '6')
    loop.start_sim(
        'gripper.interface:=action', 'gripper.name:=gripper_action', 'gripper.speed:=0.2'
    )
    harness.record('states', JointState, 'joint_states')
    loop.stream_cameras(demo_clips(30)[0])

    def gripper() -> float | None:
        states = harness.messages('states')
        return states[-1].position[7] if states else None

    # the arm is seen before the node starts, so nothing can have moved the gripper yet
    assert harness.wait_for(lambda: gripper() is not None, 30, 'joint states', log)
    assert abs(gripper() - 0.04) < 1e-6  # starts open
    loop.start_node(
        'engine.warmup:=false',
        'scheduler.step_duration:=0.0',
        'scheduler.min_replan_period:=0.5',  # 6 closed chunks: 3 s closed
        'gripper.interface:=action',
        'gripper.command_name:=gripper_action',
    )
    harness.wait_for(lambda: abs(gripper()) < 1e-4, TIMEOUT, 'the gripper to close', log)
    harness.wait_for(
        lambda: abs(gripper() - 0.04) < 1e-4, TIMEOUT, 'the gripper to open again', log
    )
    goals = [line[-6:] for line in log().splitlines() if 'gripper goal: position' in line]
    # (the first plan starts on the measured, open gripper: an open goal may come first)
    assert '0.0000' in goals and goals[-1] == '0.0400', goals
    assert goals.index('0.0000') < len(goals) - 1
