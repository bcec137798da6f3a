# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Pair the latest camera frames and joint states into policy observations, or say why not.

:class:`ObservationCache` keeps, per camera, the recent frames with their stamps and, per joint,
the latest position with its stamp. Storing a message costs little: an image message is kept
undecoded (only its header fields are checked) and is decoded, then letterboxed to the policy's
input size, when an observation picks it. :meth:`ObservationCache.build` turns the cache into an
:class:`~dreamzero_ros.policy_types.Observation` for a given time ``now`` or returns a
:class:`Refusal` naming the reason: a source never seen (``missing``), older than ``max_age``
(``stale``), sources further apart than ``max_skew`` or ahead of ``now`` (``skewed``), the latest
frame of a camera undecodable or of the wrong size (``bad_image``), or a NaN joint
(``bad_joints``).

A message that cannot be trusted at all is not stored and is returned as a :class:`Drop`
(counted by reason): stamped more than ``max_skew`` ahead of the time it was received
(``future_stamp``), a JointState naming a joint twice (``duplicate_joint_name``) or whose
name, position, velocity and effort counts disagree (``joint_count_mismatch``). The sources keep
their last good values, so one bad message never blocks the cache.

Time is always passed in (message stamps, receipt time and ``now``, seconds); nothing here reads
a clock, so the ROS node (ROS time, possibly simulated) and rosbag replay (recorded stamps) pair
frames the same way. Message-level helpers read ``header.stamp``, ``name``/``position`` and the
image fields by attribute, so rclpy and rosbags messages work alike.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import math
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.image_codec import letterbox, message_image_size, msg_to_rgb
from dreamzero_ros.core.observations.messages import stamp_seconds
from dreamzero_ros.core.str_enum import StrEnum
from dreamzero_ros.errors import ImageDecodeError
from dreamzero_ros.policy_types import DROID_CAMERAS, Observation

#: How frames of another size than ``CacheConfig.image_size`` are treated.
IMAGE_FITS = ('letterbox', 'exact')


class RefusalReason(StrEnum):
    """Why no observation could be built."""

    MISSING = 'missing'
    STALE = 'stale'
    SKEWED = 'skewed'
    BAD_IMAGE = 'bad_image'
    BAD_JOINTS = 'bad_joints'


class DropReason(StrEnum):
    """Why one incoming message was not stored."""

    FUTURE_STAMP = 'future_stamp'
    DUPLICATE_JOINT_NAME = 'duplicate_joint_name'
    JOINT_COUNT_MISMATCH = 'joint_count_mismatch'


@dataclass(frozen=True)
class _Problem:
    """A reason code and a human-readable detail, shown as ``<code>: <detail>``."""

    reason: StrEnum
    detail: str

    def __str__(self) -> str:
        return f'{self.reason.value}: {self.detail}'


@dataclass(frozen=True)
class Refusal(_Problem):
    """No observation could be built, e.g. ``stale: camera 'wrist' is 0.81 s old``."""

    reason: RefusalReason


@dataclass(frozen=True)
class Drop(_Problem):
    """A message left out of the cache."""

    reason: DropReason


