# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Holds: brake the motion in force to a stop within the joint limits, without a jump.

A hold takes over from the plan in force like a chunk does (core/motion/chunk_scheduler.py): it
repeats that plan from its start (``now``) to its hand-over point ``motion.lead`` later, the time
for the message to reach the controller, then brakes. :func:`braking_curve` stops a state (position,
velocity, acceleration) with one quintic segment to rest (zero velocity and acceleration), the
one whose velocity is a smooth cubic (its stop point ``p + v T / 2 + a T^2 / 12``), nominally at
``motion.stop_deceleration``: of a geometric series of durations, the one nearest the nominal
whose exact extremes (core/motion/spline_segments.py) keep speed, acceleration and jerk within the
limits and the positions within ``[lower, upper]`` is taken (longer ones first). Where no
braking stays inside the position limits (the motion heads into one faster than the
acceleration limits can stop it), :func:`braking_hold` follows the plan in force, which stays
inside, to its first point from which braking does (at the latest its end: every plan ends at
rest within the limits). A plan already at rest is held with one point at rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, with_lead_in
from dreamzero_ros.core.motion.spline_segments import (
    hermite_coefficients,
    polynomial_extremes,
    segment_extremes,
)
from dreamzero_ros.core.motion.time_scaling import LIMIT_SLACK, limit_ratios
from dreamzero_ros.core.motion.trajectory import MotionConfig

#: Durations tried for a braking: the nominal one times ``_GROWTH ** k``, k < ``_CANDIDATES``
#: (``_BATCH`` at a time, until one is within the limits), then shorter ones.
_GROWTH = 1.15
_CANDIDATES = 48
_BATCH = 8


@dataclass(frozen=True)
class Braking:
    """Outcome of :func:`braking_curve`.

    Attributes:
        duration: seconds from the start of the braking to rest.
        stop: where each joint comes to rest.
        within_limits: False when no braking within the dynamic limits stays inside the
            position limits (this one leaves them least), or none is within the dynamic limits
            (this one exceeds them least).

    """

    duration: float
    stop: np.ndarray
    within_limits: bool


