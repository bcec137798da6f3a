# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Core values <-> ROS messages, once, for any message implementation (rclpy or rosbags).

A :class:`MessageBuilder` makes messages from the classes a ``types`` lookup returns for a full
type name (``'sensor_msgs/msg/JointState'``): rclpy's generated classes in the node
(:data:`dreamzero_ros.ros.conversions.ROS_MESSAGES`), a rosbags type store in replay
(:data:`dreamzero_ros.replay.typestore.BAG_MESSAGES`). Every field is given by keyword and
every array as a numpy array, which both accept, so one builder writes the same messages to a
live topic and into a bag. Readers take any object with the message's fields.

Times are integer nanoseconds (``stamp_ns``, ``duration_ns``; :func:`to_ns` from seconds), so
bag stamps round-trip exactly; argument order is always: stamp, names, values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import math
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.image_codec import encode_compressed, encode_raw

NS_PER_S = 1_000_000_000
ACTION_CHUNK_TYPE = 'dreamzero_ros/msg/ActionChunk'
#: A ~/run_task goal's start or end, on the node's ~/task_events.
TASK_EVENT_TYPE = 'dreamzero_ros/msg/TaskEvent'

#: Full message type name -> message class.
MessageTypes = Callable[[str], Any]


def to_ns(seconds: float) -> int:
    """Seconds -> integer nanoseconds, rounded.

    Exact for the float given (a product with 1e9 would be off by up to a few hundred
    nanoseconds at today's epoch seconds).
    """
    whole = math.floor(seconds)
    return int(whole) * NS_PER_S + round((seconds - whole) * NS_PER_S)


def stamp_to_ns(stamp: Any) -> int:
    """A Time or Duration message (anything with ``sec`` and ``nanosec``) -> nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_seconds(stamp: Any) -> float:
    """A Time or Duration message -> seconds."""
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def trajectory_samples(msg: Any, receive_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Times (ns) and positions ``(P, N)`` of a JointTrajectory's points.

    Point times are ``header.stamp + time_from_start``; a zero stamp means "on receipt", as
    ros2_control's trajectory controller reads it, so the receive time is used instead.
    """
    start = stamp_to_ns(msg.header.stamp) or receive_ns
    times = np.array([start + stamp_to_ns(p.time_from_start) for p in msg.points], dtype=np.int64)
    positions = np.array([np.asarray(p.positions, dtype=np.float64) for p in msg.points])
    return times, positions.reshape(len(msg.points), len(msg.joint_names))


def is_hold(msg: Any) -> bool:
    """True for a hold the policy node sends, False for a chunk's trajectory.

    A hold of an arm at rest has a zero stamp (start on receipt); a braking hold is stamped
    when it was made, its first point there (it repeats the motion in force from then). A
    chunk's trajectory is stamped at its observation, its first point at the chunk's arrival.
    """
    if stamp_to_ns(msg.header.stamp) == 0:
        return True
    return bool(msg.points) and stamp_to_ns(msg.points[0].time_from_start) == 0


def _floats(values: Any = ()) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


