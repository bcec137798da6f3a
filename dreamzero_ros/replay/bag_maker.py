# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Write demo rosbag2 files from the DROID clips (or synthetic frames) and a joint trajectory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dreamzero_ros import droid_clips
from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.topics import (
    COMPRESSED_IMAGE_TYPE,
    IMAGE_TYPE,
    JOINT_STATE_TYPE,
    ReplayTopics,
)
from dreamzero_ros.replay.typestore import BAG_MESSAGES

IMAGE_FORMATS = ('rgb8', 'jpeg')
FRAME_SOURCES = ('auto', 'droid', 'synthetic')


@dataclass(frozen=True)
class BagSpec:
    """What a demo bag holds.

    Attributes:
        storage: ``mcap`` or ``sqlite3``.
        image_format: ``rgb8`` (sensor_msgs/Image on each camera topic) or ``jpeg``
            (sensor_msgs/CompressedImage on ``<camera topic>/compressed``, as image_transport).
        num_frames: camera frames per camera; ``None`` takes every frame of the clips.
        source: ``droid`` (the real clips, error if absent), ``synthetic``, or ``auto``
            (the clips where present, else synthetic frames).
        joint_rate_hz: JointState rate; the cameras run at the clips' 15 Hz.
        command_lead_s: the command topic (if any) carries the trajectory this far ahead of the
            measured state, as a position controller's target leads the arm.
        gripper_range: the gripper joint's positions ``(open, closed)`` (the node's
            ``gripper_range``): the gripper signal (0 open .. 1 closed) is written in them.
        start_s: time of the first message, seconds (stamps and log times agree).
        topics: topic and joint names to write.

    """

    storage: str = 'mcap'
    image_format: str = 'rgb8'
    num_frames: int | None = 60
    source: str = 'auto'
    joint_rate_hz: float = 50.0
    command_lead_s: float = 1.0 / droid_clips.CLIP_FPS
    start_s: float = 1_700_000_000.0
    topics: ReplayTopics = field(default_factory=ReplayTopics)
    gripper_range: tuple[float, float] = (0.0, 1.0)

    def __post_init__(self) -> None:
        if self.image_format not in IMAGE_FORMATS:
            raise ValueError(
                f'image_format must be one of {IMAGE_FORMATS}, got {self.image_format}'
            )
        if self.source not in FRAME_SOURCES:
            raise ValueError(f'source must be one of {FRAME_SOURCES}, got {self.source!r}')
        if self.num_frames is not None and self.num_frames < 1:
            raise ValueError(f'num_frames must be >= 1, got {self.num_frames}')
        if self.joint_rate_hz <= 0:
            raise ValueError(f'joint_rate_hz must be > 0, got {self.joint_rate_hz}')


def load_frames(spec: BagSpec) -> tuple[dict[str, np.ndarray], str]:
    """Camera -> ``(T, H, W, 3)`` frames for ``spec``, with a label naming their source."""
    if spec.source == 'synthetic':
        frames = spec.num_frames or droid_clips.SYNTHETIC_DEFAULT_FRAMES
        return droid_clips.synthetic_clips(frames), 'synthetic frames'
    if spec.source == 'droid':
        return droid_clips.load_clips(max_frames=spec.num_frames), 'DROID clips'
    return droid_clips.demo_clips(spec.num_frames)


def make_bag(
    path: str | Path,
    spec: BagSpec = BagSpec(),
    progress: Callable[[float, float], None] | None = None,
) -> dict[str, object]:
    """Write the bag described by ``spec`` to the new folder ``path``; return a summary.

    Camera frame ``i`` is stamped ``start + i / 15 Hz``; joint states cover the same span at
    ``joint_rate_hz`` from :func:`droid_clips.demo_joint_trajectory` (gripper included). Header
    stamps equal log times.  ``progress(done_s, total_s)`` is called as the frames are encoded
    (the slow part), in seconds of the bag.
    """
    if Path(path).exists():
        raise BagError(f'{path} exists; rosbag2 writes a new folder')
    frames, label = load_frames(spec)
    topics = spec.topics
    num_frames = len(next(iter(frames.values())))
    duration = num_frames / droid_clips.CLIP_FPS
    joint_times = np.arange(0.0, duration, 1.0 / spec.joint_rate_hz)
    states = _joint_units(droid_clips.demo_joint_trajectory(joint_times), spec)
    names = topics.joint_names
    compressed = spec.image_format == 'jpeg'
    image_type = COMPRESSED_IMAGE_TYPE if compressed else IMAGE_TYPE
    image_topics = {camera: topics.image_topic(camera, compressed) for camera in topics.cameras}

    records: list[tuple[int, str, object]] = []
    for index in range(num_frames):
        stamp = to_ns(spec.start_s + index / droid_clips.CLIP_FPS)
        for camera, topic in image_topics.items():
            rgb = frames[camera][index]
            message = (
                BAG_MESSAGES.image(stamp, rgb, camera)
                if spec.image_format == 'rgb8'
                else BAG_MESSAGES.compressed_image(stamp, rgb, camera)
            )
            records.append((stamp, topic, message))
        if topics.command is not None:
            lead = droid_clips.demo_joint_trajectory(
                np.array([index / droid_clips.CLIP_FPS + spec.command_lead_s])
            )
            command = _joint_units(lead, spec)[0]
            records.append((stamp, topics.command, BAG_MESSAGES.joint_state(stamp, names, command)))
        if progress is not None:
            progress((index + 1) / droid_clips.CLIP_FPS, duration)
    for index, offset in enumerate(joint_times):
        stamp = to_ns(spec.start_s + offset)
        records.append(
            (stamp, topics.joint_states, BAG_MESSAGES.joint_state(stamp, names, states[index]))
        )
    records.sort(key=lambda record: record[0])

    with BagWriter(path, spec.storage) as writer:
        for topic in image_topics.values():
            writer.add_topic(topic, image_type)
        writer.add_topic(topics.joint_states, JOINT_STATE_TYPE)
        if topics.command is not None:
            writer.add_topic(topics.command, JOINT_STATE_TYPE)
        for stamp, topic, message in records:
            writer.write(topic, stamp, message)
    return {
        'path': str(path),
        'storage': spec.storage,
        'frames': label,
        'camera_frames': num_frames,
        'joint_states': len(joint_times),
        'duration_s': duration,
    }


def _joint_units(trajectory: tuple[np.ndarray, np.ndarray], spec: BagSpec) -> np.ndarray:
    """Joint-state rows ``(N, 8)``: the arm joints, then the gripper in its joint's units."""
    joints, gripper = trajectory
    opened, closed = spec.gripper_range
    return np.concatenate([joints, opened + gripper * (closed - opened)], axis=1)