def braking_curve(
    position: np.ndarray,
    velocity: np.ndarray,
    acceleration: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    motion: MotionConfig,
) -> Braking:
    """The shortest quintic braking of the arm state to rest within ``motion``'s limits.

    The nominal duration is ``max(motion.hold_time, 1.5 |v| / motion.stop_deceleration)`` (the
    smooth cubic velocity's peak deceleration is ``1.5 v / T``); the shortest longer one that
    is within the limits is taken, else the longest shorter one (down to ``motion.hold_time``:
    braking harder, within the acceleration limits, may stop before a position limit). The
    stop point is clipped into ``[lower, upper]`` (or no further out than ``position``).
    """
    position, velocity, acceleration = (
        np.asarray(x, dtype=np.float64) for x in (position, velocity, acceleration)
    )
    nominal = nominal_duration(velocity, motion)
    low, high = np.minimum(lower, position), np.maximum(upper, position)
    longer = nominal * _GROWTH ** np.arange(_CANDIDATES)
    # shorter ones too (down to hold_time): harder, but they may stop before a position limit
    count = int(np.ceil(np.log(nominal / motion.hold_time) / np.log(_GROWTH)))
    shorter = np.maximum(nominal / _GROWTH ** np.arange(1, count + 1), motion.hold_time)
    tried = []
    for durations in (*np.array_split(longer, _CANDIDATES // _BATCH), shorter):
        if not len(durations):
            continue
        state = (position, velocity, acceleration)
        stops, dynamic, outside = _assess(durations, state, low, high, motion)
        good = (dynamic <= 1.0 + LIMIT_SLACK) & (outside == 0.0)
        if np.any(good):  # the nearest to the nominal: the first of the batch
            index = int(np.argmax(good))
            return Braking(float(durations[index]), stops[index], True)
        tried.append((durations, stops, dynamic, outside))
    durations, stops, dynamic, outside = (np.concatenate(x) for x in zip(*tried, strict=True))
    feasible = dynamic <= 1.0 + LIMIT_SLACK
    if np.any(feasible):
        index = int(np.argmin(np.where(feasible, outside, np.inf)))
    else:
        index = int(np.argmin(dynamic))
    return Braking(float(durations[index]), stops[index], False)


def nominal_duration(velocity: np.ndarray, motion: MotionConfig) -> float:
    """Seconds a braking from ``velocity`` nominally takes (at least ``motion.hold_time``).

    Its peak deceleration is then ``motion.stop_deceleration``.
    """
    peak = float(np.max(1.5 * np.abs(velocity) / motion.stop_deceleration))
    return max(motion.hold_time, peak)


def nominal_stops(
    positions: np.ndarray,
    velocities: np.ndarray,
    accelerations: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    motion: MotionConfig,
) -> np.ndarray:
    """Where the nominal brakings of many states ``(M, N)`` stop: a cheap first estimate."""
    t = np.array([nominal_duration(v, motion) for v in velocities])[:, None]
    stops = positions + velocities * t / 2.0 + accelerations * t**2 / 12.0
    return np.clip(stops, np.minimum(lower, positions), np.maximum(upper, positions))


def _assess(
    durations: np.ndarray,
    state: tuple[np.ndarray, np.ndarray, np.ndarray],
    low: np.ndarray,
    high: np.ndarray,
    motion: MotionConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stops, largest limit ratio and position excess of the brakings lasting ``durations``."""
    position, velocity, acceleration = state
    t = durations[:, None]
    stops = np.clip(position + velocity * t / 2.0 + acceleration * t**2 / 12.0, low, high)
    zero = np.zeros_like(stops)
    coefficients = hermite_coefficients(
        durations, (position, velocity, acceleration), (stops, zero, zero)
    )
    extremes = polynomial_extremes(durations, coefficients)
    dynamic = np.ones(len(durations))
    for _, _, ratio in limit_ratios(extremes, motion):
        dynamic = np.maximum(dynamic, ratio.max(axis=1))
    slack = LIMIT_SLACK * np.maximum(1.0, high - low)
    outside = np.maximum(low - slack - extremes.lowest, extremes.highest - high - slack)
    return stops, dynamic, np.maximum(outside, 0.0).max(axis=1)


def braking_from(
    plan: ActionPlan, at: float, lower: np.ndarray, upper: np.ndarray, motion: MotionConfig
) -> tuple[ActionPlan, bool]:
    """A plan that brakes ``plan``'s arm motion from ``at`` (:func:`braking_curve`), then holds.

    The other columns hold their value at ``at``. Returns the plan and whether its braking is
    within the limits.
    """
    arm = motion.arm_joints
    position, velocity, acceleration = (x[0] for x in plan.states_at(np.array([at])))
    lower, upper = (
        np.broadcast_to(np.asarray(v, dtype=np.float64), position.shape) for v in (lower, upper)
    )
    velocity[arm:] = acceleration[arm:] = 0.0
    braking = braking_curve(
        position[:arm], velocity[:arm], acceleration[:arm], lower[:arm], upper[:arm], motion
    )
    end = position.copy()
    end[:arm] = braking.stop
    return (
        ActionPlan(
            np.array([at, at + braking.duration]),
            np.stack([position, end]),
            np.stack([velocity, 0.0 * end]),
            np.stack([acceleration, 0.0 * end]),
        ),
        braking.within_limits,
    )


def braking_hold(
    plan: ActionPlan, now: float, lower: np.ndarray, upper: np.ndarray, motion: MotionConfig
) -> ActionPlan:
    """The hold that replaces ``plan`` from ``now``: its lead-in, then braking to a stop.

    A plan already at rest gives a one-point hold there. Otherwise the braking starts
    ``motion.lead`` after ``now`` on ``plan`` (the controller, receiving the
    hold before then, follows ``plan`` until it: no jump in position, velocity or
    acceleration). Where it cannot stay within the position limits while ``plan`` (from then to
    its end at rest) does, the hold follows ``plan`` to its first point from which braking
    stays inside (or to its end).
    """
    if plan.end_time <= now:  # at rest: one point (the controller starts it on receipt)
        return ActionPlan.hold(plan.position_at(now), now)
    handover = now + motion.lead
    brake, within = braking_from(plan, handover, lower, upper, motion)
    if within or plan.end_time <= handover or not _stays_inside(plan, handover, lower, upper):
        return with_lead_in(brake, plan, now)
    for knot in plan.times[plan.times > handover]:  # the first point to brake from inside
        later, within = braking_from(plan, float(knot), lower, upper, motion)
        if within:
            return with_lead_in(later, plan, now)
    return with_lead_in(_after(plan, handover), plan, now)


def _after(plan: ActionPlan, time: float) -> ActionPlan:
    """``plan`` from ``time`` on (its state then, then its later knots)."""
    later = plan.times > time
    position, velocity, acceleration = plan.states_at(np.array([time]))
    velocities = plan.velocities if plan.velocities is not None else 0.0 * plan.rows
    accelerations = plan.accelerations if plan.accelerations is not None else 0.0 * plan.rows
    return ActionPlan(
        np.concatenate([[time], plan.times[later]]),
        np.vstack([position, plan.rows[later]]),
        np.vstack([velocity, velocities[later]]),
        np.vstack([acceleration, accelerations[later]]),
    )


def _stays_inside(plan: ActionPlan, time: float, lower: np.ndarray, upper: np.ndarray) -> bool:
    """True if ``plan`` from ``time`` on never leaves ``[lower, upper]`` (beyond its own knots)."""
    rest = _after(plan, time)
    extremes = segment_extremes(rest.times, rest.rows, rest.velocities, rest.accelerations)
    low = np.minimum(np.minimum(lower, rest.rows[:-1]), rest.rows[1:])
    high = np.maximum(np.maximum(upper, rest.rows[:-1]), rest.rows[1:])
    slack = LIMIT_SLACK * np.maximum(1.0, high - low)
    return bool(np.all(extremes.lowest >= low - slack) and np.all(extremes.highest <= high + slack))