@dataclass(frozen=True)
class CacheConfig:
    """What the cache pairs and how strictly.

    Attributes:
        arm_joints: the JointState names of the arm joints, in the policy's order.
        gripper_joint: the JointState name of the gripper; empty for a robot without one.
        cameras: policy camera names the cache expects frames for.
        max_age: seconds after which a source is stale at build time.
        max_skew: largest allowed spread, seconds, between the stamps of all sources, and
            largest lead of a message's stamp over its receipt time.
        image_size: ``(height, width)`` of the frames given to the policy; ``None`` gives each
            camera its size in ``camera_sizes``, or keeps its own.
        camera_sizes: ``(height, width)`` of each camera's frames, in ``cameras`` order, where
            ``image_size`` is None (the policy's resolution of each camera); empty: none.
        image_fit: ``letterbox``: frames of another size are resized keeping their aspect ratio
            and centred on black bands (openpi-client's ``resize_with_pad``); ``exact``: they are
            refused as ``bad_image``.
        gripper_range: JointState gripper positions mapped linearly onto ``[0, 1]``
            (``(closed, open)`` or the reverse, as the policy expects).
        clip_offsets: seconds, relative to each camera's newest frame, of the frames given to the
            policy, ascending and ending at 0. ``(0.0,)`` gives one ``(H, W, 3)`` frame per camera;
            more offsets give a ``(T, H, W, 3)`` clip (nearest stored frame to each offset; the
            oldest frame repeats while the history is shorter).
        more_grippers: ``(joint, open, closed)`` of each gripper after ``gripper_joint`` (a
            bimanual robot's), read through its own range as ``gripper_range`` reads the first.

    """

    arm_joints: tuple[str, ...]
    gripper_joint: str
    cameras: tuple[str, ...] = DROID_CAMERAS
    max_age: float = 0.5
    max_skew: float = 0.2
    image_size: tuple[int, int] | None = None
    camera_sizes: tuple[tuple[int, int], ...] = ()
    image_fit: str = 'letterbox'
    gripper_range: tuple[float, float] = (0.0, 1.0)
    clip_offsets: tuple[float, ...] = (0.0,)
    more_grippers: tuple[tuple[str, float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.more_grippers and not self.gripper_joint:
            raise ValueError('more_grippers needs a gripper_joint first')
        if any(low == high for _, low, high in self.more_grippers):
            raise ValueError(f'gripper ranges must span an interval: {list(self.more_grippers)}')
        if not self.arm_joints:
            raise ValueError('arm_joints needs at least one name')
        names = list(self.joint_names)
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
        if self.camera_sizes and (
            len(self.camera_sizes) != len(self.cameras)
            or any(min(size) < 1 for size in self.camera_sizes)
        ):
            raise ValueError(
                f'camera_sizes needs a positive size per camera, got {list(self.camera_sizes)}'
            )
        if self.image_fit not in IMAGE_FITS:
            raise ValueError(f'image_fit must be one of {IMAGE_FITS}, got {self.image_fit!r}')
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

    @property
    def grippers(self) -> tuple[tuple[str, float, float], ...]:
        """``(joint, open, closed)`` of every gripper, in the policy's order."""
        if not self.gripper_joint:
            return ()
        return ((self.gripper_joint, *self.gripper_range), *self.more_grippers)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Every joint the cache keeps: the arm joints, then the grippers (if any)."""
        return (*self.arm_joints, *(joint for joint, _, _ in self.grippers))

    def size_of(self, camera: str) -> tuple[int, int] | None:
        """``(height, width)`` the frames of ``camera`` are given at; None keeps their own."""
        if self.image_size is not None or not self.camera_sizes:
            return self.image_size
        return self.camera_sizes[self.cameras.index(camera)]


@dataclass
class CacheStats:
    """Counters since construction (or :meth:`ObservationCache.clear`)."""

    frames_received: int = 0
    frames_out_of_order: int = 0
    frames_bad: int = 0
    joint_states_received: int = 0
    joint_states_bad: int = 0
    refusals: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    last_drop: Drop | None = None


class _Frame:
    """One stored camera frame, decoded and fitted on first use (then kept)."""

    __slots__ = ('_decode', '_payload', '_rgb', 'stamp')

    def __init__(self, stamp: float, payload: Any, decode: Callable[[Any], np.ndarray]) -> None:
        self.stamp = stamp
        self._payload = payload
        self._decode = decode
        self._rgb: np.ndarray | None = None

    def rgb(self, fit: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The frame fitted to the policy's size; raises ImageDecodeError."""
        if self._rgb is None:
            self._rgb = fit(self._decode(self._payload))
            self._payload = None
        return self._rgb


class _FrameDecodeError(ImageDecodeError):
    """A stored frame that cannot be decoded or fitted."""

    def __init__(self, frame: _Frame, error: ImageDecodeError) -> None:
        super().__init__(str(error))
        self.frame = frame


def _as_array(image: np.ndarray) -> np.ndarray:
    return image


class ObservationCache:
    """Latest-value store of camera frames and joint states that builds checked observations.

    Args:
        config: what to pair and how strictly.
        decode: image message -> ``(H, W, 3)`` RGB uint8, raising
            :class:`~dreamzero_ros.core.observations.image_codec.ImageDecodeError` for what it
            cannot convert (default
            :func:`~dreamzero_ros.core.observations.image_codec.msg_to_rgb`).

    """

    def __init__(
        self, config: CacheConfig, decode: Callable[[Any], np.ndarray] = msg_to_rgb
    ) -> None:
        self.config = config
        self.stats = CacheStats()
        self._decode = decode
        self._frames: dict[str, deque[_Frame]] = {}
        self._image_errors: dict[str, Refusal] = {}
        self._joints: dict[str, tuple[float, float]] = {}
        self._joint_errors: dict[str, Refusal] = {}
        self.clear()

    def clear(self) -> None:
        """Forget every frame, joint value, error and counter."""
        self.stats = CacheStats()
        self.clear_inputs()

    def clear_inputs(self) -> None:
        """Forget every frame, joint value and error; keep the counters (a clock jump)."""
        self._frames = {camera: deque() for camera in self.config.cameras}
        self._image_errors = {}
        self._joints = {}
        self._joint_errors = {}

    def _drop(self, reason: DropReason, detail: str) -> Drop:
        drop = Drop(reason, detail)
        self.stats.drops[reason.value] = self.stats.drops.get(reason.value, 0) + 1
        self.stats.last_drop = drop
        return drop

    def _future(self, source: str, stamp: float, received_at: float | None) -> Drop | None:
        if received_at is None or stamp - received_at <= self.config.max_skew:
            return None
        return self._drop(
            DropReason.FUTURE_STAMP,
            f'{source} stamped {stamp - received_at:.3f} s ahead of its receipt '
            f'(max_skew {self.config.max_skew} s)',
        )

    # ----------------------------------------------------------------------------- images

    def add_image(
        self, camera: str, image: np.ndarray, stamp: float, received_at: float | None = None
    ) -> Refusal | Drop | None:
        """Store a decoded ``(H, W, 3)`` RGB frame; return why it is not usable, if it is not.

        An unusable frame (wrong shape, dtype or size) marks the camera bad until its next good
        frame. A frame older than the camera's newest is dropped (counted, not an error); one
        stamped more than ``max_skew`` after ``received_at`` is a :class:`Drop`.
        """
        self._check_camera(camera)
        self.stats.frames_received += 1
        drop = self._future(f'camera {camera!r}', stamp, received_at)
        if drop is not None:
            return drop
        problem = self._check_image(camera, image)
        if problem is not None:
            return self._mark_bad_image(camera, problem)
        return self._store_frame(camera, _Frame(float(stamp), image, _as_array))

    def add_image_message(
        self, camera: str, msg: Any, received_at: float | None = None
    ) -> Refusal | Drop | None:
        """Store a ``sensor_msgs/Image`` or ``CompressedImage``-like message, undecoded.

        Its header fields are checked now (a raw image whose sizes disagree with its data is a
        bad image at once); the pixels are decoded when an observation uses the frame.
        """
        self._check_camera(camera)
        self.stats.frames_received += 1
        stamp = stamp_seconds(msg.header.stamp)
        drop = self._future(f'camera {camera!r}', stamp, received_at)
        if drop is not None:
            return drop
        try:
            size = message_image_size(msg)
        except ImageDecodeError as error:
            return self._mark_bad_image(camera, str(error))
        if size is not None:
            problem = self._check_size(camera, size)
            if problem is not None:
                return self._mark_bad_image(camera, problem)
        return self._store_frame(camera, _Frame(stamp, msg, self._decode))

    def _store_frame(self, camera: str, frame: _Frame) -> None:
        frames = self._frames[camera]
        if frames and frame.stamp < frames[-1].stamp:
            self.stats.frames_out_of_order += 1
            return None
        self._image_errors.pop(camera, None)
        frames.append(frame)
        oldest_needed = frame.stamp - self.config.clip_span - self.config.max_skew
        while len(frames) > 1 and frames[1].stamp <= oldest_needed:
            frames.popleft()
        return None

    def _check_camera(self, camera: str) -> None:
        if camera not in self._frames:
            raise KeyError(f'unknown camera {camera!r}; expected one of {self.config.cameras}')

    def _check_image(self, camera: str, image: np.ndarray) -> str | None:
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            return f'expected a uint8 array, got {getattr(image, "dtype", type(image).__name__)}'
        if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
            return f'expected shape (H, W, 3), got {image.shape}'
        return self._check_size(camera, image.shape[:2])

    def _check_size(self, camera: str, size: tuple[int, int]) -> str | None:
        wanted = self.config.size_of(camera)
        if self.config.image_fit == 'exact' and wanted is not None and tuple(size) != wanted:
            return f'size {size[0]}x{size[1]}, expected {wanted[0]}x{wanted[1]} (image_fit: exact)'
        return None

    def _fit(self, camera: str, image: np.ndarray) -> np.ndarray:
        problem = self._check_image(camera, image)
        if problem is not None:
            raise ImageDecodeError(problem)
        size = self.config.size_of(camera)
        return image if size is None else letterbox(image, size)

    def _mark_bad_image(self, camera: str, problem: str) -> Refusal:
        self.stats.frames_bad += 1
        refusal = Refusal(RefusalReason.BAD_IMAGE, f'camera {camera!r}: {problem}')
        self._image_errors[camera] = refusal
        return refusal

    # ----------------------------------------------------------------------------- joints

    def add_joint_state(
        self,
        names: Sequence[str],
        positions: Sequence[float],
        stamp: float,
        received_at: float | None = None,
    ) -> Refusal | Drop | None:
        """Store the positions of the configured joints found in ``names``; ignore the others.

        A message naming a joint twice, with counts that disagree, or stamped more than
        ``max_skew`` after ``received_at`` is dropped whole (a :class:`Drop`). A non-finite
        value marks that joint bad until a finite one arrives. Joint states may be split over
        several messages (e.g. arm and gripper on separate topics).
        """
        return self._add_joints(names, {'positions': positions}, stamp, received_at)

    def add_joint_state_message(
        self, msg: Any, received_at: float | None = None
    ) -> Refusal | Drop | None:
        """Store a ``sensor_msgs/JointState``-like message (``name``, ``position``, header).

        ``velocity`` and ``effort``, where present, must be empty or one value per name.
        """
        columns = {'positions': msg.position}
        for label in ('velocity', 'effort'):
            values = getattr(msg, label, ())
            if len(values):
                columns[label] = values
        return self._add_joints(msg.name, columns, stamp_seconds(msg.header.stamp), received_at)

    def _add_joints(
        self,
        names: Sequence[str],
        columns: dict[str, Sequence[float]],
        stamp: float,
        received_at: float | None,
    ) -> Refusal | Drop | None:
        self.stats.joint_states_received += 1
        drop = self._malformed(names, columns) or self._future('joint_states', stamp, received_at)
        if drop is not None:
            self.stats.joint_states_bad += 1
            return drop
        refusal = None
        wanted = self.config.joint_names
        for name, value in zip(names, columns['positions'], strict=True):
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

    def _malformed(self, names: Sequence[str], columns: dict[str, Sequence[float]]) -> Drop | None:
        for label, values in columns.items():
            if len(values) != len(names):
                return self._drop(
                    DropReason.JOINT_COUNT_MISMATCH,
                    f'joint_states message with {len(names)} names but {len(values)} {label}',
                )
        if len(set(names)) != len(names):
            repeated = sorted(name for name, count in Counter(names).items() if count > 1)
            return self._drop(
                DropReason.DUPLICATE_JOINT_NAME,
                f'joint_states message names {", ".join(map(repr, repeated))} more than once',
            )
        return None

    # ----------------------------------------------------------------------------- build

    def build(self, now: float, prompt: str, session_id: str = 'default') -> Observation | Refusal:
        """Return the observation at time ``now`` or the first reason it cannot be given.

        Checks run in a fixed order: bad images, bad joints, missing, stale, skewed; then the
        frames used are decoded (a frame that cannot be is a ``bad_image`` refusal). The
        observation's stamp is the newest stamp among the sources used.
        """
        refusal = self.check(now)
        images = {}
        if refusal is None:
            for camera in self.config.cameras:
                try:
                    images[camera] = self._clip(camera)
                except _FrameDecodeError as error:
                    self._frames[camera].remove(error.frame)
                    refusal = self._mark_bad_image(camera, str(error))
                    break
        if refusal is not None:
            self.stats.refusals[refusal.reason.value] = (
                self.stats.refusals.get(refusal.reason.value, 0) + 1
            )
            return refusal
        config = self.config
        arm = np.array([self._joints[name][1] for name in config.arm_joints], dtype=np.float64)
        gripper = np.array(
            [
                min(max((self._joints[joint][1] - low) / (high - low), 0.0), 1.0)
                for joint, low, high in config.grippers
            ],
            dtype=np.float64,
        )
        return Observation(
            images=images,
            joint_position=arm,
            gripper_position=gripper,
            prompt=prompt,
            stamp=self.newest_stamp(),
            session_id=session_id,
        )

    def newest_stamp(self) -> float | None:
        """The newest stamp among the stored sources (an observation's stamp), or None."""
        stamps = self._source_stamps().values()
        return max(stamp for stamp, _ in stamps) if stamps else None

    def _source_stamps(self) -> dict[str, tuple[float, str]]:
        """Source label -> (stamp, label) of every source present."""
        sources = {}
        for camera, frames in self._frames.items():
            if frames:
                sources[camera] = (frames[-1].stamp, f'camera {camera!r}')
        for name in self.config.joint_names:
            if name in self._joints:
                sources[name] = (self._joints[name][0], f'joint {name!r}')
        return sources

    def check(self, now: float) -> Refusal | None:
        """The reason :meth:`build` would refuse at ``now`` before decoding, or None.

        Counts nothing.
        """
        config = self.config
        for camera in config.cameras:
            if camera in self._image_errors:
                return self._image_errors[camera]
        for name in config.joint_names:
            if name in self._joint_errors:
                return self._joint_errors[name]
        missing = [f'camera {c!r}' for c in config.cameras if not self._frames[c]]
        missing += [f'joint {n!r}' for n in config.joint_names if n not in self._joints]
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
        """The camera's frame or clip for the policy, decoding the frames it picks."""
        frames = self._frames[camera]
        newest = frames[-1]
        if len(self.config.clip_offsets) == 1:
            return self._rgb(camera, newest)
        stamps = np.array([frame.stamp for frame in frames])
        picked = []
        for offset in self.config.clip_offsets:
            index = int(np.argmin(np.abs(stamps - (newest.stamp + offset))))
            picked.append(self._rgb(camera, frames[index]))
        return np.stack(picked)

    def _rgb(self, camera: str, frame: _Frame) -> np.ndarray:
        try:
            return frame.rgb(lambda image: self._fit(camera, image))
        except ImageDecodeError as error:
            raise _FrameDecodeError(frame, error) from error
