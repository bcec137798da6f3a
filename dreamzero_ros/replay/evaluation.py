# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Run a policy on a bag's recorded observations and score its chunks against what happened."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import functools
import inspect
import math
from pathlib import Path
import time

import numpy as np

from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.observations.messages import NS_PER_S
from dreamzero_ros.core.observations.observation_cache import CacheConfig, Refusal
from dreamzero_ros.core.robot.action_groups import GroupLayout
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.policy_types import ActionChunk, Observation, Policy, PolicyError
from dreamzero_ros.replay import metrics
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.handover import handover_quality
from dreamzero_ros.replay.integrity import IntegrityReport
from dreamzero_ros.replay.observations import check_topics, observations, query_times
from dreamzero_ros.replay.reference import Trajectory, read_trajectory
from dreamzero_ros.replay.topics import COMMAND_TYPES, ReplayTopics


@dataclass(frozen=True)
class EvaluationConfig:
    """What to evaluate and how.

    Attributes:
        topics: where observations and the reference are in the bag.
        cache: how frames and joint states are paired (the node's parameters).
        prompt: task instruction given to the policy.
        query_period_s: seconds of bag time between policy queries.
        start_offset_s: skip this much after every source has sent its first message.
        duration_s: evaluate at most this span of bag time (``None``: to the end).
        max_chunks: stop after this many chunks (``None``: no limit).
        session_id: policy session used for the whole bag.
        request_video: ask the policy for its predicted future frames (where its ``infer``
            takes ``predicted_video`` or ``return_video``, as the local engine's does).
        allow_partial: evaluate the intact parts of a damaged bag (what was skipped is in the
            metrics' ``integrity``) instead of refusing it.
        loop: the node's hand-over, limits and trajectory settings, for the hand-over quality
            of the command it would have sent (``None``: the node's defaults).
        layout: the policy's action columns, reordered into the node's layout (arm joints, then
            the gripper) before scoring; ``None``: already in it (DROID).
        groups: the robot's action groups on those columns: each is also scored on its own
            (the metrics' ``groups``); ``None``: not.
        policy: what produced the chunks (checkpoint, preset or server, options, version),
            copied into the metrics; ``random_weights`` true marks scores as meaningless.

    """

    topics: ReplayTopics
    cache: CacheConfig
    prompt: str
    query_period_s: float = 8 / 15
    start_offset_s: float = 0.0
    duration_s: float | None = None
    max_chunks: int | None = None
    session_id: str = 'replay'
    request_video: bool = False
    allow_partial: bool = False
    loop: LoopConfig | None = None
    layout: RobotLayout | None = None
    groups: GroupLayout | None = None
    policy: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkRecord:
    """One answered query: the chunk, the state it started from and what the robot did."""

    query_time: float
    stamp: float
    latency_s: float
    chunk_id: int
    step_duration: float
    timing_ms: dict[str, float]
    actions: np.ndarray
    state: np.ndarray
    reference: np.ndarray


