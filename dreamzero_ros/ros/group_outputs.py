# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's controller outputs: one per action group (core/robot/action_groups.py).

- ``joint_trajectory``: trajectory_msgs/JointTrajectory on the group's topic, its joints only;
- ``follow_joint_trajectory``: the same trajectory as a control_msgs/action/FollowJointTrajectory
  goal (a new goal preempts the previous one; needs control_msgs); a rejected goal or one that
  ends with an error code is logged and counted (:attr:`GroupOutputs.goal_failures`);
- ``gripper``: :class:`~dreamzero_ros.ros.gripper_output.GripperOutput` with the group's own
  :class:`~dreamzero_ros.core.robot.gripper.GripperCommander`, sent every control step when due;
- ``twist``: geometry_msgs/Twist on the group's topic every control step, zero while holding;
- ``none``: nothing.

Every group gets its columns of the same plans and holds, so a hold stops all of them together.
"""

from __future__ import annotations

from collections.abc import Sequence
import time
from typing import Any

from geometry_msgs.msg import Twist
from rclpy.duration import Duration
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.control.repeat_limiter import RepeatLimiter
from dreamzero_ros.core.robot.action_groups import ActionGroup, GroupLayout, GroupSpec
from dreamzero_ros.core.robot.gripper import GripperCommander
from dreamzero_ros.ros.conversions import ROS_MESSAGES
from dreamzero_ros.ros.gripper_output import GripperOutput


class GroupOutputs:
    """Publishers, action clients and gripper commanders of every group of ``node``."""

    def __init__(self, node: Any, layout: GroupLayout) -> None:
        """Create every group's output.

        Raises:
            RuntimeError: an action output where control_msgs is not installed.

        """
        self.node = node
        self.layout = layout
        self._handles: dict[str, Any] = {}
        self._grippers: dict[str, tuple[GripperOutput, GripperCommander]] = {}
        #: The last goal sent to each follow_joint_trajectory group (its send future).
        self._goals: dict[str, Any] = {}
        #: Goals a follow_joint_trajectory server rejected or ended with an error, per group.
        self.goal_failures: dict[str, int] = {}
        self._failure_log = RepeatLimiter(period=1.0)  # per group and kind of failure
        try:
            for group in layout.groups:
                self._create(group)
        except RuntimeError:
            self.destroy()
            raise

    @staticmethod
    def check_installed(specs: Sequence[GroupSpec]) -> None:
        """Raise ``RuntimeError`` (as creating them would) when an action output lacks its types.

        Called at configure before the policy loads, so that a missing package fails at once.
        """
        for spec in specs:
            needs_actions = spec.output == 'follow_joint_trajectory' or (
                spec.output == 'gripper' and spec.gripper_interface == 'action'
            )
            if not needs_actions:
                continue
            try:
                import control_msgs.action  # noqa: F401
            except ImportError as error:
                what = (
                    'gripper.interface action'
                    if spec.output == 'gripper'
                    else f'action group {spec.name!r}: output follow_joint_trajectory'
                )
                raise RuntimeError(
                    f'{what} needs control_msgs, which is not installed: install '
                    'ros-$ROS_DISTRO-control-msgs (rosdep), or choose an output without actions '
                    '(gripper: float64, joint_trajectory or none; arms: joint_trajectory)'
                ) from error

    def _create(self, group: ActionGroup) -> None:
        spec, node = group.spec, self.node
        if spec.output == 'joint_trajectory':
            self._handles[spec.name] = node.create_lifecycle_publisher(
                JointTrajectory, spec.target, 10
            )
        elif spec.output == 'follow_joint_trajectory':
            try:
                from control_msgs.action import FollowJointTrajectory
            except ImportError as error:
                raise RuntimeError(
                    f'action group {spec.name!r}: output follow_joint_trajectory needs '
                    'control_msgs, which is not installed: install ros-$ROS_DISTRO-control-msgs '
                    '(rosdep) or use output joint_trajectory'
                ) from error
            from rclpy.action import ActionClient

            self._goal_type = FollowJointTrajectory.Goal
            self._handles[spec.name] = ActionClient(node, FollowJointTrajectory, spec.target)
        elif spec.output == 'gripper':
            output = GripperOutput(
                node,
                spec.gripper_interface,
                spec.target,
                spec.gripper_joint,
                spec.max_effort,
                spec.move_time,
            )
            self._grippers[spec.name] = (output, GripperCommander(spec.gripper))
        elif spec.output == 'twist':
            self._handles[spec.name] = node.create_lifecycle_publisher(Twist, spec.target, 10)

    def unmatched(self) -> list[str]:
        """Action outputs whose client has not matched its server yet (goals would be lost)."""
        clients = {name: h for name, h in self._handles.items() if hasattr(h, 'server_is_ready')}
        clients.update({name: output.action_client for name, (output, _) in self._grippers.items()})
        return [name for name, client in clients.items() if client and not client.server_is_ready()]

    def send_trajectory(self, msg_for: Any) -> None:
        """Send every trajectory group ``msg_for(group)`` (a JointTrajectory of its columns)."""
        for group in self.layout.groups:
            spec = group.spec
            if spec.output == 'joint_trajectory':
                self._handles[spec.name].publish(msg_for(group))
            elif spec.output == 'follow_joint_trajectory':
                client = self._handles[spec.name]
                if client.server_is_ready():
                    goal = self._goal_type()
                    goal.trajectory = msg_for(group)
                    sent = client.send_goal_async(goal)
                    sent.add_done_callback(lambda future, spec=spec: self._on_goal(spec, future))
                    self._goals[spec.name] = sent

    def _on_goal(self, spec: GroupSpec, future: Any) -> None:
        """A follow_joint_trajectory server answered a goal: log a rejection, await the result."""
        handle = future.result() if not future.cancelled() and future.exception() is None else None
        if handle is None or not handle.accepted:
            self._goal_failed(spec, 'goal rejected')
            return
        handle.get_result_async().add_done_callback(lambda done: self._on_result(spec, done))

    def _on_result(self, spec: GroupSpec, future: Any) -> None:
        """An aborted goal is a failure; a canceled one was preempted by the next goal (JTC)."""
        from action_msgs.msg import GoalStatus

        response = future.result() if future.exception() is None else None
        if response is not None and response.status == GoalStatus.STATUS_ABORTED:
            result = response.result
            text = result.error_string or 'no error string'
            self._goal_failed(spec, f'goal aborted, error code {result.error_code}: {text}')

    def _goal_failed(self, spec: GroupSpec, what: str) -> None:
        self.goal_failures[spec.name] = self.goal_failures.get(spec.name, 0) + 1
        suffix = self._failure_log.admit(f'{spec.name}: {what}', time.monotonic())
        if suffix is not None:
            self.node.get_logger().error(
                f'action group {spec.name!r}: {spec.target}: {what}{suffix}'
            )

    def send_hold(self, row: Any, settle_ns: int) -> None:
        """Hold every group at its columns of ``row``; bases get a zero Twist."""
        self.send_trajectory(
            lambda group: ROS_MESSAGES.hold(group.spec.joints, group.rows(row), settle_ns)
        )
        self.stop_bases()

    def stop_bases(self) -> None:
        """Send every twist group a zero Twist."""
        for group in self.layout.of('twist'):
            self._handles[group.name].publish(Twist())

    def tick(self, command: Any, commanding: bool, holding: bool) -> None:
        """One control step: grippers when due, base velocities (zero while holding)."""
        for group in self.layout.of('gripper'):
            output, commander = self._grippers[group.name]
            if output.interface == 'none':
                continue
            if not commanding or command is None:
                commander.reset()  # the first command after enabling is always sent
                continue
            position = commander.update(float(group.rows(command)[0]))
            if position is not None and not output.send(position):
                commander.reset()  # no action server yet: try again next tick
        if not commanding:
            return
        for group in self.layout.of('twist'):
            twist = Twist()
            if command is not None and not holding:
                for axis, value in zip(group.spec.axes, group.rows(command), strict=True):
                    part, field = axis.split('.')
                    setattr(getattr(twist, part), field, float(value))
            self._handles[group.name].publish(twist)

    def wait_for_delivery(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s per output) until controllers acknowledged what was sent.

        Topics: every subscriber acknowledged (reliable QoS); actions: the server answered the
        last goal (accepted or not).
        """
        for group in self.layout.groups:
            if group.spec.output in ('joint_trajectory', 'twist'):
                self._handles[group.name].wait_for_all_acked(Duration(seconds=timeout))
            elif group.name in self._goals:
                deadline = time.monotonic() + timeout
                while not self._goals[group.name].done() and time.monotonic() < deadline:
                    time.sleep(0.005)

    def destroy(self) -> None:
        """Release every publisher, action client and gripper output."""
        for name, handle in self._handles.items():
            output = next(g.spec.output for g in self.layout.groups if g.name == name)
            if output == 'follow_joint_trajectory':
                handle.destroy()
            else:
                self.node.destroy_lifecycle_publisher(handle)
        for output, _ in self._grippers.values():
            output.destroy()
        self._handles, self._grippers, self._goals = {}, {}, {}
