# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The plan in 3D for RViz and Foxglove: planned and executed end-effector paths, the envelope.

Topics, all in ``frame_id`` (the robot's base frame):

- ``~/plan_path`` (nav_msgs/Path): the end-effector path of each published plan's rows, one
  pose per row stamped at the row's time;
- ``~/executed_path`` (nav_msgs/Path): the measured end-effector path of the recent past;
- ``~/envelope`` (visualization_msgs/MarkerArray, latched): the workspace envelope as lines,
  one marker per part (workspace box, table plane, keep-out boxes).

The forward kinematics is a callable
(:data:`~dreamzero_ros.core.motion.plan_geometry.ForwardKinematics`);
:meth:`PlanViews.from_description` makes it from the robot description (core/robot/kinematics.py);
:func:`envelope_and_views` makes the policy node's safety envelope and views from its settings.
Orientations are left as identity: the paths carry positions. Nothing is computed for a topic nobody
subscribes to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
import dataclasses

from geometry_msgs.msg import Point, PoseStamped
from nav_msgs.msg import Path
import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker, MarkerArray

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.motion.envelope import Envelope, EnvelopeConfig
from dreamzero_ros.core.motion.plan_geometry import (
    ExecutedPath,
    ForwardKinematics,
    description_fk,
    end_effector_path,
    envelope_outline,
    plan_frames,
)
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.ros.conversions import to_time

LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
#: Points the executed path keeps: about 13 s of motion at 15 Hz; its message then costs about
#: 0.6 ms to build and serialize (benchmarks/plan_views.py).
EXECUTED_POINTS = 200
#: RGBA of each envelope part; other parts are drawn like the workspace.
ENVELOPE_COLORS = {
    'workspace': (1.0, 0.6, 0.0, 0.8),
    'table': (0.3, 0.6, 1.0, 0.8),
    'keep_out': (1.0, 0.1, 0.1, 0.9),
}


def pose_msg(frame_id: str, time: float, point: np.ndarray) -> PoseStamped:
    """A PoseStamped at ``point (3,)`` stamped ``time``, orientation identity."""
    pose = PoseStamped()
    pose.header.frame_id = frame_id
    pose.header.stamp = to_time(float(time))
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = map(float, point)
    pose.pose.orientation.w = 1.0
    return pose


def path_msg(frame_id: str, stamp: float, times: np.ndarray, points: np.ndarray) -> Path:
    """A nav_msgs/Path of ``points (N, 3)`` stamped ``times (N,)`` in ``frame_id``."""
    msg = Path()
    msg.header.frame_id = frame_id
    msg.header.stamp = to_time(stamp)
    msg.poses = [pose_msg(frame_id, time, point) for time, point in zip(times, points, strict=True)]
    return msg


def envelope_markers(
    frame_id: str, parts: Mapping[str, np.ndarray], stamp: float = 0.0
) -> MarkerArray:
    """One LINE_LIST marker per part of segments ``(K, 2, 3)`` (e.g. :func:`envelope_outline`)."""
    markers = []
    for index, (part, segments) in enumerate(parts.items()):
        marker = Marker()
        marker.header.frame_id = frame_id
        marker.header.stamp = to_time(stamp)
        marker.ns, marker.id = 'dreamzero_envelope', index
        marker.type, marker.action = Marker.LINE_LIST, Marker.ADD
        marker.pose.orientation.w = 1.0
        marker.scale.x = 0.005
        color = ENVELOPE_COLORS.get(part, ENVELOPE_COLORS['workspace'])
        marker.color.r, marker.color.g, marker.color.b, marker.color.a = color
        for start, end in np.asarray(segments, dtype=np.float64):
            marker.points.append(Point(x=float(start[0]), y=float(start[1]), z=float(start[2])))
            marker.points.append(Point(x=float(end[0]), y=float(end[1]), z=float(end[2])))
        markers.append(marker)
    return MarkerArray(markers=markers)


class PlanViews:
    """Publishes the planned and executed end-effector paths and the envelope of one node."""

    def __init__(
        self,
        node: Node,
        fk: ForwardKinematics,
        frame_id: str,
        envelope: Mapping[str, np.ndarray] | None = None,
        executed_points: int = EXECUTED_POINTS,
        arm_joints: Sequence[str] = (),
    ) -> None:
        """``envelope``: segments ``(K, 2, 3)`` by part, published once (latched).

        ``arm_joints``: the names :meth:`note_joint_state` reads, in the FK's order.
        """
        self._node = node
        self._fk = fk
        self._frame_id = frame_id
        self._arm_joints = tuple(arm_joints)
        self._joint_state: JointState | None = None
        self._executed = ExecutedPath(fk, executed_points)
        # each kept point's message, built once: a long path is not rebuilt at every step
        self._executed_poses: deque[PoseStamped] = deque(maxlen=executed_points)
        self._plan = node.create_publisher(Path, '~/plan_path', 10)
        self._executed_pub = node.create_publisher(Path, '~/executed_path', 10)
        self._envelope = node.create_publisher(MarkerArray, '~/envelope', LATCHED)
        if envelope is not None:
            self._envelope.publish(envelope_markers(frame_id, envelope))

    @classmethod
    def from_description(
        cls,
        node: Node,
        urdf: str,
        arm_joints: Sequence[str],
        link: str,
        envelope: EnvelopeConfig,
        draw_envelope: bool,
    ) -> PlanViews:
        """Paths of ``link`` in the envelope's frame; the envelope drawn if ``draw_envelope``.

        Raises:
            ValueError: the description lacks a joint or ``link``, or the frame moves.

        """
        fk, frame_id = description_fk(urdf, tuple(arm_joints), link, envelope.frame)
        parts = envelope_outline(envelope) if draw_envelope else None
        return cls(node, fk, frame_id, parts, arm_joints=arm_joints)

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
            self._executed_poses.append(pose_msg(self._frame_id, *self._executed.last))
            msg = Path(poses=list(self._executed_poses))
            msg.header.frame_id = self._frame_id
            msg.header.stamp = to_time(stamp)
            self._executed_pub.publish(msg)

    def note_joint_state(self, msg: JointState) -> None:
        """Keep the newest joint state naming the arm joints, for :meth:`publish_executed`."""
        if self._arm_joints and self._arm_joints[0] in msg.name:
            self._joint_state = msg

    def publish_executed(self) -> None:
        """Add the newest noted arm joints to the executed path (once), if watched."""
        msg, self._joint_state = self._joint_state, None
        if msg is None or self._executed_pub.get_subscription_count() == 0:
            return
        index = {name: i for i, name in enumerate(msg.name)}
        if not all(index.get(name, len(msg.position)) < len(msg.position)
                   for name in self._arm_joints):  # fmt: skip
            return
        joints = np.array([msg.position[index[name]] for name in self._arm_joints])
        if not np.all(np.isfinite(joints)):  # refused by the observation cache anyway
            return
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.on_joints(stamp, joints)

    def destroy(self) -> None:
        """Destroy the publishers."""
        for publisher in (self._plan, self._executed_pub, self._envelope):
            self._node.destroy_publisher(publisher)


def envelope_and_views(
    node: Node,
    settings: NodeSettings,
    description: RobotDescription | None,
    arm_joints: Sequence[str],
    views: bool = True,
) -> tuple[Envelope | None, PlanViews | None]:
    """The policy node's safety envelope and (with ``views``) plan views over ``arm_joints``.

    ``arm_joints`` are every arm column's joint (all trajectory groups of a robot with several
    arms), so the envelope's links may lie on any of them. The envelope is None when
    envelope.enabled is false; the plan views where no ``description`` was read, plan.enabled
    is false or ``views`` is (which checks what the views need without making them).

    Raises:
        ValueError: the description is missing or lacks a joint, link or frame named.

    """
    urdf = description.urdf if description is not None else None
    envelope = plan_views = None
    if settings.envelope.enabled:
        if urdf is None:
            raise ValueError(
                'envelope.enabled needs the robot description: set '
                'robot_description.source to topic (robot_state_publisher) or file'
            )
        envelope = Envelope.from_description(urdf, arm_joints, settings.envelope_config)
        if views:
            node.get_logger().info(
                f'safety envelope on {", ".join(settings.envelope.links)} in '
                f'{settings.envelope.frame or "the description root"}'
            )
    if urdf is not None and settings.plan.enabled:
        arm = tuple(arm_joints)
        link, frame = plan_frames(urdf, arm, settings.plan.link, settings.envelope.frame)
        envelope_config = dataclasses.replace(settings.envelope_config, frame=frame)
        if not views:
            description_fk(urdf, arm, link, frame)  # raises as the views would
        else:
            plan_views = PlanViews.from_description(
                node, urdf, arm, link, envelope_config, settings.envelope.enabled
            )
    return envelope, plan_views