@dataclass
class Evaluation:
    """Everything one evaluation run produced."""

    bag: str
    config: EvaluationConfig
    reference_topic: str
    reference: Trajectory
    records: list[ChunkRecord] = field(default_factory=list)
    refusals: list[tuple[float, str]] = field(default_factory=list)
    policy_errors: list[tuple[float, str]] = field(default_factory=list)
    span_s: tuple[float, float] = (0.0, 0.0)
    integrity: IntegrityReport = field(default_factory=IntegrityReport)

    def metrics(self) -> dict[str, object]:
        """The metrics JSON: horizon errors (policy and hold-position baseline), latency, timing."""
        groups = self.config.groups
        names = groups.command_names if groups is not None else self.config.topics.joint_names
        result: dict[str, object] = {
            'bag': self.bag,
            'reference_topic': self.reference_topic,
            'prompt': self.config.prompt,
            'policy': self.config.policy,
            'span_s': list(self.span_s),
            'queries': len(self.records) + len(self.refusals) + len(self.policy_errors),
            'chunks': len(self.records),
            'refusals': _count_reasons(self.refusals),
            'policy_errors': [f'{t:.3f}: {message}' for t, message in self.policy_errors],
            'integrity': self.integrity.to_json(),
        }
        if not self.records:
            return result
        arm_dof = len(groups.arm_joints if groups is not None else self.config.topics.arm_joints)
        predicted = np.stack([record.actions for record in self.records])
        reference = np.stack([record.reference for record in self.records])
        hold = np.repeat(
            np.stack([r.state for r in self.records])[:, None, :], predicted.shape[1], 1
        )
        if self.config.groups is not None:
            result['groups'] = metrics.group_errors(
                predicted,
                reference,
                hold,
                [(group.name, group.columns) for group in self.config.groups.groups],
                names,
            )
        latencies = np.array([record.latency_s for record in self.records])
        stage_names = sorted({stage for r in self.records for stage in r.timing_ms})
        first = self.records[0]
        result.update(
            {
                'errors': metrics.horizon_errors(predicted, reference, names, arm_dof),
                'hold_baseline_errors': metrics.horizon_errors(hold, reference, names, arm_dof),
                'latency_s': metrics.distribution(latencies),
                'policy_timing_ms': {
                    stage: metrics.distribution(
                        np.array([r.timing_ms.get(stage, math.nan) for r in self.records])
                    )
                    for stage in stage_names
                },
                'hand_over': handover_quality(
                    self.records, self.reference.at, self.config.loop or _default_loop()
                ),
                'timing': metrics.chunk_timing(
                    np.array([r.stamp for r in self.records]),
                    latencies,
                    np.array([r.query_time - r.stamp for r in self.records]),
                    first.step_duration,
                    first.actions.shape[0],
                    self.config.query_period_s,
                ),
            }
        )
        return result


def _default_loop() -> LoopConfig:
    from dreamzero_ros.core.config.node_config import build_settings

    return build_settings({}).loop


