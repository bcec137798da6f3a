# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Time scaling: stretch a trajectory's timing until its spline respects the joint limits.

MoveIt's idea for a path given as waypoints: the positions stay, the time between them grows
until velocity, acceleration and jerk are within the limits. Here the curve is the one
joint_trajectory_controller draws through points that carry positions, velocities and
accelerations: quintic segments (core/motion/spline_segments.py) through the knots of the C2 spline
that starts with the hand-over's velocity and acceleration and ends at rest
(:func:`~dreamzero_ros.core.motion.trajectory.spline_knots`), kept inside the position limits by
:func:`~dreamzero_ros.core.motion.trajectory.bound_knots`.

:func:`~dreamzero_ros.core.motion.spline_segments.segment_extremes` gives the exact largest speed,
acceleration and jerk of every segment (the curve between the waypoints, not only at them).
:func:`scale_time` lengthens each segment that exceeds a limit by the factor that segment needs
(velocity scales with 1/s, acceleration with 1/s^2, jerk with 1/s^3) and solves again, since the
knots of a spline depend on every segment. The whole may take at most ``max_stretch`` times the
rows' own duration; a segment alone may be slowed down more (the first, from a fast hand-over,
often is). The curve is continuous in acceleration everywhere, so the jerk of its 1 kHz samples
(third differences, as a Franka computes it) never exceeds the segments' largest jerk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dreamzero_ros.core.motion.trajectory import MotionConfig, bound_knots, spline_knots

#: Relative slack of the limit checks against floating-point rounding.
LIMIT_SLACK = 1e-9
#: Rounds of :func:`scale_time` before it gives up.
_ROUNDS = 60


@dataclass(frozen=True)
class ScaledTiming:
    """Outcome of :func:`scale_time`.

    Attributes:
        times: the knot times (the first unchanged), or None when no timing within
            ``max_stretch`` respects the limits.
        velocities: the knot velocities of the arm joints, or None.
        accelerations: the knot accelerations of the arm joints, or None.
        stretch: the factor by which the whole was slowed down (its duration over the rows').
        velocity_changes: knots moved towards rest to keep the curve in the position limits.
        reason: why there is no timing; empty when there is one.

    """

    times: np.ndarray | None
    velocities: np.ndarray | None
    accelerations: np.ndarray | None = None
    stretch: float = 1.0
    velocity_changes: int = 0
    reason: str = ''


def limit_ratios(extremes, motion: MotionConfig) -> list[tuple[str, float, np.ndarray]]:
    """``(limit name, power, (K - 1, N) ratio)`` of each configured limit on each segment."""
    ratios = [('max_velocity', 1.0, extremes.speed / motion.max_velocity)]
    if motion.max_acceleration is not None:
        ratios.append(('max_acceleration', 2.0, extremes.acceleration / motion.max_acceleration))
    if motion.max_jerk is not None:
        ratios.append(('max_jerk', 3.0, extremes.jerk / motion.max_jerk))
    return ratios


def scale_time(
    times: np.ndarray,
    positions: np.ndarray,
    start_velocity: np.ndarray,
    start_acceleration: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    motion: MotionConfig,
) -> ScaledTiming:
    """Knot times, velocities and accelerations that keep the arm curve within ``motion``'s limits.

    ``positions`` ``(K, N)`` are the arm joints' waypoints (never changed), ``times`` their
    timing, ``start_velocity`` and ``start_acceleration`` the state at the first knot (the
    hand-over; the curve ends at rest). Segments are lengthened (the whole by at most
    ``motion.max_stretch``) until the curve's speed, acceleration and (where configured) jerk
    are within the limits everywhere on it; it stays within ``[lower, upper]`` throughout.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    base = np.diff(times)
    durations = base.copy()
    worst: tuple[float, str, int, int] = (0.0, '', 0, 0)
    for _ in range(_ROUNDS):
        knots = times[0] + np.concatenate([[0.0], np.cumsum(durations)])
        velocities, accelerations = spline_knots(
            knots, positions, start_velocity, start_acceleration
        )
        bounded = bound_knots(knots, positions, velocities, accelerations, lower, upper)
        if bounded.velocities is None:
            return ScaledTiming(None, None, reason=bounded.reason)
        extremes = bounded.extremes
        need = np.ones(len(durations))
        worst = (0.0, '', 0, 0)
        for name, power, ratio in limit_ratios(extremes, motion):
            segment, joint = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
            worst = max(worst, (float(ratio[segment, joint]), name, int(segment), int(joint)))
            need = np.maximum(need, ratio.max(axis=1) ** (1.0 / power))
        over = need > 1.0 + LIMIT_SLACK
        if not np.any(over):
            return ScaledTiming(
                knots,
                bounded.velocities,
                bounded.accelerations,
                durations.sum() / base.sum(),
                bounded.changed,
            )
        durations = np.where(over, durations * np.maximum(need, 1.01), durations)
        if durations.sum() > base.sum() * motion.max_stretch:
            break
    excess, name, segment, joint = worst
    return ScaledTiming(
        None,
        None,
        reason=f'joint {joint} exceeds {name} on segment {segment} by {excess:.2f}x even '
        f'{durations.sum() / base.sum():.2f}x slower (trajectory.max_stretch '
        f'{motion.max_stretch:.2f})',
    )
