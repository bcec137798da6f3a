# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Sample a bag's episodes on the dataset's frame clock, and refuse what would poison training.

Frame ``k`` of an episode is the observation the policy node would have built at
``start + k / fps`` (seconds of log time) from this bag: camera frames and joint states go
through the node's own :class:`~dreamzero_ros.core.observations.observation_cache.ObservationCache`
by :func:`~dreamzero_ros.replay.observations.observations`, so the states are the latest at or
before the frame and the images the newest frame of each camera, letterboxed to its dataset
resolution, exactly as live (no training/inference skew by construction).

The action of frame ``k`` is the joint position the robot is sent to for the next frame
(DROID's: the target one control step ahead):

* ``next-state``: the measured state of frame ``k + 1``;
* ``command``: the command topic (JointTrajectory or JointState) at ``t_k + 1 / fps``, the
  last command holding after it; joints it does not name (a gripper with its own action
  interface) from the next measured state. Frames before the first command are trimmed.

The last sampled frame only gives the action of the one before it. Leading frames without a full
observation (sources not yet seen) are trimmed, and so are trailing frames after the first
source ends. An episode is refused, with the first reason (its code first), for: a gap (an
input ``stale``, ``skewed`` or ``missing`` between good frames), a NaN joint (``bad_joints``) or
command (``nan``), a ``bad_image``, a joint outside the robot's limits (``joint_limits``, state
or action), a ``clock_jump`` (a message's stamp moving against its log time by more than the
limit), or fewer frames than the minimum (``too_short``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dreamzero_ros.core.observations.messages import NS_PER_S, stamp_seconds
from dreamzero_ros.core.observations.observation_cache import CacheConfig, Refusal, RefusalReason
from dreamzero_ros.export.episodes import EpisodeSpan, PromptTimeline
from dreamzero_ros.policy_types import Observation
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.observations import check_topics, observations, query_times
from dreamzero_ros.replay.reference import Trajectory, read_trajectory
from dreamzero_ros.replay.topics import ReplayTopics

__all__ = [
    'ACTION_SOURCES',
    'EpisodeRefusedError',
    'FrameSink',
    'SampledEpisode',
    'SamplingOptions',
    'sample_bag',
]

#: Where an action comes from (see the module docstring).
ACTION_SOURCES = ('next-state', 'command')


class EpisodeRefusedError(Exception):
    """An episode that is not exported: ``reason`` (a code) and what was found."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f'{reason}: {detail}')
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class SamplingOptions:
    """How episodes are sampled and what refuses them.

    Attributes:
        fps: the dataset's frame rate.
        actions: one of :data:`ACTION_SOURCES`.
        command_topic: the command topic (``command`` actions).
        lower: lowest position of each command column (arm joints, then grippers in policy
            units), or None: no limit check.
        upper: highest position, same layout.
        limit_margin: how far beyond a limit a joint may be before the episode is refused.
        max_clock_jump: largest change, seconds, of a topic's stamp against its log time
            between two of its messages.
        min_frames: fewest frames an episode may have.

    """

    fps: float
    actions: str = 'next-state'
    command_topic: str = ''
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    limit_margin: float = 0.0
    max_clock_jump: float = 1.0
    min_frames: int = 2

    def __post_init__(self) -> None:
        if self.fps <= 0:
            raise ValueError(f'fps must be > 0, got {self.fps}')
        if self.actions not in ACTION_SOURCES:
            raise ValueError(f'actions from {self.actions!r}: choose one of {ACTION_SOURCES}')
        if self.actions == 'command' and not self.command_topic:
            raise ValueError('actions from the command need the command topic (--command-topic)')
        if self.min_frames < 1 or self.max_clock_jump <= 0 or self.limit_margin < 0:
            raise ValueError('min_frames must be >= 1, max_clock_jump > 0, limit_margin >= 0')


class FrameSink(Protocol):
    """Where an episode's images go, frame by frame (its videos)."""

    def add(self, images: Mapping[str, np.ndarray]) -> None:
        """One frame: camera -> ``(H, W, 3)`` uint8 RGB."""

    def discard(self) -> None:
        """The episode was refused: forget everything written."""


@dataclass
class SampledEpisode:
    """An accepted episode's low-dimensional data, one row per frame written to its sink.

    Attributes:
        span: the episode as found in the bag.
        times: ``(N,)`` log time of each frame, seconds.
        arm: ``(N, A)`` measured arm joints (the cache's ``arm_joints`` order).
        grippers: ``(N, G)`` measured grippers, policy units (0 open .. 1 closed).
        target_arm: ``(N, A)`` the action's arm joints.
        target_grippers: ``(N, G)`` the action's grippers.
        instructions: the instruction of each frame.
        notes: what was trimmed, for the report.
        sink: where its images went (to be closed by the caller).

    """

    span: EpisodeSpan
    times: np.ndarray
    arm: np.ndarray
    grippers: np.ndarray
    target_arm: np.ndarray
    target_grippers: np.ndarray
    instructions: list[str]
    notes: list[str] = field(default_factory=list)
    sink: FrameSink | None = None


@dataclass
class _Pending:
    time: float
    observation: Observation


class _ClockWatch:
    """Per topic: the last log time seen and the stamp's offset from it (clock jumps)."""

    def __init__(self, max_jump: float) -> None:
        self.max_jump = max_jump
        self.last_seen: dict[str, float] = {}
        self._offset: dict[str, float] = {}
        self.jumps: list[tuple[float, str, float]] = []  # (log time, topic, stamp change)

    def on_message(self, topic: str, log_ns: int, message: Any) -> None:
        time = log_ns / NS_PER_S
        self.last_seen[topic] = time
        stamp = stamp_seconds(message.header.stamp)
        offset = time - stamp
        previous = self._offset.get(topic)
        self._offset[topic] = offset
        if previous is not None and abs(offset - previous) > self.max_jump:
            self.jumps.append((time, topic, previous - offset))


class _EpisodeSampler:
    """Consumes one episode's queries in time order; frames go to a sink once certain."""

    def __init__(
        self,
        span: EpisodeSpan,
        options: SamplingOptions,
        cache: CacheConfig,
        prompts: PromptTimeline,
        open_sink: Callable[[], FrameSink],
        earliest: float = -np.inf,
    ) -> None:
        self.span = span
        self._earliest = earliest
        self.options = options
        self.prompts = prompts
        self._open_sink = open_sink
        self._sink: FrameSink | None = None
        self._hold = int(np.ceil(cache.max_age * options.fps)) + 2
        self._pending: deque[_Pending] = deque()
        self._written: list[_Pending] = []
        self._leading: Refusal | None = None
        self._trailing: tuple[float, Refusal] | None = None
        self.refused: EpisodeRefusedError | None = None
        self.last_seen: dict[str, float] = {}

    def add(
        self, time: float, result: Observation | Refusal, last_seen: Mapping[str, float]
    ) -> None:
        """One query of the episode; ``last_seen``: topic -> log time of its last message."""
        self.last_seen = dict(last_seen)
        if self.refused is not None:
            return
        if time < self._earliest and not self._written and not self._pending:
            self._leading = self._leading or Refusal(RefusalReason.MISSING, 'no command yet')
            return
        if isinstance(result, Refusal):
            if not self._written and not self._pending:
                self._leading = self._leading or result
            elif self._trailing is None:
                self._trailing = (time, result)
            return
        if self._trailing is not None:
            self._refuse_inputs(*self._trailing)
            return
        self._pending.append(_Pending(time, result))
        if len(self._pending) > self._hold:
            self._write(self._pending.popleft())

    def _write(self, frame: _Pending) -> None:
        if self._sink is None:
            self._sink = self._open_sink()
        self._sink.add(frame.observation.images)
        self._written.append(frame)

    def _refuse_inputs(self, time: float, refusal: Refusal) -> None:
        """Inputs unusable between good frames: a gap, NaN joints, a bad image, skew."""
        at = f'at {time - self.span.start:.3f} s into the episode'
        self.refuse(refusal.reason.value, f'{refusal.detail} {at}')

    def refuse(self, reason: str, detail: str) -> None:
        if self.refused is None:
            self.refused = EpisodeRefusedError(reason, detail)
            if self._sink is not None:
                self._sink.discard()
            self._pending.clear()

    def finish(self, last_seen: Mapping[str, float], sources: Sequence[str]) -> SampledEpisode:
        """Trim the tail, write what is left and return the episode (or raise its refusal).

        ``last_seen``: topic -> log time of its last message read; a trailing ``stale``
        refusal (a source that ended) cuts the frames after the first source's last message.
        """
        kept = list(self._pending)
        if self.refused is None and self._trailing is not None:
            refusal = self._trailing[1]
            if refusal.reason is not RefusalReason.STALE:  # not a source that ended: refuse
                self._refuse_inputs(*self._trailing)
            ended = min(last_seen.get(topic, -np.inf) for topic in sources)
            kept = [frame for frame in kept if frame.time <= ended + 1e-9]
        if self.refused is not None:
            raise self.refused
        if len(self._written) + len(kept) < self.options.min_frames + 1:
            found = len(self._written) + len(kept)
            why = f' ({self._leading})' if self._leading and not found else ''
            self.refuse(
                'too_short',
                f'{max(found - 1, 0)} frames{why}, fewer than {self.options.min_frames}',
            )
            raise self.refused
        for frame in kept[:-1]:
            self._write(frame)
        frames = [*self._written, kept[-1]] if kept else self._written
        if not kept:  # the last written frame gives the last action only: it cannot be kept
            self.refuse('too_short', 'the tail left no frame for the last action')
            raise self.refused
        episode = self._episode(frames)
        episode.sink = self._sink
        return episode

    def _episode(self, frames: list[_Pending]) -> SampledEpisode:
        times = np.array([f.time for f in frames])
        arm = np.array([f.observation.joint_position for f in frames], dtype=np.float64)
        grippers = np.array([f.observation.gripper_position for f in frames], dtype=np.float64)
        notes = []
        trimmed = times[0] - self.span.start
        if trimmed > 0.5 / self.options.fps:
            notes.append(f'{trimmed:.2f} s trimmed at the start ({self._leading})')
        instructions = [self.span.instruction or self.prompts.at(t) for t in times[:-1]]
        return SampledEpisode(
            self.span,
            times[:-1],
            arm[:-1],
            grippers[:-1],
            arm[1:],
            grippers[1:],
            instructions,
            notes,
        )


def _command_start(trajectory: Trajectory, arm_dof: int) -> float:
    """The first time every arm joint has been commanded (inf where one never is)."""
    firsts = []
    for column in range(arm_dof):
        known = np.isfinite(trajectory.positions[:, column])
        firsts.append(trajectory.times[known][0] if known.any() else np.inf)
    return max(firsts, default=-np.inf)


def _command_targets(
    episode: SampledEpisode, trajectory: Trajectory, arm_dof: int, fps: float
) -> None:
    """The episode's targets: the command at each frame's next step (the last one holds).

    Columns the command does not name (a gripper) keep the next measured state.
    """
    times = episode.times + 1.0 / fps
    commanded = np.full((len(times), len(trajectory.names)), np.nan)
    for column in range(len(trajectory.names)):
        known = np.isfinite(trajectory.positions[:, column])
        if known.any():
            values = trajectory.positions[known, column]
            commanded[:, column] = np.interp(times, trajectory.times[known], values)
    arm = commanded[:, :arm_dof]
    missing = np.argwhere(~np.isfinite(arm))
    if len(missing):
        row, column = missing[0]
        raise EpisodeRefusedError(
            'nan',
            f'no command for {trajectory.names[column]!r} at '
            f'{episode.times[row] - episode.span.start:.3f} s into the episode',
        )
    episode.target_arm = arm
    grippers = commanded[:, arm_dof:]
    episode.target_grippers = np.where(np.isfinite(grippers), grippers, episode.target_grippers)


def _check_limits(episode: SampledEpisode, options: SamplingOptions, names: Sequence[str]) -> None:
    if options.lower is None or options.upper is None:
        return
    for label, values in (
        ('state', np.concatenate([episode.arm, episode.grippers], axis=1)),
        ('action', np.concatenate([episode.target_arm, episode.target_grippers], axis=1)),
    ):
        if not np.all(np.isfinite(values)):
            raise EpisodeRefusedError('nan', f'a NaN in the {label}')
        below = values < options.lower - options.limit_margin
        above = values > options.upper + options.limit_margin
        bad = np.argwhere(below | above)
        if len(bad):
            row, column = bad[0]
            raise EpisodeRefusedError(
                'joint_limits',
                f'{label} joint {names[column]!r} is {values[row, column]:.4f}, outside '
                f'[{options.lower[column]:.4f}, {options.upper[column]:.4f}] at '
                f'{episode.times[row] - episode.span.start:.3f} s into the episode',
            )


def sample_bag(
    reader: BagReader,
    topics: ReplayTopics,
    cache: CacheConfig,
    spans: Sequence[EpisodeSpan],
    options: SamplingOptions,
    prompts: PromptTimeline,
    open_sink: Callable[[], FrameSink],
    progress: Callable[[float], None] | None = None,
) -> Iterator[SampledEpisode | EpisodeRefusedError]:
    """Sample every span of one bag in one pass; yield each one's episode or refusal in order.

    Each is yielded as soon as the bag is read past its end. ``open_sink()`` is called when an
    episode's first frame is certain; the sink of a refused episode is discarded, an accepted
    one's is the caller's to close. ``progress(seconds)`` reports the bag time reached.

    Raises:
        BagError: a camera or joint-state topic absent, empty or of another type; a damaged
            bag (unless the reader allows partial bags).

    """
    camera_topics = check_topics(reader, topics)
    sources = [*camera_topics.values(), topics.joint_states]
    trajectory = None
    if options.actions == 'command':
        grippers = {len(cache.arm_joints) + i: g[1:] for i, g in enumerate(cache.grippers)}
        names = (*cache.arm_joints, *(g[0] for g in cache.grippers))
        trajectory = read_trajectory(reader, options.command_topic, names, gripper_ranges=grippers)
    period = 1.0 / options.fps
    grids = [query_times(span.start, span.end, period) for span in spans]
    earliest = -np.inf
    if trajectory is not None:  # frames before the first command are trimmed as leading
        earliest = _command_start(trajectory, len(cache.arm_joints)) - period - 1e-9
    samplers = [_EpisodeSampler(s, options, cache, prompts, open_sink, earliest) for s in spans]
    owner = [index for index, grid in enumerate(grids) for _ in grid]
    watch = _ClockWatch(options.max_clock_jump)
    times = [time for grid in grids for time in grid]

    def close(index: int) -> SampledEpisode | EpisodeRefusedError:
        sampler, span = samplers[index], spans[index]
        jumps = [jump for jump in watch.jumps if span.start <= jump[0] <= span.end]
        if jumps:
            time, topic, change = jumps[0]
            sampler.refuse(
                'clock_jump',
                f'{topic} stamp moved {change:+.3f} s against its log time at '
                f'{time - span.start:.3f} s into the episode (limit {options.max_clock_jump} s)',
            )
        try:
            episode = sampler.finish(sampler.last_seen, sources)
            if trajectory is not None:
                _command_targets(episode, trajectory, len(cache.arm_joints), options.fps)
            _check_limits(episode, options, cache.joint_names)
        except EpisodeRefusedError as refusal:
            sampler.refuse(refusal.reason, refusal.detail)
            return refusal
        return episode

    current = 0
    stream = observations(reader, topics, cache, times, '', on_message=watch.on_message)
    for position, query in enumerate(stream):
        index = owner[position]
        while current < index:
            yield close(current)
            current += 1
        samplers[index].add(query.time, query.result, watch.last_seen)
        if progress is not None:
            progress(query.time)
    for index in range(current, len(spans)):
        yield close(index)
