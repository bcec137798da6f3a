# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The plan in 3D for RViz and Foxglove: planned and executed end-effector paths, the envelope.

Topics, all in ``frame_id`` (the robot's base frame):

- ``~/plan_path`` (nav_msgs/Path): the end-effector path of each published plan's rows, one
  pose per row stamped at the row's time;
- ``~/executed_path`` (nav_msgs/Path): the measured end-effector path of the recent past;
- ``~/envelope`` (visualization_msgs/MarkerArray, latched): the workspace envelope as lines.

The forward kinematics is a callable (:data:`~dreamzero_ros.core.plan_geometry.ForwardKinematics`),
e.g. the robot description through a kinematics library; nothing here knows the robot.
Orientations are left as identity: the paths carry positions.
"""

from __future__ import annotations

from geometry_msgs.msg import Point, PoseStamped
from nav_msgs.msg import Path
import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import Marker, MarkerArray

from dreamzero_ros.core.plan_geometry import ExecutedPath, ForwardKinematics, end_effector_path
from dreamzero_ros.ros.conversions import to_time

LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


def path_msg(frame_id: str, stamp: float, times: np.ndarray, points: np.ndarray) -> Path:
    """A nav_msgs/Path of ``points (N, 3)`` stamped ``times (N,)`` in ``frame_id``."""
    msg = Path()
    msg.header.frame_id = frame_id
    msg.header.stamp = to_time(stamp)
    for time, point in zip(times, points, strict=True):
        pose = PoseStamped()
        pose.header.frame_id = frame_id
        pose.header.stamp = to_time(float(time))
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = map(float, point)
        pose.pose.orientation.w = 1.0
        msg.poses.append(pose)
    return msg


def envelope_markers(frame_id: str, segments: np.ndarray, stamp: float = 0.0) -> MarkerArray:
    """A LINE_LIST marker of ``segments (K, 2, 3)`` (e.g. :func:`.plan_geometry.box_edges`)."""
    marker = Marker()
    marker.header.frame_id = frame_id
    marker.header.stamp = to_time(stamp)
    marker.ns, marker.id = 'dreamzero_envelope', 0
    marker.type, marker.action = Marker.LINE_LIST, Marker.ADD
    marker.pose.orientation.w = 1.0
    marker.scale.x = 0.005
    marker.color.r, marker.color.g, marker.color.b, marker.color.a = 1.0, 0.6, 0.0, 0.8
    for start, end in np.asarray(segments, dtype=np.float64):
        marker.points.append(Point(x=float(start[0]), y=float(start[1]), z=float(start[2])))
        marker.points.append(Point(x=float(end[0]), y=float(end[1]), z=float(end[2])))
    return MarkerArray(markers=[marker])


class PlanViews:
    """Publishes the planned and executed end-effector paths and the envelope of one node."""

    def __init__(
        self,
        node: Node,
        fk: ForwardKinematics,
        frame_id: str,
        envelope: np.ndarray | None = None,
        executed_points: int = 500,
    ) -> None:
        """``envelope``: segments ``(K, 2, 3)`` to draw, published once (latched)."""
        self._node = node
        self._fk = fk
        self._frame_id = frame_id
        self._executed = ExecutedPath(fk, executed_points)
        self._plan = node.create_publisher(Path, '~/plan_path', 10)
        self._executed_pub = node.create_publisher(Path, '~/executed_path', 10)
        self._envelope = node.create_publisher(MarkerArray, '~/envelope', LATCHED)
        if envelope is not None:
            self._envelope.publish(envelope_markers(frame_id, envelope))

    def on_plan(self, stamp: float, times: np.ndarray, rows: np.ndarray) -> None:
        """Publish the path of a plan's arm rows ``(N, n)`` at ``times (N,)``, if watched."""
        if self._plan.get_subscription_count() == 0:
            return
        points = end_effector_path(self._fk, rows)
        self._plan.publish(path_msg(self._frame_id, stamp, np.asarray(times), points))

    def on_joints(self, stamp: float, joints: np.ndarray) -> None:
        """Add measured arm joints; publish the executed path when it grew and is watched."""
        if self._executed_pub.get_subscription_count() == 0:
            return
        if self._executed.add(stamp, joints):
            executed = self._executed
            self._executed_pub.publish(
                path_msg(self._frame_id, stamp, executed.times, executed.points)
            )

    def destroy(self) -> None:
        """Destroy the publishers."""
        for publisher in (self._plan, self._executed_pub, self._envelope):
            self._node.destroy_publisher(publisher)
