# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Pair the latest camera frames and joint states into policy observations, or say why not.

:class:`ObservationCache` keeps, per camera, the recent decoded frames with their stamps and, per
joint, the latest position with its stamp. :meth:`ObservationCache.build` turns them into an
:class:`~dreamzero_ros.policy_types.Observation` for a given time ``now`` or returns a
:class:`Refusal` naming the reason: a source never seen (``missing``), older than ``max_age``
(``stale``), sources further apart than ``max_skew`` or ahead of ``now`` (``skewed``), the latest
frame of a camera undecodable or of the wrong size (``bad_image``), or a NaN / absent joint
(``bad_joints``).

Time is always passed in (message stamps and ``now``, seconds); nothing here reads a clock, so
the ROS node (ROS time, possibly simulated) and rosbag replay (recorded stamps) pair frames the
same way. Message-level helpers read ``header.stamp``, ``name``/``position`` and the image fields
by attribute, so rclpy and rosbags messages work alike.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import enum
import math
from typing import Any

import numpy as np

from dreamzero_ros.core.image_codec import msg_to_rgb
from dreamzero_ros.errors import ImageDecodeError
from dreamzero_ros.policy_types import DROID_ARM_DOF, DROID_CAMERAS, Observation


class RefusalReason(enum.StrEnum):
    """Why no observation could be built."""

    MISSING = 'missing'
    STALE = 'stale'
    SKEWED = 'skewed'
    BAD_IMAGE = 'bad_image'
    BAD_JOINTS = 'bad_joints'


@dataclass(frozen=True)
class Refusal:
    """A reason code and a human-readable detail, e.g. ``stale: camera 'wrist' is 0.81 s old``."""

    reason: RefusalReason
    detail: str

    def __str__(self) -> str:
        return f'{self.reason.value}: {self.detail}'


@dataclass(frozen=True)
class CacheConfig:
    """What the cache pairs and how strictly.

    Attributes:
        arm_joints: the 7 JointState names of the arm, in DROID order.
        gripper_joint: the JointState name of the gripper.
        cameras: policy camera names the cache expects frames for.
        max_age: seconds after which a source is stale at build time.
        max_skew: largest allowed spread, seconds, between the stamps of all sources.
        image_size: required ``(height, width)`` of every frame; ``None`` accepts any size.
        gripper_range: JointState gripper positions mapped linearly onto ``[0, 1]``
            (``(closed, open)`` or the reverse, as the policy expects).
        clip_offsets: seconds, relative to each camera's newest frame, of the frames given to the
            policy, ascending and ending at 0. ``(0.0,)`` gives one ``(H, W, 3)`` frame per camera;
            more offsets give a ``(T, H, W, 3)`` clip (nearest stored frame to each offset; the
            oldest frame repeats while the history is shorter).

    """

    arm_joints: tuple[str, ...]
    gripper_joint: str
    cameras: tuple[str, ...] = DROID_CAMERAS
    max_age: float = 0.5
    max_skew: float = 0.2
    image_size: tuple[int, int] | None = None
    gripper_range: tuple[float, float] = (0.0, 1.0)
    clip_offsets: tuple[float, ...] = (0.0,)

    def __post_init__(self) -> None:
        if len(self.arm_joints) != DROID_ARM_DOF:
            raise ValueError(
                f'arm_joints needs {DROID_ARM_DOF} names, got {len(self.arm_joints)}: '
                f'{list(self.arm_joints)}'
            )
        names = [*self.arm_joints, self.gripper_joint]
        if len(set(names)) != len(names) or not all(names):
            raise ValueError(f'joint names must be distinct and non-empty: {names}')
        if not self.cameras or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f'cameras must be distinct and non-empty: {list(self.cameras)}')
        if self.max_age <= 0 or self.max_skew < 0:
            raise ValueError(
                f'max_age must be > 0 and max_skew >= 0, got {self.max_age}, {self.max_skew}'
            )
        if self.image_size is not None and min(self.image_size) < 1:
            raise ValueError(f'image_size must be positive, got {self.image_size}')
        if self.gripper_range[0] == self.gripper_range[1]:
            raise ValueError(f'gripper_range must span an interval, got {self.gripper_range}')
        offsets = self.clip_offsets
        ascending = all(a < b for a, b in zip(offsets, offsets[1:], strict=False))
        if not offsets or offsets[-1] != 0.0 or not ascending:
            raise ValueError(f'clip_offsets must be ascending and end at 0.0, got {offsets}')

    @property
    def clip_span(self) -> float:
        """Seconds of frame history the clip needs."""
        return -self.clip_offsets[0]


