# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The gripper command output of the policy node: an action goal, a topic, or nothing.

``gripper.interface`` chooses: ``action`` sends ``control_msgs/action/GripperCommand`` goals
(franka_gripper's ``gripper_action``, ros2_control's GripperActionController; a new goal
preempts the previous one), ``float64`` publishes the position as std_msgs/Float64,
``joint_trajectory`` a one-point trajectory_msgs/JointTrajectory for a gripper trajectory
controller, ``none`` nothing. What to send and when is decided by core/robot/gripper.py.
"""

from __future__ import annotations

from typing import Any

from std_msgs.msg import Float64
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.ros.conversions import ROS_MESSAGES


class GripperOutput:
    """Sends gripper positions through the configured interface of ``node``."""

    def __init__(
        self,
        node: Any,
        interface: str,
        name: str,
        joint_name: str,
        max_effort: float,
        move_time: float,
    ) -> None:
        """Create the publisher or action client.

        Raises:
            RuntimeError: ``action`` where control_msgs is not installed.

        """
        self.node = node
        self.interface = interface
        self.joint_name = joint_name
        self.max_effort = max_effort
        self.move_time = move_time
        self._handle: Any = None
        if interface == 'action':
            try:
                from control_msgs.action import GripperCommand
            except ImportError as error:
                raise RuntimeError(
                    'gripper.interface action needs control_msgs (control_msgs/action/'
                    'GripperCommand), which is not installed: install ros-$ROS_DISTRO-control-msgs '
                    '(rosdep), or set gripper.interface to float64, joint_trajectory or none'
                ) from error
            from rclpy.action import ActionClient

            self._goal_type = GripperCommand.Goal
            self._handle = ActionClient(node, GripperCommand, name)
        elif interface == 'float64':
            self._handle = node.create_lifecycle_publisher(Float64, name, 10)
        elif interface == 'joint_trajectory':
            self._handle = node.create_lifecycle_publisher(JointTrajectory, name, 10)

    @property
    def action_client(self) -> Any:
        """The GripperCommand action client (interface ``action``), else None."""
        return self._handle if self.interface == 'action' else None

    def send(self, position: float) -> bool:
        """Command ``position`` (gripper joint units); False when it could not be sent."""
        if self.interface == 'action':
            if not self._handle.server_is_ready():
                return False
            goal = self._goal_type()
            goal.command.position = float(position)
            goal.command.max_effort = float(self.max_effort)
            self._handle.send_goal_async(goal)
        elif self.interface == 'float64':
            self._handle.publish(Float64(data=float(position)))
        elif self.interface == 'joint_trajectory':
            self._handle.publish(
                ROS_MESSAGES.trajectory(
                    0, [self.joint_name], [to_ns(self.move_time)], [[float(position)]]
                )
            )
        else:
            return False
        return True

    def destroy(self) -> None:
        """Release the publisher or action client."""
        if self.interface == 'action':
            self._handle.destroy()
        elif self._handle is not None:
            self.node.destroy_lifecycle_publisher(self._handle)
        self._handle = None
