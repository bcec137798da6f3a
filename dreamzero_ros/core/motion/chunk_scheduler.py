# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Pipelined chunk execution: merge each new chunk into the plan the robot is executing.

A chunk answers an observation taken at ``stamp``; row ``k`` is the command for
``stamp + k * step_duration``. It arrives ``latency`` seconds later, while the previous plan is
still executing. :func:`merge_chunk` drops the rows already in the past (or too close to reach
the controller in time) and cross-fades from the executing plan to the new rows over a window as
long as the measured latency (clamped to ``[blend_min_steps, blend_max_steps]`` steps): the
older the observation behind a chunk, the further it may disagree with the plan in force, so the
longer the hand-over. The first kept row lies exactly on the executing plan, and the blend weight
rises linearly to 1 at the end of the window; the knot velocities and accelerations
(core/motion/trajectory.py) then make the hand-over continuous in velocity and acceleration too.
:func:`smooth_plan` times the rows within the joint limits (core/motion/time_scaling.py),
:func:`plan_chunk` does all of it, and :func:`with_lead_in` starts the trajectory on the plan in
force at the chunk's arrival, so that the segment the controller builds to the hand-over is a
piece of
that plan.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from dreamzero_ros.core.motion.safety import SafetyLimits, SafetyVerdict, apply_limits
from dreamzero_ros.core.motion.time_scaling import scale_time
from dreamzero_ros.core.motion.trajectory import MotionConfig, sample_knots