@dataclass
class CacheStats:
    """Counters since construction (or :meth:`ObservationCache.clear`)."""

    frames_received: int = 0
    frames_out_of_order: int = 0
    frames_bad: int = 0
    joint_states_received: int = 0
    joint_states_bad: int = 0
    refusals: dict[str, int] = field(default_factory=dict)


def stamp_seconds(stamp: Any) -> float:
    """Seconds of a ``builtin_interfaces/Time``-like object (``sec``, ``nanosec``)."""
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


class ObservationCache:
    """Latest-value store of camera frames and joint states that builds checked observations."""

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self.stats = CacheStats()
        self._frames: dict[str, deque[tuple[float, np.ndarray]]] = {}
        self._image_errors: dict[str, Refusal] = {}
        self._joints: dict[str, tuple[float, float]] = {}
        self._joint_errors: dict[str, Refusal] = {}
        self.clear()

    def clear(self) -> None:
        """Forget every frame, joint value, error and counter."""
        self.stats = CacheStats()
        self._frames = {camera: deque() for camera in self.config.cameras}
        self._image_errors = {}
        self._joints = {}
        self._joint_errors = {}

    # ----------------------------------------------------------------------------- images

    def add_image(self, camera: str, image: np.ndarray, stamp: float) -> Refusal | None:
        """Store a decoded ``(H, W, 3)`` RGB frame; return the refusal if it is unusable.

        An unusable frame (wrong shape, dtype or size) marks the camera bad until its next good
        frame. A frame older than the camera's newest is dropped (counted, not an error).
        """
        if camera not in self._frames:
            raise KeyError(f'unknown camera {camera!r}; expected one of {self.config.cameras}')
        self.stats.frames_received += 1
        problem = self._check_image(image)
        if problem is not None:
            return self._mark_bad_image(camera, problem)
        frames = self._frames[camera]
        if frames and stamp < frames[-1][0]:
            self.stats.frames_out_of_order += 1
            return None
        self._image_errors.pop(camera, None)
        frames.append((float(stamp), image))
        oldest_needed = stamp - self.config.clip_span - self.config.max_skew
        while len(frames) > 1 and frames[1][0] <= oldest_needed:
            frames.popleft()
        return None

    def add_image_message(
        self, camera: str, msg: Any, decode: Callable[[Any], np.ndarray] = msg_to_rgb
    ) -> Refusal | None:
        """Decode a ``sensor_msgs/Image`` or ``CompressedImage``-like message and store it.

        ``decode`` raises :class:`ImageDecodeError` for what it cannot convert (the default is
        :func:`~dreamzero_ros.core.image_codec.msg_to_rgb`).
        """
        try:
            image = decode(msg)
        except ImageDecodeError as error:
            self.stats.frames_received += 1
            return self._mark_bad_image(camera, str(error))
        return self.add_image(camera, image, stamp_seconds(msg.header.stamp))

    def _check_image(self, image: np.ndarray) -> str | None:
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            return f'expected a uint8 array, got {getattr(image, "dtype", type(image).__name__)}'
        if image.ndim != 3 or image.shape[2] != 3:
            return f'expected shape (H, W, 3), got {image.shape}'
        size = self.config.image_size
        if size is not None and tuple(image.shape[:2]) != tuple(size):
            return f'size {image.shape[0]}x{image.shape[1]}, expected {size[0]}x{size[1]}'
        return None

    def _mark_bad_image(self, camera: str, problem: str) -> Refusal:
        if camera not in self._frames:
            raise KeyError(f'unknown camera {camera!r}; expected one of {self.config.cameras}')
        self.stats.frames_bad += 1
        refusal = Refusal(RefusalReason.BAD_IMAGE, f'camera {camera!r}: {problem}')
        self._image_errors[camera] = refusal
        return refusal

    # ----------------------------------------------------------------------------- joints

    def add_joint_state(
        self, names: Sequence[str], positions: Sequence[float], stamp: float
    ) -> Refusal | None:
        """Store the positions of the configured joints found in ``names``; ignore the others.

        A non-finite value marks that joint bad until a finite one arrives. Joint states may be
        split over several messages (e.g. arm and gripper on separate topics).
        """
        self.stats.joint_states_received += 1
        if len(names) != len(positions):
            self.stats.joint_states_bad += 1
            return Refusal(
                RefusalReason.BAD_JOINTS,
                f'{len(names)} joint names but {len(positions)} positions',
            )
        wanted = (*self.config.arm_joints, self.config.gripper_joint)
        refusal = None
        for name, value in zip(names, positions, strict=True):
            if name not in wanted:
                continue
            value = float(value)
            if not math.isfinite(value):
                refusal = Refusal(RefusalReason.BAD_JOINTS, f'joint {name!r} is {value}')
                self._joint_errors[name] = refusal
                continue
            previous = self._joints.get(name)
            if previous is not None and stamp < previous[0]:
                continue
            self._joint_errors.pop(name, None)
            self._joints[name] = (float(stamp), value)
        if refusal is not None:
            self.stats.joint_states_bad += 1
        return refusal

    def add_joint_state_message(self, msg: Any) -> Refusal | None:
        """Store a ``sensor_msgs/JointState``-like message (``name``, ``position``, header)."""
        return self.add_joint_state(
            list(msg.name), list(msg.position), stamp_seconds(msg.header.stamp)
        )

    # ----------------------------------------------------------------------------- build

    def build(self, now: float, prompt: str, session_id: str = 'default') -> Observation | Refusal:
        """Return the observation at time ``now`` or the first reason it cannot be given.

        Checks run in a fixed order: bad images, bad joints, missing, stale, skewed. The
        observation's stamp is the newest stamp among the sources used.
        """
        refusal = self.check(now)
        if refusal is not None:
            self.stats.refusals[refusal.reason.value] = (
                self.stats.refusals.get(refusal.reason.value, 0) + 1
            )
            return refusal
        config = self.config
        arm = np.array([self._joints[name][1] for name in config.arm_joints], dtype=np.float64)
        low, high = config.gripper_range
        gripper = (self._joints[config.gripper_joint][1] - low) / (high - low)
        images = {camera: self._clip(camera) for camera in config.cameras}
        return Observation(
            images=images,
            joint_position=arm,
            gripper_position=np.array([min(max(gripper, 0.0), 1.0)]),
            prompt=prompt,
            stamp=max(stamp for stamp, _ in self._source_stamps().values()),
            session_id=session_id,
        )

    def _source_stamps(self) -> dict[str, tuple[float, str]]:
        """Source label -> (stamp, label) of every source present."""
        sources = {}
        for camera, frames in self._frames.items():
            if frames:
                sources[camera] = (frames[-1][0], f'camera {camera!r}')
        for name in (*self.config.arm_joints, self.config.gripper_joint):
            if name in self._joints:
                sources[name] = (self._joints[name][0], f'joint {name!r}')
        return sources

    def check(self, now: float) -> Refusal | None:
        """The reason :meth:`build` would refuse at ``now``, or None; counts nothing."""
        config = self.config
        for camera in config.cameras:
            if camera in self._image_errors:
                return self._image_errors[camera]
        for name in (*config.arm_joints, config.gripper_joint):
            if name in self._joint_errors:
                return self._joint_errors[name]
        missing = [f'camera {c!r}' for c in config.cameras if not self._frames[c]]
        missing += [
            f'joint {n!r}'
            for n in (*config.arm_joints, config.gripper_joint)
            if n not in self._joints
        ]
        if missing:
            return Refusal(RefusalReason.MISSING, 'no data yet from ' + ', '.join(missing))
        stamps = self._source_stamps().values()
        oldest_stamp, oldest = min(stamps)
        newest_stamp, newest = max(stamps)
        if now - oldest_stamp > config.max_age:
            return Refusal(
                RefusalReason.STALE,
                f'{oldest} is {now - oldest_stamp:.3f} s old (max_age {config.max_age} s)',
            )
        if newest_stamp - now > config.max_skew:
            return Refusal(
                RefusalReason.SKEWED,
                f'{newest} is {newest_stamp - now:.3f} s ahead of the clock '
                f'(max_skew {config.max_skew} s)',
            )
        if newest_stamp - oldest_stamp > config.max_skew:
            return Refusal(
                RefusalReason.SKEWED,
                f'{oldest} and {newest} are {newest_stamp - oldest_stamp:.3f} s apart '
                f'(max_skew {config.max_skew} s)',
            )
        return None

    def _clip(self, camera: str) -> np.ndarray:
        frames = self._frames[camera]
        newest_stamp, newest = frames[-1]
        if len(self.config.clip_offsets) == 1:
            return newest
        stamps = np.array([stamp for stamp, _ in frames])
        picked = []
        for offset in self.config.clip_offsets:
            index = int(np.argmin(np.abs(stamps - (newest_stamp + offset))))
            picked.append(frames[index][1])
        return np.stack(picked)
