# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Build and read the ROS messages replay writes, as rosbags message objects (no ROS needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dreamzero_ros.core.image_codec import encode_compressed, encode_raw
from dreamzero_ros.policy_types import ActionChunk
from dreamzero_ros.replay.typestore import ACTION_CHUNK_TYPE, replay_typestore

NS_PER_S = 1_000_000_000


def _type(name: str) -> Any:
    return replay_typestore().types[name]


def to_ns(seconds: float) -> int:
    """Seconds -> integer nanoseconds, rounded."""
    return round(seconds * NS_PER_S)


def time_msg(stamp_ns: int) -> Any:
    """builtin_interfaces/Time for a nanosecond stamp."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return _type('builtin_interfaces/msg/Time')(sec=sec, nanosec=nanosec)


def duration_msg(duration_ns: int) -> Any:
    """builtin_interfaces/Duration for a nanosecond span."""
    sec, nanosec = divmod(int(duration_ns), NS_PER_S)
    return _type('builtin_interfaces/msg/Duration')(sec=sec, nanosec=nanosec)


def stamp_to_ns(stamp: Any) -> int:
    """A Time or Duration message (anything with ``sec`` and ``nanosec``) -> nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def header_msg(stamp_ns: int, frame_id: str = '') -> Any:
    """std_msgs/Header."""
    return _type('std_msgs/msg/Header')(stamp=time_msg(stamp_ns), frame_id=frame_id)


def image_msg(rgb: np.ndarray, stamp_ns: int, frame_id: str = '', encoding: str = 'rgb8') -> Any:
    """sensor_msgs/Image from an ``(H, W, 3)`` uint8 RGB array, in ``encoding``."""
    raw = encode_raw(rgb, encoding)
    return _type('sensor_msgs/msg/Image')(
        header=header_msg(stamp_ns, frame_id),
        height=raw.height,
        width=raw.width,
        encoding=raw.encoding,
        is_bigendian=raw.is_bigendian,
        step=raw.step,
        data=np.frombuffer(raw.data, dtype=np.uint8),
    )


def compressed_image_msg(rgb: np.ndarray, stamp_ns: int, frame_id: str = '') -> Any:
    """sensor_msgs/CompressedImage, jpeg, from an ``(H, W, 3)`` uint8 RGB array."""
    return _type('sensor_msgs/msg/CompressedImage')(
        header=header_msg(stamp_ns, frame_id),
        format='jpeg',
        data=np.frombuffer(encode_compressed(rgb, 'jpeg'), dtype=np.uint8),
    )


def joint_state_msg(names: list[str], positions: np.ndarray, stamp_ns: int) -> Any:
    """sensor_msgs/JointState with positions only."""
    return _type('sensor_msgs/msg/JointState')(
        header=header_msg(stamp_ns),
        name=list(names),
        position=np.asarray(positions, dtype=np.float64),
        velocity=np.zeros(0, dtype=np.float64),
        effort=np.zeros(0, dtype=np.float64),
    )


def joint_trajectory_msg(
    names: list[str], positions: np.ndarray, stamp_ns: int, step_ns: int
) -> Any:
    """trajectory_msgs/JointTrajectory: row ``k`` of ``positions`` at ``k * step_ns``."""
    point_type = _type('trajectory_msgs/msg/JointTrajectoryPoint')
    empty = np.zeros(0, dtype=np.float64)
    points = [
        point_type(
            positions=np.asarray(row, dtype=np.float64),
            velocities=empty,
            accelerations=empty,
            effort=empty,
            time_from_start=duration_msg(k * step_ns),
        )
        for k, row in enumerate(np.atleast_2d(positions))
    ]
    return _type('trajectory_msgs/msg/JointTrajectory')(
        header=header_msg(stamp_ns), joint_names=list(names), points=points
    )


def action_chunk_msg(
    chunk: ActionChunk, names: list[str], latency_s: float, session_id: str = 'default'
) -> Any:
    """dreamzero_ros/msg/ActionChunk for a policy chunk."""
    actions = np.asarray(chunk.actions, dtype=np.float64)
    return _type(ACTION_CHUNK_TYPE)(
        header=header_msg(to_ns(chunk.stamp)),
        step_duration=duration_msg(to_ns(chunk.step_duration)),
        joint_names=list(names),
        positions=actions.reshape(-1),
        horizon=actions.shape[0],
        chunk_id=int(chunk.chunk_id),
        inference_latency=float(latency_s),
        session_id=session_id,
    )


def trajectory_samples(msg: Any, receive_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Times (ns) and positions ``(P, N)`` of a JointTrajectory's points.

    Point times are ``header.stamp + time_from_start``; a zero stamp means "on receipt", as
    ros2_control's trajectory controller reads it, so the receive time is used instead.
    """
    start = stamp_to_ns(msg.header.stamp) or receive_ns
    times = np.array([start + stamp_to_ns(p.time_from_start) for p in msg.points], dtype=np.int64)
    positions = np.array([np.asarray(p.positions, dtype=np.float64) for p in msg.points])
    return times, positions.reshape(len(msg.points), len(msg.joint_names))
