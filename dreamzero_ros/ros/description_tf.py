# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A robot description's link frames on tf, from joint states, as robot_state_publisher does.

Fixed joints go once on ``/tf_static`` (reliable, transient local, as tf2's static broadcaster
sends them); every moving joint given a position (its own, or its mimic master's) goes on
``/tf`` with each :meth:`DescriptionTf.publish`, stamped with the joint states' stamp, the
parent link as the frame and the child link as the child frame. RViz's RobotModel display and
Foxglove's URDF layer place the links by these transforms. Needs tf2_msgs (part of every ROS 2
install); without it :func:`description_tf` returns None (:data:`NO_TF` says why).
"""

from __future__ import annotations

from collections.abc import Sequence

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from dreamzero_ros.core.robot.joint_frames import (
    JointFrame,
    joint_frames,
    moving_positions,
    quaternion,
)

#: tf2's static broadcaster's QoS: late subscribers still get the fixed frames.
STATIC_QOS = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
#: tf2's dynamic broadcaster's QoS.
DYNAMIC_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class DescriptionTf:
    """Publishes a description's joint transforms for a node (see the module)."""

    def __init__(self, node: Node, urdf: str, message_type: type) -> None:
        """``message_type``: tf2_msgs/msg/TFMessage."""
        self._frames = joint_frames(urdf)
        self._type = message_type
        self._dynamic = node.create_publisher(message_type, '/tf', DYNAMIC_QOS)
        self._static = node.create_publisher(message_type, '/tf_static', STATIC_QOS)
        stamp = node.get_clock().now().to_msg()
        fixed = [_transform(f, f.transform(), stamp) for f in self._frames if f.fixed]
        self._static.publish(message_type(transforms=fixed))
        #: Moving joints published so far (a joint without a position is never published).
        self.published: set[str] = set()

    def publish(self, stamp: Time, names: Sequence[str], positions: Sequence[float]) -> None:
        """The moving joints' transforms at ``positions`` of ``names``, stamped ``stamp``."""
        given = moving_positions(self._frames, dict(zip(names, positions, strict=True)))
        transforms = [
            _transform(f, f.transform(given[f.name]), stamp)
            for f in self._frames
            if f.name in given
        ]
        self.published.update(given)
        self._dynamic.publish(self._type(transforms=transforms))


def description_tf(node: Node, urdf: str) -> DescriptionTf | None:
    """A :class:`DescriptionTf` for ``node``, or None where tf2_msgs is missing (:data:`NO_TF`)."""
    try:
        from tf2_msgs.msg import TFMessage
    except ImportError:
        return None
    return DescriptionTf(node, urdf, TFMessage)


#: Why the frames are not on tf where :func:`description_tf` returns None.
NO_TF = (
    'no /tf: tf2_msgs is not installed (install ros-<distro>-tf2-msgs, or run '
    'robot_state_publisher)'
)


def _transform(frame: JointFrame, matrix: np.ndarray, stamp: Time) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frame.parent
    msg.child_frame_id = frame.child
    t = msg.transform.translation
    t.x, t.y, t.z = (float(v) for v in matrix[:3, 3])
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = (float(v) for v in quaternion(matrix[:3, :3]))
    return msg
