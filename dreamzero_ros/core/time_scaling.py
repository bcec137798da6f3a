# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Time scaling: stretch a trajectory's timing until its spline respects the joint limits.

MoveIt's idea for a path given as waypoints: the positions stay, the time between them grows
until velocity, acceleration and jerk are within the limits. Here the curve is the one
joint_trajectory_controller draws through points that carry positions and velocities: cubic
Hermite segments (core/trajectory.py), the knot velocities those of the C2 spline from the
hand-over velocity to rest, bounded by :func:`~dreamzero_ros.core.trajectory.bound_velocities`.

On a cubic segment the acceleration is linear in time and the jerk constant, so
:func:`cubic_extremes` gives the exact largest speed, acceleration and jerk of every segment
(the curve between the waypoints, not only at them). :func:`scale_time` lengthens each segment
that exceeds a limit by the factor that segment needs (velocity scales with 1/s, acceleration
with 1/s^2, jerk with 1/s^3) and solves again, since the knot velocities of a spline depend on
every segment. The whole may take at most ``max_stretch`` times the rows' own duration; a
segment alone may be slowed down more (the first, from a fast hand-over, often is).
:func:`jtc_curve_extremes` samples the curve JTC follows, the segment it builds
from its state at the trajectory's receipt to the first point included: the check that tests
and replay apply to what the node sends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dreamzero_ros.core.trajectory import (
    MotionConfig,
    bound_velocities,
    interpolate,
    segment_peak_speed,
    spline_velocities,
)

#: Relative slack of the limit checks against floating-point rounding.
_SLACK = 1e-9
#: Rounds of :func:`scale_time` before it gives up.
_ROUNDS = 60


def cubic_extremes(
    times: np.ndarray, positions: np.ndarray, velocities: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact largest ``|velocity|``, ``|acceleration|`` and ``|jerk|`` of each cubic segment.

    Each is ``(K - 1, N)`` for ``K`` knots of ``N`` joints joined by cubic Hermite segments.
    """
    h = np.diff(np.asarray(times, dtype=np.float64))[:, None]
    positions = np.asarray(positions, dtype=np.float64)
    v0, v1 = velocities[:-1], velocities[1:]
    secant = np.diff(positions, axis=0) / h
    c2 = (3.0 * secant - 2.0 * v0 - v1) / h
    c3 = (v0 + v1 - 2.0 * secant) / h**2
    acceleration = np.maximum(np.abs(2.0 * c2), np.abs(2.0 * c2 + 6.0 * c3 * h))
    return segment_peak_speed(times, positions, velocities), acceleration, np.abs(6.0 * c3)


@dataclass(frozen=True)
class ScaledTiming:
    """Outcome of :func:`scale_time`.

    Attributes:
        times: the knot times (the first unchanged), or None when no timing within
            ``max_stretch`` respects the limits.
        velocities: the knot velocities of the arm joints, or None.
        stretch: the factor by which the whole was slowed down (its duration over the rows').
        velocity_changes: knot velocities moved off the spline for the position and speed limits.
        reason: why there is no timing; empty when there is one.

    """

    times: np.ndarray | None
    velocities: np.ndarray | None
    stretch: float = 1.0
    velocity_changes: int = 0
    reason: str = ''


def _needed(
    ratio: np.ndarray, power: float, names: str, worst: list[tuple[float, str, int, int]]
) -> np.ndarray:
    """Per-segment stretch from a ``(K - 1, N)`` limit ratio; records the worst excess."""
    segment, joint = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    worst.append((float(ratio[segment, joint]), names, int(segment), int(joint)))
    return ratio.max(axis=1) ** (1.0 / power)


def scale_time(
    times: np.ndarray,
    positions: np.ndarray,
    start_velocity: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    motion: MotionConfig,
) -> ScaledTiming:
    """Knot times and velocities that keep the arm curve within ``motion``'s limits.

    ``positions`` ``(K, N)`` are the arm joints' waypoints (never changed), ``times`` their
    timing, ``start_velocity`` the velocity at the first knot (the hand-over; the curve ends at
    rest). Segments are lengthened (the whole by at most ``motion.max_stretch``) until the curve's
    speed, acceleration and (where configured) jerk are within the limits everywhere on it and
    it stays within ``[lower, upper]``.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    start_velocity = np.asarray(start_velocity, dtype=np.float64)
    base = np.diff(times)
    durations = base.copy()
    for _ in range(_ROUNDS):
        knots = times[0] + np.concatenate([[0.0], np.cumsum(durations)])
        spline = spline_velocities(knots, positions, start_velocity)
        bounded = bound_velocities(knots, positions, spline, lower, upper, motion.max_velocity)
        velocities = spline if bounded.velocities is None else bounded.velocities
        speed, acceleration, jerk = cubic_extremes(knots, positions, velocities)
        worst: list[tuple[float, str, int, int]] = []
        need = _needed(speed / motion.max_velocity, 1.0, 'max_velocity', worst)
        if motion.max_acceleration is not None:
            ratio = acceleration / motion.max_acceleration
            need = np.maximum(need, _needed(ratio, 2.0, 'max_acceleration', worst))
        if motion.max_jerk is not None:
            need = np.maximum(need, _needed(jerk / motion.max_jerk, 3.0, 'max_jerk', worst))
        over = need > 1.0 + _SLACK
        if bounded.velocities is not None and not np.any(over):
            return ScaledTiming(knots, velocities, durations.sum() / base.sum(), bounded.changed)
        if not np.any(over):  # the speed bound failed on the spline's velocities: slow it all
            over[:] = True
            need[:] = max(1.1, bounded.excess)
        durations = np.where(over, durations * np.maximum(need, 1.01), durations)
        if durations.sum() > base.sum() * motion.max_stretch:
            break
    excess, name, segment, joint = max(worst)
    return ScaledTiming(
        None,
        None,
        reason=f'joint {joint} exceeds {name} on segment {segment} by {excess:.2f}x even '
        f'{durations.sum() / base.sum():.2f}x slower (trajectory.max_stretch '
        f'{motion.max_stretch:.2f})',
    )


def jtc_curve_extremes(
    state: tuple[np.ndarray, np.ndarray],
    received: float,
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray,
    samples_per_segment: int = 50,
) -> tuple[np.ndarray, np.ndarray]:
    """Largest ``|velocity|`` and ``|acceleration|`` per joint on the curve JTC follows, sampled.

    JTC receives the trajectory (knots at absolute ``times``) at ``received`` in ``state``
    (positions, velocities): before the first knot it draws the cubic from that state to the
    first point; then the cubic segments between points. Knots before ``received`` are skipped,
    as JTC samples the segment in force. ``samples_per_segment`` points per segment, ends
    included.
    """
    times = np.asarray(times, dtype=np.float64)
    start = (np.asarray(state[0], np.float64), np.asarray(state[1], np.float64), None)
    segments = []
    if received < times[0]:
        segments.append((received, times[0], start, (positions[0], velocities[0], None)))
    for i in range(len(times) - 1):
        if times[i + 1] > received:
            segments.append(
                (
                    times[i],
                    times[i + 1],
                    (positions[i], velocities[i], None),
                    (positions[i + 1], velocities[i + 1], None),
                )
            )
    speed = np.zeros(positions.shape[1])
    acceleration = np.zeros(positions.shape[1])
    for begin, end, a, b in segments:
        for elapsed in np.linspace(max(begin, received) - begin, end - begin, samples_per_segment):
            _, v, acc = interpolate(end - begin, a, b, elapsed)
            speed = np.maximum(speed, np.abs(v))
            acceleration = np.maximum(acceleration, np.abs(acc))
    return speed, acceleration
