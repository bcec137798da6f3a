# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulated robot's action servers: FollowJointTrajectory and GripperCommand.

A goal runs as a coroutine that waits for the robot's next update
(:meth:`~dreamzero_ros.ros.sim_arm.SimArm.next_update`) between its checks, so that any number
of goals may run at once without holding an executor thread. A trajectory goal is validated as
the controller's topic validates a trajectory, succeeds once its last point's time is reached
and is canceled when the next goal preempts it, as joint_trajectory_controller does; a gripper
goal succeeds when the fingers reach the position (or stall, where the robot says so) and is
aborted by a newer goal, as GripperActionController does. Both need control_msgs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import rclpy
from rclpy.node import Node

if TYPE_CHECKING:
    from dreamzero_ros.ros.sim_arm import SimArm
    from dreamzero_ros.ros.sim_controllers import SimGripper, TrajectoryController

#: JTC's error string of a goal preempted by a newer one.
PREEMPTED = 'Current goal cancelled due to new incoming action.'


def serve_follow_joint_trajectory(arm: SimArm, host: Node, group: TrajectoryController) -> None:
    """A FollowJointTrajectory server for ``group`` on ``host`` (its controller's node).

    Raises:
        RuntimeError: control_msgs is not installed.

    """
    try:
        from control_msgs.action import FollowJointTrajectory
    except ImportError as error:
        raise RuntimeError(
            f'action group {group.spec.name!r}: follow_joint_trajectory needs control_msgs; '
            'install it (ros-<distro>-control-msgs) or use output joint_trajectory'
        ) from error
    from rclpy.action import ActionServer, CancelResponse, GoalResponse

    def check(request: Any) -> GoalResponse:
        reason = arm.check_trajectory(group, request.trajectory)
        return GoalResponse.REJECT if reason else GoalResponse.ACCEPT

    async def execute(handle: Any) -> Any:
        return await _follow(arm, group, handle, FollowJointTrajectory.Result())

    ActionServer(
        host,
        FollowJointTrajectory,
        arm.resolve_topic_name(group.spec.target),
        execute,
        goal_callback=check,
        cancel_callback=lambda goal: CancelResponse.ACCEPT,
        callback_group=arm.callback_group,
    )


async def _follow(arm: SimArm, group: TrajectoryController, goal_handle: Any, result: Any) -> Any:
    """Follow an accepted goal until its last point (succeeded) or the next goal (canceled)."""
    from rclpy.impl.implementation_singleton import rclpy_implementation

    generation = arm.accept(group, goal_handle.request.trajectory)
    arm.publish_diagnostics()
    while rclpy.ok():
        with arm.lock:
            preempted = generation != group.generation
            end = group.follower.end_time
        if preempted or goal_handle.is_cancel_requested:
            # JTC cancels a preempted goal with INVALID_GOAL and PREEMPTED
            if not goal_handle.is_cancel_requested:
                # as rclpy's server does on a cancel request
                goal_handle._update_state(rclpy_implementation.GoalEvent.CANCEL_GOAL)
            result.error_code = result.INVALID_GOAL if preempted else result.SUCCESSFUL
            result.error_string = PREEMPTED if preempted else ''
            goal_handle.canceled()
            return result
        if end is not None and arm.now() >= end:
            result.error_code = result.SUCCESSFUL
            goal_handle.succeed()
            return result
        await arm.next_update()
    goal_handle.abort()
    return result


def serve_gripper_command(arm: SimArm, host: Node, name: str, gripper: SimGripper) -> None:
    """A GripperCommand server ``name`` for ``gripper`` on ``host`` (its controller's node).

    Raises:
        RuntimeError: control_msgs is not installed.

    """
    try:
        from control_msgs.action import GripperCommand
    except ImportError as error:
        raise RuntimeError(
            'gripper.interface action needs control_msgs (GripperCommand); install it '
            '(ros-<distro>-control-msgs) or choose float64 / joint_trajectory'
        ) from error
    from rclpy.action import ActionServer, CancelResponse

    async def execute(handle: Any) -> Any:
        return await _move_gripper(arm, gripper, handle, GripperCommand)

    ActionServer(
        host,
        GripperCommand,
        name,
        execute,
        cancel_callback=lambda goal: CancelResponse.ACCEPT,
        callback_group=arm.callback_group,
    )


async def _move_gripper(arm: SimArm, gripper: SimGripper, goal_handle: Any, action: Any) -> Any:
    """Move to the goal's position; a newer goal preempts this one (it is aborted)."""
    with arm.lock:
        gripper.goal_generation += 1
        generation = gripper.goal_generation
        gripper.target = float(goal_handle.request.command.position)
    label = f' ({gripper.spec.name})' if len(arm.grippers) > 1 else ''
    arm.get_logger().info(f'gripper goal{label}: position {gripper.target:.4f}')
    result = action.Result()
    while rclpy.ok():
        with arm.lock:
            preempted = generation != gripper.goal_generation
            position, reached = gripper.position, arm.gripper_reached(gripper)
        result.position, result.reached_goal = position, reached
        if preempted:
            goal_handle.abort()
            return result
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
            return result
        if result.reached_goal:
            goal_handle.succeed()
            return result
        goal_handle.publish_feedback(action.Feedback(position=position))
        await arm.next_update()
    goal_handle.abort()
    return result
