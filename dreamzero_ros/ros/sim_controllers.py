# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The state of the simulated robot's controllers: trajectory controllers, grippers, bases.

Plain state that :class:`~dreamzero_ros.ros.sim_arm.SimArm` updates under its lock: a
joint_trajectory_controller's rules and follower, a gripper joint moving towards its target, a
mobile base integrating its last Twist into a planar pose (and its odometry message).
"""

from __future__ import annotations

from typing import Any

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np

from dreamzero_ros.core.motion.jtc import ControllerRules, TrajectoryFollower
from dreamzero_ros.core.robot.action_groups import GroupSpec


class TrajectoryController:
    """One simulated joint_trajectory_controller: its rules, follower and counts."""

    def __init__(self, spec: GroupSpec, rules: ControllerRules, start: np.ndarray) -> None:
        self.spec = spec
        self.rules = rules
        self.follower = TrajectoryFollower(rules.joints, start)
        self.accepted = 0
        self.rejected = 0
        #: Counts the trajectories accepted: an action goal runs while it is the newest.
        self.generation = 0


class SimGripper:
    """One simulated gripper joint moving towards its target."""

    def __init__(self, spec: GroupSpec, position: float) -> None:
        self.spec = spec
        self.position = position
        self.target = position
        self.velocity = 0.0
        self.goal_generation = 0


class SimBase:
    """A mobile base integrating its last Twist command into a planar pose."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self.command = Twist()
        self.commanded_at = -np.inf
        self.pose = np.zeros(3)  # x, y, yaw

    def move(self, now: float, seconds: float, timeout: float) -> Twist:
        """Integrate ``seconds`` of the last command (none once ``timeout`` old); the command."""
        command = self.command if now - self.commanded_at <= timeout else Twist()
        self.pose += planar_step(self.pose[2], command, seconds)
        return command


def planar_step(yaw: float, twist: Twist, seconds: float) -> np.ndarray:
    """Change of ``(x, y, yaw)`` over ``seconds`` at ``twist`` (body frame)."""
    forward, sideways = twist.linear.x, twist.linear.y
    dx = (forward * np.cos(yaw) - sideways * np.sin(yaw)) * seconds
    dy = (forward * np.sin(yaw) + sideways * np.cos(yaw)) * seconds
    return np.array([dx, dy, twist.angular.z * seconds])


def odometry_msg(stamp: Any, pose: np.ndarray, twist: Twist) -> Odometry:
    """nav_msgs/Odometry of a planar ``pose`` (x, y, yaw) moving at ``twist``."""
    msg = Odometry()
    msg.header.stamp = stamp
    msg.header.frame_id = 'odom'
    msg.child_frame_id = 'base_link'
    msg.pose.pose.position.x, msg.pose.pose.position.y = float(pose[0]), float(pose[1])
    msg.pose.pose.orientation.z = float(np.sin(pose[2] / 2))
    msg.pose.pose.orientation.w = float(np.cos(pose[2] / 2))
    msg.twist.twist = twist
    return msg