class MessageBuilder:
    """Builds the package's messages from the classes of one message implementation."""

    def __init__(self, types: MessageTypes) -> None:
        self.types = types

    def time(self, stamp_ns: int) -> Any:
        """``builtin_interfaces/Time``."""
        sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
        return self.types('builtin_interfaces/msg/Time')(sec=sec, nanosec=nanosec)

    def duration(self, duration_ns: int) -> Any:
        """``builtin_interfaces/Duration``."""
        sec, nanosec = divmod(int(duration_ns), NS_PER_S)
        return self.types('builtin_interfaces/msg/Duration')(sec=sec, nanosec=nanosec)

    def header(self, stamp_ns: int, frame_id: str = '') -> Any:
        """``std_msgs/Header``."""
        return self.types('std_msgs/msg/Header')(stamp=self.time(stamp_ns), frame_id=frame_id)

    def joint_state(
        self,
        stamp_ns: int,
        names: Sequence[str],
        positions: Any,
        velocities: Any = (),
    ) -> Any:
        """``sensor_msgs/JointState`` (no efforts; velocities empty or one per name)."""
        return self.types('sensor_msgs/msg/JointState')(
            header=self.header(stamp_ns),
            name=list(names),
            position=_floats(positions),
            velocity=_floats(velocities),
            effort=_floats(),
        )

    def trajectory(
        self,
        stamp_ns: int,
        names: Sequence[str],
        offsets_ns: Sequence[int],
        positions: Any,
        velocities: Any = None,
        accelerations: Any = None,
    ) -> Any:
        """``trajectory_msgs/JointTrajectory``: point ``i`` at ``stamp + offsets_ns[i]``.

        ``positions`` (and ``velocities``, when given: the controller then interpolates with
        cubic splines; and ``accelerations``: quintic splines) are ``(P, N)`` in joint units; a
        zero stamp means "start on receipt".
        """
        point_type = self.types('trajectory_msgs/msg/JointTrajectoryPoint')
        rows = np.atleast_2d(np.asarray(positions, dtype=np.float64))
        speeds = None if velocities is None else np.atleast_2d(velocities)
        changes = None if accelerations is None else np.atleast_2d(accelerations)
        points = [
            point_type(
                positions=_floats(row),
                velocities=_floats() if speeds is None else _floats(speeds[index]),
                accelerations=_floats() if changes is None else _floats(changes[index]),
                effort=_floats(),
                time_from_start=self.duration(offset),
            )
            for index, (offset, row) in enumerate(zip(offsets_ns, rows, strict=True))
        ]
        return self.types('trajectory_msgs/msg/JointTrajectory')(
            header=self.header(stamp_ns), joint_names=list(names), points=points
        )

    def hold(self, names: Sequence[str], position: Any, settle_ns: int) -> Any:
        """A trajectory to ``position`` at rest, reached ``settle_ns`` after its receipt.

        The zero header stamp makes joint_trajectory_controller start it on arrival, from the
        robot's state then.
        """
        row = _floats(position)
        rest = np.zeros((1, row.size))
        return self.trajectory(0, names, [settle_ns], row[None], rest, rest)

    def image(
        self, stamp_ns: int, rgb: np.ndarray, frame_id: str = '', encoding: str = 'rgb8'
    ) -> Any:
        """``sensor_msgs/Image`` of an ``(H, W, 3)`` uint8 RGB array, in ``encoding``."""
        raw = encode_raw(rgb, encoding)
        return self.types('sensor_msgs/msg/Image')(
            header=self.header(stamp_ns, frame_id),
            height=raw.height,
            width=raw.width,
            encoding=raw.encoding,
            is_bigendian=raw.is_bigendian,
            step=raw.step,
            data=np.frombuffer(raw.data, dtype=np.uint8),
        )

    def compressed_image(
        self, stamp_ns: int, rgb: np.ndarray, frame_id: str = '', kind: str = 'jpeg'
    ) -> Any:
        """``sensor_msgs/CompressedImage`` (``jpeg`` or ``png``) of an ``(H, W, 3)`` array."""
        return self.types('sensor_msgs/msg/CompressedImage')(
            header=self.header(stamp_ns, frame_id),
            format=kind,
            data=np.frombuffer(encode_compressed(rgb, kind), dtype=np.uint8),
        )

    def action_chunk(
        self,
        stamp_ns: int,
        names: Sequence[str],
        rows: Any,
        step_ns: int,
        chunk_id: int,
        latency_s: float,
        session_id: str,
    ) -> Any:
        """The package's ``ActionChunk``: ``(H, N)`` rows, row ``k`` at ``stamp + k * step``."""
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        return self.types(ACTION_CHUNK_TYPE)(
            header=self.header(stamp_ns),
            step_duration=self.duration(step_ns),
            joint_names=list(names),
            positions=rows.reshape(-1),
            horizon=rows.shape[0],
            chunk_id=int(chunk_id),
            inference_latency=float(latency_s),
            session_id=session_id,
        )
