# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's messages: the shared builders bound to rclpy's classes, and the ROS-only ones.

Trajectories, holds, joint states, images and action chunks come from
:class:`~dreamzero_ros.core.observations.messages.MessageBuilder` (the same code replay writes bags
with), through :data:`ROS_MESSAGES`; this module adds the per-step command, diagnostics and status
messages, which only the node publishes, and reads a JointTrajectory into core/motion/jtc.py's
:class:`~dreamzero_ros.core.motion.jtc.Trajectory` (the simulated arm, the demo).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
import numpy as np
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.control.status_report import StatusReport
from dreamzero_ros.core.motion.jtc import Point, Trajectory
from dreamzero_ros.core.observations.messages import (
    MessageBuilder,
    stamp_seconds,
    stamp_to_ns,
    to_ns,
)

try:  # built by scripts/build_interfaces.sh (or colcon) where rosidl works
    from dreamzero_ros.msg import ActionChunk as ActionChunkMsg
    from dreamzero_ros.msg import PolicyStatus as PolicyStatusMsg
except ImportError:  # pragma: no cover - depends on the install
    ActionChunkMsg = PolicyStatusMsg = None

_STATUS_STATES = {'unconfigured': 0, 'inactive': 1, 'active': 2}


@functools.cache
def ros_message_type(name: str) -> Any:
    """The rclpy class of a full message type name, e.g. ``'sensor_msgs/msg/JointState'``."""
    package, kind, message = name.split('/')
    return getattr(importlib.import_module(f'{package}.{kind}'), message)


#: The shared message builders, making rclpy messages.
ROS_MESSAGES = MessageBuilder(ros_message_type)


def to_time(seconds: float) -> Time:
    """Seconds -> ``builtin_interfaces/Time``."""
    return ROS_MESSAGES.time(to_ns(seconds))


def float_array_msg(values: np.ndarray) -> Float64MultiArray:
    """A command row as ``std_msgs/Float64MultiArray`` (forward_command_controller)."""
    return Float64MultiArray(data=[float(v) for v in values])


def diagnostics_msg(
    stamp: float, name: str, report: StatusReport, hardware_id: str = 'dreamzero'
) -> DiagnosticArray:
    """One ``DiagnosticStatus`` named ``name`` (of ``hardware_id``) from a :class:`StatusReport`."""
    status = DiagnosticStatus(
        level=bytes([report.level]),
        name=name,
        message=report.message,
        hardware_id=hardware_id,
        values=[KeyValue(key=key, value=value) for key, value in report.values],
    )
    msg = DiagnosticArray(status=[status])
    msg.header.stamp = to_time(stamp)
    return msg


def policy_status_msg(stamp: float, report: StatusReport):
    """The package's ``dreamzero_ros/msg/PolicyStatus``; None where it is not built."""
    if PolicyStatusMsg is None:
        return None
    value = report.value
    msg = PolicyStatusMsg()
    msg.header.stamp = to_time(stamp)
    msg.state = (
        PolicyStatusMsg.STATE_ERROR
        if value('engine_state').startswith('error')
        else _STATUS_STATES.get(value('lifecycle_state'), PolicyStatusMsg.STATE_ERROR)
    )
    msg.enabled = value('enabled') == 'true'
    msg.dry_run = value('dry_run') == 'true'
    msg.prompt = value('prompt')
    msg.session_id = value('session_id')
    msg.chunks_published = int(value('chunks_applied'))
    msg.frames_dropped = int(value('frames_dropped'))
    msg.observations_refused = int(value('observations_refused'))
    msg.latency_p50 = float(value('latency_p50_ms')) / 1000.0
    msg.latency_p95 = float(value('latency_p95_ms')) / 1000.0
    msg.message = report.message
    return msg


def trajectory_from_msg(msg: JointTrajectory, epoch_ns: int = 0) -> Trajectory:
    """A ``trajectory_msgs/JointTrajectory`` as the ROS-free :class:`Trajectory`.

    A non-zero stamp becomes seconds since ``epoch_ns`` (exact at nanoseconds when the epoch is
    recent: float seconds since 1970 resolve only about 0.2 microseconds).
    """
    stamp_ns = stamp_to_ns(msg.header.stamp)
    stamp = (stamp_ns - epoch_ns) * 1e-9 if stamp_ns else 0.0
    points = tuple(
        Point(
            stamp_seconds(p.time_from_start),
            tuple(p.positions),
            tuple(p.velocities),
            tuple(p.accelerations),
            tuple(p.effort),
        )
        for p in msg.points
    )
    return Trajectory(stamp, tuple(msg.joint_names), points)