class ActionPlan:
    """Command rows at absolute times, holding the ends.

    With ``velocities`` (one per row and column) the rows are joined by cubic Hermite segments,
    with ``accelerations`` too by quintic ones, as joint_trajectory_controller joins points that
    carry them; without, linearly.
    """

    def __init__(
        self,
        times: np.ndarray,
        rows: np.ndarray,
        velocities: np.ndarray | None = None,
        accelerations: np.ndarray | None = None,
        handover_time: float | None = None,
    ) -> None:
        times = np.asarray(times, dtype=np.float64)
        rows = np.asarray(rows, dtype=np.float64)
        if times.ndim != 1 or rows.ndim != 2 or len(times) != len(rows) or len(times) == 0:
            raise ValueError(
                f'need N times and (N, D) rows, N >= 1; got {times.shape}, {rows.shape}'
            )
        if np.any(np.diff(times) <= 0):
            raise ValueError('plan times must be strictly increasing')
        if accelerations is not None and velocities is None:
            raise ValueError('accelerations need velocities')
        for name, values in (('velocities', velocities), ('accelerations', accelerations)):
            if values is not None and np.shape(values) != rows.shape:
                raise ValueError(f'{name} {np.shape(values)} do not match rows {rows.shape}')
        self.times = times
        self.rows = rows
        self.velocities = None if velocities is None else np.asarray(velocities, np.float64)
        self.accelerations = (
            None if accelerations is None else np.asarray(accelerations, np.float64)
        )
        #: When this plan takes over from the one before it (its first own row; knots before
        #: it repeat the plan in force, see :func:`with_lead_in`).
        self.handover_time = float(times[0]) if handover_time is None else float(handover_time)

    @classmethod
    def hold(cls, position: np.ndarray, time: float) -> ActionPlan:
        """A plan that stays at ``position`` from ``time`` on."""
        position = np.asarray(position, dtype=np.float64)[None, :]
        return cls(np.array([time]), position, np.zeros_like(position), np.zeros_like(position))

    @property
    def start_time(self) -> float:
        """Time of the first row."""
        return float(self.times[0])

    @property
    def end_time(self) -> float:
        """Time of the last row; the plan holds it afterwards."""
        return float(self.times[-1])

    def states_at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Commanded positions, velocities and accelerations at ``times``, each ``(len, D)``."""
        return sample_knots(self.times, self.rows, self.velocities, self.accelerations, times)

    def position_at(self, time: float) -> np.ndarray:
        """Command at ``time``: interpolated between rows, the first/last row outside them."""
        return self.positions_at(np.array([time]))[0]

    def velocity_at(self, time: float) -> np.ndarray:
        """Commanded velocity at ``time`` (zero outside the rows)."""
        return self.states_at(np.array([time]))[1][0]

    def acceleration_at(self, time: float) -> np.ndarray:
        """Commanded acceleration at ``time`` (zero outside the rows)."""
        return self.states_at(np.array([time]))[2][0]

    def positions_at(self, times: np.ndarray) -> np.ndarray:
        """:meth:`position_at` for many times, ``(len(times), D)``."""
        return self.states_at(times)[0]


@dataclass(frozen=True)
class BlendConfig:
    """Bounds of the latency-driven hand-over window, in control steps.

    ``blend_max_steps = 0`` switches blending off (the new chunk replaces the plan at once).
    """

    blend_min_steps: int = 2
    blend_max_steps: int = 12

    def __post_init__(self) -> None:
        if self.blend_min_steps < 0 or self.blend_max_steps < 0:
            raise ValueError('blend_min_steps and blend_max_steps must be >= 0')
        if self.blend_max_steps and self.blend_min_steps > self.blend_max_steps:
            raise ValueError(
                f'blend_min_steps {self.blend_min_steps} exceeds blend_max_steps '
                f'{self.blend_max_steps}'
            )

    def window(self, latency: float, step_duration: float) -> float:
        """Blend window, seconds, for a chunk that arrived ``latency`` s after its stamp."""
        if self.blend_max_steps == 0:
            return 0.0
        steps = min(max(latency / step_duration, self.blend_min_steps), self.blend_max_steps)
        return steps * step_duration


@dataclass(frozen=True)
class MergedChunk:
    """The plan after a chunk is merged (before safety), and what the merge did.

    Attributes:
        times: absolute times of the kept rows.
        rows: the kept rows, blended with the executing plan at the start.
        dropped_steps: rows of the chunk already in the past on arrival.
        blend_window: seconds over which the hand-over ran (0 without a plan in force).

    """

    times: np.ndarray
    rows: np.ndarray
    dropped_steps: int
    blend_window: float


def merge_chunk(
    plan: ActionPlan | None,
    actions: np.ndarray,
    stamp: float,
    step_duration: float,
    now: float,
    blend: BlendConfig,
    lead: float = 0.0,
) -> MergedChunk | None:
    """Merge a chunk arriving at ``now`` into ``plan``; ``None`` if fewer than 2 rows are ahead.

    The kept rows start at the first row at or after ``now + lead`` (``lead``: time for the
    trajectory to reach the controller, so that its first point is still ahead there). That row
    is the hand-over: the blend weight is 0 on it (it lies on ``plan``) and rises linearly to 1
    over the latency-driven window.
    """
    actions = np.asarray(actions, dtype=np.float64)
    if step_duration <= 0:
        raise ValueError(f'step_duration must be > 0, got {step_duration}')
    first = max(0, math.ceil((now + lead - stamp) / step_duration - 1e-9))
    if first + 2 > len(actions):
        return None
    times = stamp + step_duration * np.arange(first, len(actions))
    rows = actions[first:].copy()
    window = 0.0
    if plan is not None:
        window = blend.window(now - stamp, step_duration)
        if window > 0:
            weights = np.clip((times - times[0]) / window, 0.0, 1.0)[:, None]
            rows = (1.0 - weights) * plan.positions_at(times) + weights * rows
    return MergedChunk(times, rows, first, window)


@dataclass(frozen=True)
class SmoothedPlan:
    """Outcome of :func:`smooth_plan`: the plan, or why the rows cannot be followed safely.

    Attributes:
        plan: rows with knot times and velocities, or None.
        velocity_changes: knot velocities moved off the spline to respect the limits.
        stretch: largest factor by which a segment was slowed down to respect the limits.
        reason: why there is no plan; empty when there is one.

    """

    plan: ActionPlan | None
    velocity_changes: int = 0
    stretch: float = 1.0
    reason: str = ''


def smooth_plan(
    times: np.ndarray,
    rows: np.ndarray,
    start_velocity: np.ndarray,
    start_acceleration: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    motion: MotionConfig,
) -> SmoothedPlan:
    """Give safe rows (within ``[lower, upper]``) the knot times, velocities and accelerations.

    The arm columns get the knots of the C2 spline that starts at ``start_velocity`` and
    ``start_acceleration`` (the plan in force at the first row) and ends at rest, bounded so
    that the interpolated curve stays within the position limits; the other columns get zero
    velocity and acceleration. Segments the curve cannot follow within ``motion``'s velocity,
    acceleration and jerk limits at the rows' own timing are played slower
    (core/motion/time_scaling.py; each at most ``motion.max_stretch`` times); the rows never change.
    """
    arm = motion.arm_joints
    rows = np.asarray(rows, dtype=np.float64)
    lower, upper = (
        np.broadcast_to(np.asarray(v, dtype=np.float64), rows.shape[1:]) for v in (lower, upper)
    )
    scaled = scale_time(
        times,
        rows[:, :arm],
        np.asarray(start_velocity)[:arm],
        np.asarray(start_acceleration)[:arm],
        lower[:arm],
        upper[:arm],
        motion,
    )
    if scaled.times is None:
        return SmoothedPlan(None, reason=scaled.reason)
    velocities = np.zeros_like(rows)
    accelerations = np.zeros_like(rows)
    velocities[:, :arm] = scaled.velocities
    accelerations[:, :arm] = scaled.accelerations
    return SmoothedPlan(
        ActionPlan(scaled.times, rows, velocities, accelerations),
        scaled.velocity_changes,
        scaled.stretch,
    )


#: Steps a chunk's hand-over may move later when its curve cannot follow from the first one.
HANDOVER_RETRIES = 3


@dataclass(frozen=True)
class ChunkPlan:
    """Outcome of :func:`plan_chunk`: each stage's result (None where it was not reached).

    Attributes:
        merged: the merged rows (None: the chunk is late).
        verdict: the safety verdict on them.
        smoothed: their timing (its ``plan`` None: refused).

    """

    merged: MergedChunk | None
    verdict: SafetyVerdict | None = None
    smoothed: SmoothedPlan | None = None


def plan_chunk(
    base: ActionPlan,
    actions: np.ndarray,
    stamp: float,
    step_duration: float,
    now: float,
    blend: BlendConfig,
    limits: SafetyLimits,
    motion: MotionConfig,
    lead: float,
) -> ChunkPlan:
    """Merge a chunk into ``base`` (:func:`merge_chunk`), limit it (core/motion/safety) and time it.

    The first merged row is the hand-over point on ``base`` (or the measured joints, which may
    lie outside the limits: core/motion/safety.py brings them in); the rest are limited after it.
    When the curve cannot follow the rows from that hand-over within the limits (the motion in
    force heads into a position limit the rows hold on to), the hand-over moves one step later,
    up to :data:`HANDOVER_RETRIES` times: ``base`` stays inside the limits and ends at rest, so
    a later hand-over starts from a slower state. The last attempt's outcome is returned.
    """
    outcome = ChunkPlan(None)
    for attempt in range(HANDOVER_RETRIES + 1):
        merged = merge_chunk(
            base, actions, stamp, step_duration, now, blend, lead + attempt * step_duration
        )
        if merged is None:
            return outcome
        start = merged.rows[0]
        verdict = apply_limits(merged.rows[1:], start, limits)
        if verdict.refused:
            return ChunkPlan(merged, verdict)
        smoothed = smooth_plan(
            merged.times,
            np.vstack([start, verdict.rows]),
            base.velocity_at(merged.times[0]),
            base.acceleration_at(merged.times[0]),
            limits.lower,
            limits.upper,
            motion,
        )
        outcome = ChunkPlan(merged, verdict, smoothed)
        if smoothed.plan is not None:
            break
    return outcome


#: Least seconds between two points of a lead-in (its start, its knots, the hand-over point).
_LEAD_IN_GAP = 1e-6


def with_lead_in(plan: ActionPlan, previous: ActionPlan, now: float) -> ActionPlan:
    """``plan`` preceded by ``previous`` from ``now`` to its first point (the lead-in).

    joint_trajectory_controller draws one segment from its state at the receipt of a trajectory
    to the trajectory's first point, or, when the receipt comes after some points, follows the
    segment in force. Starting at ``now`` (the state of ``previous`` then: position, velocity,
    acceleration) and carrying the knots of ``previous`` up to the hand-over point, every such
    segment is a piece of ``previous`` itself whenever the trajectory arrives before the
    hand-over point: the hand-over needs no velocity, acceleration or jerk that ``previous``
    does not. The plan also says what is commanded from ``now`` on, before its hand-over.
    ``plan.handover_time`` stays the first point of ``plan``.
    """
    start = plan.start_time
    if previous.velocities is None or previous.end_time <= now or start - now < _LEAD_IN_GAP:
        return plan  # at rest from now on (or no room): the controller's segment is a rest too
    # knots (nearly) coinciding with another are left out: the points must be clearly apart in
    # the message (nanoseconds) and for the segment between them
    inside = (previous.times > now + _LEAD_IN_GAP) & (previous.times < start - _LEAD_IN_GAP)
    knots = np.concatenate([[now], previous.times[inside]])
    positions, velocities, accelerations = previous.states_at(knots)
    positions[1:], velocities[1:] = previous.rows[inside], previous.velocities[inside]
    if previous.accelerations is not None:
        accelerations[1:] = previous.accelerations[inside]
    return ActionPlan(
        np.concatenate([knots, plan.times]),
        np.vstack([positions, plan.rows]),
        np.vstack([velocities, _or_zeros(plan.velocities, plan.rows)]),
        np.vstack([accelerations, _or_zeros(plan.accelerations, plan.rows)]),
        handover_time=plan.handover_time,
    )


def _or_zeros(values: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    return np.zeros_like(like) if values is None else values