def _count_reasons(refusals: list[tuple[float, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, text in refusals:
        reason = text.split(':', 1)[0]
        counts[reason] = counts.get(reason, 0) + 1
    return counts


ProgressCallback = Callable[[float, float], None]
ChunkCallback = Callable[[ChunkRecord, ActionChunk], None]


def check_bag(path: str | Path, config: EvaluationConfig) -> IntegrityReport:
    """Check that the bag has every topic ``config`` needs, of its type, and is intact.

    Raises:
        BagError: a topic is missing or of another type; the bag is damaged (unless
            ``config.allow_partial``: then the report says what is damaged).

    """
    with BagReader(path, config.allow_partial) as reader:
        cameras = check_topics(reader, config.topics)
        reference = config.topics.command or config.topics.joint_states
        reader.require(reference, COMMAND_TYPES, 'reference')
        return reader.verify(sorted({*cameras.values(), config.topics.joint_states, reference}))


def evaluate_bag(
    path: str | Path,
    policy: Policy,
    config: EvaluationConfig,
    progress: ProgressCallback | None = None,
    on_chunk: ChunkCallback | None = None,
    integrity: IntegrityReport | None = None,
) -> Evaluation:
    """Query ``policy`` along the bag at ``config.query_period_s`` and score every chunk.

    Queries start once every camera and the joint-state topic have sent a message. The
    reference is the command topic where given, else the recorded joint states; a chunk's row
    ``k`` is compared with the reference at ``stamp + k * step_duration`` (NaN past the end).
    A refused observation or a :class:`PolicyError` is recorded and the replay goes on.
    The bag is checked first (:func:`check_bag`) unless ``integrity`` is its report already.

    Raises:
        BagError: bag unreadable or damaged (unless ``config.allow_partial``), topics missing
            or of the wrong type.

    """
    topics = config.topics
    if integrity is None:
        integrity = check_bag(path, config)
    with BagReader(path, config.allow_partial) as reader:
        cameras = check_topics(reader, topics)
        reference_topic = topics.command or topics.joint_states
        reference = _read_reference(reader, reference_topic, config)
        sources = [*cameras.values(), topics.joint_states]
        start = max(reader.first_log_ns(topic) for topic in sources) / NS_PER_S
        start += config.start_offset_s
        stop = (reader.end_ns - 1) / NS_PER_S
        if config.duration_s is not None:
            stop = min(stop, start + config.duration_s)
        evaluation = Evaluation(
            str(path), config, reference_topic, reference, span_s=(start, stop), integrity=integrity
        )
        times = query_times(start, stop, config.query_period_s)
        policy.reset(config.session_id)
        infer = policy.infer
        parameters = inspect.signature(infer).parameters
        if config.request_video and 'predicted_video' in parameters:
            # kept undecoded: decoded by the consumer, outside the timed inference
            infer = functools.partial(infer, predicted_video=True)
        elif config.request_video and 'return_video' in parameters:
            infer = functools.partial(infer, return_video=True)
        for query in observations(
            reader, topics, config.cache, times, config.prompt, config.session_id
        ):
            if progress is not None:
                progress(query.time - start, stop - start)
            if isinstance(query.result, Refusal):
                evaluation.refusals.append((query.time, str(query.result)))
                continue
            record, chunk = _run_query(infer, query.time, query.result, reference, config.layout)
            if record is None:
                evaluation.policy_errors.append((query.time, chunk))
                continue
            evaluation.records.append(record)
            if on_chunk is not None:
                on_chunk(record, chunk)
            if config.max_chunks is not None and len(evaluation.records) >= config.max_chunks:
                break
        if progress is not None:  # the last query is done too, whatever ended the loop
            progress(stop - start, stop - start)
    return evaluation


def _padded(state: np.ndarray, width: int) -> np.ndarray:
    """The measured state as a command row: columns it lacks (a base's velocity) at rest, 0."""
    return np.concatenate([state, np.zeros(max(width - state.shape[0], 0))])


def _read_reference(reader: BagReader, topic: str, config: EvaluationConfig) -> Trajectory:
    """The robot's recorded motion in the command row's columns (a base's velocities: NaN)."""
    groups = config.groups
    if groups is None:
        names = tuple(config.topics.joint_names)
        return read_trajectory(reader, topic, names, config.cache.gripper_range)
    arm = len(groups.arm_joints)
    ranges = {arm + i: (low, high) for i, (_, low, high) in enumerate(groups.grippers)}
    return read_trajectory(reader, topic, tuple(groups.command_names), gripper_ranges=ranges)


def _run_query(
    infer: Callable[[Observation], ActionChunk],
    query_time: float,
    observation: Observation,
    reference: Trajectory,
    layout: RobotLayout | None = None,
) -> tuple[ChunkRecord, ActionChunk] | tuple[None, str]:
    """Infer once; return ``(record, chunk)`` or ``(None, error message)``."""
    began = time.perf_counter()
    try:
        chunk = infer(observation)
    except PolicyError as error:
        return None, f'{type(error).__name__}: {error}'
    latency = time.perf_counter() - began
    actions = np.asarray(chunk.actions, dtype=np.float64)
    if layout is not None:
        actions = layout.command_rows(actions)
    steps = chunk.stamp + chunk.step_duration * np.arange(actions.shape[0])
    record = ChunkRecord(
        query_time=query_time,
        stamp=float(chunk.stamp),
        latency_s=latency,
        chunk_id=int(chunk.chunk_id),
        step_duration=float(chunk.step_duration),
        timing_ms=dict(chunk.timing_ms),
        actions=actions,
        state=_padded(
            np.concatenate([observation.joint_position, observation.gripper_position]),
            actions.shape[-1],
        ),
        reference=reference.at(steps),
    )
    return record, chunk
