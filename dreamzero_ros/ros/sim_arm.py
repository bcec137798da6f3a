# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A simulated ros2_control arm: joint_trajectory_controller's rules and splines, and a gripper.

``dreamzero-sim-arm`` stands in for a robot and its controllers in tests and the demo. It
subscribes to ``<controller>/joint_trajectory`` (trajectory_msgs/JointTrajectory), rejects what
joint_trajectory_controller would reject (logged, and the reason published on ``~/rejected``),
follows accepted trajectories by time as JTC does (core/jtc.py) and publishes ``joint_states``
(arm joints and the gripper joint, positions and velocities) at ``rate_hz``, so that a policy
node's loop closes; ``/diagnostics`` (status ``<node>: <controller>``) counts the trajectories
accepted and rejected, every second and at each trajectory. The gripper is commanded through
``gripper.interface``: a trajectory_msgs/JointTrajectory topic (a gripper trajectory
controller: the last point is the target; the default, which needs only the ROS 2 wheels), a
``control_msgs/action/GripperCommand`` action server (as franka_gripper's ``gripper_action`` or
ros2_control's GripperActionController; needs control_msgs), a std_msgs/Float64 topic, or none.
The fingers move towards their target at ``gripper.speed``. Once up it logs a ``ready:`` line;
its diagnostics carry ``hardware_id`` ``dreamzero_sim_arm``.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.jtc import ControllerRules, TrajectoryFollower, validate
from dreamzero_ros.core.status_report import ERROR, OK, StatusReport
from dreamzero_ros.ros.conversions import diagnostics_msg, to_time, trajectory_from_msg

#: Franka Panda "ready" pose: the default start of the simulated arm.
PANDA_READY = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
GRIPPER_INTERFACES = ('action', 'float64', 'joint_trajectory', 'none')
#: ``hardware_id`` of the simulated arm's diagnostics (the policy node's is ``dreamzero``).
HARDWARE_ID = 'dreamzero_sim_arm'

PARAMETERS: dict[str, tuple[Any, str]] = {
    'joints': ([f'panda_joint{i}' for i in range(1, 8)], 'Joints of the arm controller.'),
    'initial_positions': (PANDA_READY, 'Start positions of the joints, rad.'),
    'controller': ('joint_trajectory_controller', 'Controller name (topic namespace).'),
    'allow_partial_joints_goal': (False, 'JTC: accept trajectories naming some of the joints.'),
    'allow_nonzero_velocity_at_trajectory_end': (
        False,
        'JTC: accept trajectories whose last point moves.',
    ),
    'joint_states_topic': ('joint_states', 'sensor_msgs/JointState output.'),
    'rate_hz': (100.0, 'Update and joint_states rate, Hz.'),
    'gripper.joint': ('panda_finger_joint1', 'Gripper joint in joint_states; empty: no gripper.'),
    'gripper.interface': (
        'joint_trajectory',
        f'One of: {", ".join(GRIPPER_INTERFACES)} (action needs control_msgs).',
    ),
    'gripper.name': (
        'gripper_controller/joint_trajectory',
        'Action name (action) or topic (float64, joint_trajectory) of the gripper command.',
    ),
    'gripper.initial_position': (0.04, 'Start position of the gripper joint (Franka: open).'),
    'gripper.speed': (0.1, 'Finger speed, joint units per second.'),
}


class SimArm(Node):
    """The simulated arm and gripper."""

    def __init__(self, node_name: str = 'sim_arm', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        for name, (default, description) in PARAMETERS.items():
            self.declare_parameter(name, default, _descriptor(description))
        value = self._value
        if value('gripper.interface') not in GRIPPER_INTERFACES:
            raise ValueError(f'gripper.interface must be one of {GRIPPER_INTERFACES}')
        self.rules = ControllerRules(
            tuple(value('joints')),
            allow_partial_joints_goal=value('allow_partial_joints_goal'),
            allow_nonzero_velocity_at_trajectory_end=value(
                'allow_nonzero_velocity_at_trajectory_end'
            ),
        )
        self.follower = TrajectoryFollower(self.rules.joints, np.array(value('initial_positions')))
        self.gripper_joint = value('gripper.joint')
        self.gripper_position = float(value('gripper.initial_position'))
        self.gripper_target = self.gripper_position
        self.accepted = 0
        self.rejected = 0
        self.last_rejection = ''
        self._lock = threading.Lock()
        self._last_update = self._now()
        group = ReentrantCallbackGroup()
        controller = value('controller')
        self.create_subscription(
            JointTrajectory, f'{controller}/joint_trajectory', self._on_trajectory, 10
        )
        self._rejections = self.create_publisher(String, '~/rejected', 10)
        self._states = self.create_publisher(JointState, value('joint_states_topic'), 10)
        self._diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._status_name = f'{self.get_name()}: {controller}'
        self.create_timer(1.0 / value('rate_hz'), self._tick, callback_group=group)
        self.create_timer(1.0, self._publish_diagnostics)
        self._create_gripper_interface(value('gripper.interface'), value('gripper.name'), group)

    def ready_line(self) -> str:
        """What the arm serves, logged once it is up."""
        gripper = self._value('gripper.interface') if self.gripper_joint else 'none'
        gripper_text = (
            f'gripper {self.gripper_joint} by {gripper} on {self._value("gripper.name")}'
            if gripper != 'none'
            else 'no gripper command'
        )
        controller = self._value('controller')
        return (
            f'ready: {len(self.rules.joints)} joints on {controller}/joint_trajectory, '
            f'{gripper_text}, {self._value("joint_states_topic")} at {self._value("rate_hz"):g} Hz'
        )

    def _value(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _create_gripper_interface(self, interface: str, name: str, group: Any) -> None:
        if interface == 'none' or not self.gripper_joint:
            return
        if interface == 'float64':
            self.create_subscription(Float64, name, lambda msg: self._set_target(msg.data), 10)
        elif interface == 'joint_trajectory':
            self.create_subscription(JointTrajectory, name, self._on_gripper_trajectory, 10)
        else:
            try:
                from control_msgs.action import GripperCommand
            except ImportError as error:
                raise RuntimeError(
                    'gripper.interface action needs control_msgs (GripperCommand); install it '
                    '(ros-<distro>-control-msgs) or choose float64 / joint_trajectory'
                ) from error
            from rclpy.action import ActionServer, CancelResponse

            self._gripper_type = GripperCommand
            self._goal_generation = 0
            ActionServer(
                self,
                GripperCommand,
                name,
                self._execute_gripper_goal,
                cancel_callback=lambda goal: CancelResponse.ACCEPT,
                callback_group=group,
            )

    def _set_target(self, position: float) -> None:
        with self._lock:
            self.gripper_target = float(position)

    def _on_gripper_trajectory(self, msg: JointTrajectory) -> None:
        if self.gripper_joint in msg.joint_names and msg.points:
            index = list(msg.joint_names).index(self.gripper_joint)
            self._set_target(msg.points[-1].positions[index])

    def _execute_gripper_goal(self, goal_handle: Any) -> Any:
        """Move to the goal's position; a newer goal preempts this one (it is aborted)."""
        with self._lock:
            self._goal_generation += 1
            generation = self._goal_generation
            self.gripper_target = float(goal_handle.request.command.position)
        self.get_logger().info(f'gripper goal: position {self.gripper_target:.4f}')
        result = self._gripper_type.Result()
        while rclpy.ok():
            with self._lock:
                preempted = generation != self._goal_generation
                position, target = self.gripper_position, self.gripper_target
            result.position, result.reached_goal = position, abs(position - target) < 1e-6
            if preempted:
                goal_handle.abort()
                return result
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return result
            if result.reached_goal:
                goal_handle.succeed()
                return result
            feedback = self._gripper_type.Feedback(position=position)
            goal_handle.publish_feedback(feedback)
            time.sleep(0.02)
        goal_handle.abort()
        return result

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        now = self._now()
        trajectory = trajectory_from_msg(msg)
        reason = validate(trajectory, self.rules, now)
        if reason:
            self.rejected += 1
            self.last_rejection = reason
            self.get_logger().error(f'trajectory rejected: {reason}')
            self._rejections.publish(String(data=reason))
        else:
            with self._lock:
                self.follower.update(now)
                self.follower.accept(trajectory, now)
                self.accepted += 1
        self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        with self._lock:
            gripper = self.gripper_position
        values = (
            ('trajectories_accepted', str(self.accepted)),
            ('trajectories_rejected', str(self.rejected)),
            ('last_rejection', self.last_rejection),
            ('gripper_position', f'{gripper:.4f}'),
        )
        message = f'{self.rejected} rejected' if self.rejected else 'every trajectory accepted'
        report = StatusReport(ERROR if self.rejected else OK, message, values)
        self._diagnostics.publish(
            diagnostics_msg(self._now(), self._status_name, report, HARDWARE_ID)
        )

    def _tick(self) -> None:
        now = self._now()
        with self._lock:
            self.follower.update(now)
            elapsed = max(0.0, now - self._last_update)
            self._last_update = now
            step = self._value('gripper.speed') * elapsed
            delta = float(np.clip(self.gripper_target - self.gripper_position, -step, step))
            self.gripper_position += delta
            names = list(self.rules.joints)
            positions = list(self.follower.position)
            velocities = list(self.follower.velocity)
            if self.gripper_joint:
                names.append(self.gripper_joint)
                positions.append(self.gripper_position)
                velocities.append(delta / elapsed if elapsed > 0 else 0.0)
        msg = JointState(name=names, position=positions, velocity=velocities)
        msg.header.stamp = to_time(now)
        self._states.publish(msg)


def _descriptor(description: str) -> Any:
    from rcl_interfaces.msg import ParameterDescriptor

    return ParameterDescriptor(description=description)


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-sim-arm``."""
    argv = sys.argv[1:] if args is None else args
    if '-h' in argv or '--help' in argv:
        print('usage: dreamzero-sim-arm [--ros-args -p name:=value ...]\n\n' + __doc__ + '\n')
        for name, (default, description) in PARAMETERS.items():
            print(f'  {name} (default {default!r}): {description}')
        return 0
    rclpy.init(args=['dreamzero-sim-arm', *argv])
    try:
        node = SimArm()
    except (RuntimeError, ValueError) as error:
        print(f'dreamzero-sim-arm: {error}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    node.get_logger().info(node.ready_line())
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
