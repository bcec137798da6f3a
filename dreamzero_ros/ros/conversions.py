# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Core values -> ROS messages (trajectories, commands, chunks, diagnostics), ROS time helpers."""

from __future__ import annotations

from collections.abc import Sequence

from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
import numpy as np
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from dreamzero_ros.core.image_codec import encode_raw
from dreamzero_ros.core.status_report import StatusReport

try:  # built by scripts/build_interfaces.sh (or colcon) where rosidl works
    from dreamzero_ros_interfaces.msg import ActionChunk as ActionChunkMsg
    from dreamzero_ros_interfaces.msg import PolicyStatus as PolicyStatusMsg
except ImportError:  # pragma: no cover - depends on the install
    ActionChunkMsg = PolicyStatusMsg = None

_STATUS_STATES = {'unconfigured': 0, 'inactive': 1, 'active': 2}


def to_time(seconds: float) -> Time:
    """Seconds -> ``builtin_interfaces/Time``."""
    nanoseconds = int(round(seconds * 1e9))
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def to_duration(seconds: float) -> Duration:
    """Seconds (>= 0) -> ``builtin_interfaces/Duration``."""
    nanoseconds = max(0, int(round(seconds * 1e9)))
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def duration_seconds(duration: Duration) -> float:
    """``builtin_interfaces/Duration`` -> seconds."""
    return duration.sec + duration.nanosec * 1e-9


def trajectory_msg(
    origin: float,
    times: np.ndarray,
    rows: np.ndarray,
    joint_names: Sequence[str],
    velocities: np.ndarray | None = None,
) -> JointTrajectory:
    """A trajectory starting at ``origin`` (header stamp) with a point per row at ``times``.

    ``time_from_start`` of each point is ``times[i] - origin``; rows (and ``velocities``, when
    given: the controller then interpolates with cubic splines) are in joint units.
    """
    msg = JointTrajectory()
    msg.header.stamp = to_time(origin)
    msg.joint_names = list(joint_names)
    for index, (time, row) in enumerate(zip(times, rows, strict=True)):
        point = JointTrajectoryPoint()
        point.positions = [float(v) for v in row]
        if velocities is not None:
            point.velocities = [float(v) for v in velocities[index]]
        point.time_from_start = to_duration(time - origin)
        msg.points.append(point)
    return msg


def hold_msg(position: np.ndarray, joint_names: Sequence[str], settle: float) -> JointTrajectory:
    """A trajectory to ``position`` at rest, starting on receipt (zero header stamp).

    A zero stamp makes joint_trajectory_controller start it on arrival, from the robot's state
    then; the single point is reached ``settle`` seconds later. For a braking hold ``position``
    is the stop point of a constant deceleration over ``settle``.
    """
    msg = JointTrajectory()
    msg.joint_names = list(joint_names)
    point = JointTrajectoryPoint()
    point.positions = [float(v) for v in position]
    point.velocities = [0.0] * len(position)
    point.time_from_start = to_duration(settle)
    msg.points.append(point)
    return msg


def float_array_msg(values: np.ndarray) -> Float64MultiArray:
    """A command row as ``std_msgs/Float64MultiArray`` (forward_command_controller)."""
    return Float64MultiArray(data=[float(v) for v in values])


def joint_state_msg(stamp: float, names: Sequence[str], positions: np.ndarray) -> JointState:
    """A command row as ``sensor_msgs/JointState``."""
    msg = JointState(name=list(names), position=[float(v) for v in positions])
    msg.header.stamp = to_time(stamp)
    return msg


def action_chunk_msg(
    stamp: float,
    step_duration: float,
    joint_names: Sequence[str],
    rows: np.ndarray,
    chunk_id: int,
    latency: float,
    session_id: str,
):
    """The package's ``dreamzero_ros_interfaces/ActionChunk``; None where it is not built."""
    if ActionChunkMsg is None:
        return None
    msg = ActionChunkMsg()
    msg.header.stamp = to_time(stamp)
    msg.step_duration = to_duration(step_duration)
    msg.joint_names = list(joint_names)
    msg.positions = [float(v) for v in np.asarray(rows, dtype=np.float64).ravel()]
    msg.horizon = int(rows.shape[0])
    msg.chunk_id = int(chunk_id)
    msg.inference_latency = float(latency)
    msg.session_id = session_id
    return msg


def diagnostics_msg(stamp: float, name: str, report: StatusReport) -> DiagnosticArray:
    """One ``DiagnosticStatus`` named ``name`` from a :class:`StatusReport`."""
    status = DiagnosticStatus(
        level=bytes([report.level]),
        name=name,
        message=report.message,
        hardware_id='dreamzero',
        values=[KeyValue(key=key, value=value) for key, value in report.values],
    )
    msg = DiagnosticArray(status=[status])
    msg.header.stamp = to_time(stamp)
    return msg


def policy_status_msg(stamp: float, report: StatusReport):
    """The package's ``dreamzero_ros_interfaces/PolicyStatus``; None where it is not built."""
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


def image_msg(rgb: np.ndarray, stamp: float, frame_id: str, encoding: str = 'rgb8') -> Image:
    """An RGB array as ``sensor_msgs/Image`` in ``encoding``."""
    raw = encode_raw(rgb, encoding)
    msg = Image(
        encoding=raw.encoding, height=raw.height, width=raw.width, step=raw.step, data=raw.data
    )
    msg.header.stamp = to_time(stamp)
    msg.header.frame_id = frame_id
    return msg
