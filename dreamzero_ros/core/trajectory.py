# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Joint trajectory math: knot velocities, their safety bounds, and interpolation as ros2_control's.

joint_trajectory_controller (JTC) interpolates between two points linearly when they carry
positions only, with a cubic when they carry velocities and a quintic with accelerations
(``Trajectory::interpolate_between_points``). :func:`interpolate` reproduces that, so that the
node's plan is exactly the curve the controller executes.

The node sends positions and velocities. :func:`spline_velocities` gives the knots the
velocities of a C2 cubic spline (continuous acceleration) that starts with the velocity of the
motion in force (a hand-over continuous in position and velocity) and ends at rest (JTC rejects
a trajectory whose last velocity is not zero). :func:`bound_velocities` then makes the curve
provably safe: every cubic segment stays within the position limits (its Bezier control points
do) and its peak speed (computed exactly) within ``max_velocity``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Relative slack of the speed check against floating-point rounding.
_SPEED_SLACK = 1e-9


def interpolate(
    duration: float,
    start: tuple[np.ndarray, np.ndarray | None, np.ndarray | None],
    end: tuple[np.ndarray, np.ndarray | None, np.ndarray | None],
    elapsed: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample one segment as JTC does: (positions, velocities, accelerations) at ``elapsed``.

    ``start`` and ``end`` are (positions, velocities or None, accelerations or None) of the two
    points, ``duration`` the seconds between them. Both velocities given: cubic; velocities and
    accelerations: quintic; otherwise linear. Outside ``[0, duration]`` the time is clamped and,
    as in JTC, the linear form is used.
    """
    p0, v0, a0 = (None if x is None else np.asarray(x, dtype=np.float64) for x in start)
    p1, v1, a1 = (None if x is None else np.asarray(x, dtype=np.float64) for x in end)
    h = float(duration)
    t = min(max(float(elapsed), 0.0), h)
    has_velocity = v0 is not None and v1 is not None
    has_acceleration = has_velocity and a0 is not None and a1 is not None
    if h <= 0.0 or not 0.0 <= elapsed <= h or not has_velocity:
        slope = (p1 - p0) / h if h > 0.0 else np.zeros_like(p0)
        return p0 + t * slope, slope, np.zeros_like(p0)
    if not has_acceleration:
        c2 = (-3.0 * p0 + 3.0 * p1 - 2.0 * v0 * h - v1 * h) / h**2
        c3 = (2.0 * p0 - 2.0 * p1 + v0 * h + v1 * h) / h**3
        position = p0 + v0 * t + c2 * t**2 + c3 * t**3
        return position, v0 + 2.0 * c2 * t + 3.0 * c3 * t**2, 2.0 * c2 + 6.0 * c3 * t
    c2 = 0.5 * a0
    c3 = (-20.0 * (p0 - p1) - (3.0 * a0 - a1) * h**2 - (12.0 * v0 + 8.0 * v1) * h) / (2.0 * h**3)
    c4 = (30.0 * (p0 - p1) + (3.0 * a0 - 2.0 * a1) * h**2 + (16.0 * v0 + 14.0 * v1) * h) / (
        2.0 * h**4
    )
    c5 = (-12.0 * (p0 - p1) - (a0 - a1) * h**2 - 6.0 * (v0 + v1) * h) / (2.0 * h**5)
    position = p0 + v0 * t + c2 * t**2 + c3 * t**3 + c4 * t**4 + c5 * t**5
    velocity = v0 + 2.0 * c2 * t + 3.0 * c3 * t**2 + 4.0 * c4 * t**3 + 5.0 * c5 * t**4
    acceleration = 2.0 * c2 + 6.0 * c3 * t + 12.0 * c4 * t**2 + 20.0 * c5 * t**3
    return position, velocity, acceleration


def sample_knots(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray | None,
    at: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Positions and velocities ``(len(at), D)`` of a knot sequence, holding its ends.

    Between knots (ends included): cubic Hermite with ``velocities``, linear without (as JTC).
    Before the first knot and after the last the end positions hold with zero velocity.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    at = np.atleast_1d(np.asarray(at, dtype=np.float64))
    out_p = np.empty((len(at), positions.shape[1]))
    out_v = np.zeros_like(out_p)
    index = np.clip(np.searchsorted(times, at, side='right') - 1, 0, max(len(times) - 2, 0))
    before = at < times[0]
    after = at >= times[-1] if len(times) == 1 else at > times[-1]
    out_p[before] = positions[0]
    out_p[after] = positions[-1]
    inside = ~(before | after)
    if np.any(inside):
        i = index[inside]
        h = (times[i + 1] - times[i])[:, None]
        tau = (at[inside, None] - times[i, None]) / h
        p0, p1 = positions[i], positions[i + 1]
        if velocities is None:
            out_p[inside] = p0 + tau * (p1 - p0)
            out_v[inside] = (p1 - p0) / h
        else:
            m0, m1 = velocities[i] * h, velocities[i + 1] * h
            tau2, tau3 = tau**2, tau**3
            out_p[inside] = (
                (2 * tau3 - 3 * tau2 + 1) * p0
                + (tau3 - 2 * tau2 + tau) * m0
                + (-2 * tau3 + 3 * tau2) * p1
                + (tau3 - tau2) * m1
            )
            out_v[inside] = (
                (6 * tau2 - 6 * tau) * p0
                + (3 * tau2 - 4 * tau + 1) * m0
                + (-6 * tau2 + 6 * tau) * p1
                + (3 * tau2 - 2 * tau) * m1
            ) / h
    return out_p, out_v


def spline_velocities(
    times: np.ndarray,
    positions: np.ndarray,
    start_velocity: np.ndarray,
    end_velocity: np.ndarray | None = None,
) -> np.ndarray:
    """Knot velocities ``(K, N)`` of the C2 cubic spline through ``positions`` at ``times``.

    Clamped ends: ``start_velocity`` at the first knot, ``end_velocity`` (default 0) at the last.
    Solves the tridiagonal continuity system (Thomas algorithm), all joints at once.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    count, joints = positions.shape
    start = np.broadcast_to(np.asarray(start_velocity, dtype=np.float64), (joints,))
    end = np.zeros(joints) if end_velocity is None else np.asarray(end_velocity, dtype=np.float64)
    if count == 1:
        return end[None, :].copy()
    h = np.diff(times)
    lower = np.zeros(count)
    diagonal = np.ones(count)
    upper = np.zeros(count)
    rhs = np.zeros((count, joints))
    rhs[0], rhs[-1] = start, end
    secant = np.diff(positions, axis=0) / h[:, None]
    for i in range(1, count - 1):
        lower[i], upper[i] = 1.0 / h[i - 1], 1.0 / h[i]
        diagonal[i] = 2.0 * (lower[i] + upper[i])
        rhs[i] = 3.0 * (secant[i] / h[i] + secant[i - 1] / h[i - 1])
    sweep = np.zeros(count)
    solution = np.zeros((count, joints))
    sweep[0], solution[0] = upper[0] / diagonal[0], rhs[0] / diagonal[0]
    for i in range(1, count):
        pivot = diagonal[i] - lower[i] * sweep[i - 1]
        sweep[i] = upper[i] / pivot
        solution[i] = (rhs[i] - lower[i] * solution[i - 1]) / pivot
    for i in range(count - 2, -1, -1):
        solution[i] -= sweep[i] * solution[i + 1]
    return solution


def segment_peak_speed(times: np.ndarray, positions: np.ndarray, velocities: np.ndarray):
    """Exact largest ``|velocity|`` of each cubic Hermite segment, ``(K - 1, N)``."""
    h = np.diff(np.asarray(times, dtype=np.float64))[:, None]
    v0, v1 = velocities[:-1], velocities[1:]
    secant = np.diff(positions, axis=0) / h
    b = 6.0 * secant - 4.0 * v0 - 2.0 * v1
    c = 3.0 * v0 + 3.0 * v1 - 6.0 * secant
    peak = np.maximum(np.abs(v0), np.abs(v1))
    with np.errstate(divide='ignore', invalid='ignore'):
        vertex = np.where(c != 0.0, -b / (2.0 * c), -1.0)
    inside = (vertex > 0.0) & (vertex < 1.0)
    at_vertex = np.abs(v0 + b * vertex + c * vertex**2)
    return np.where(inside, np.maximum(peak, at_vertex), peak)


@dataclass(frozen=True)
class BoundedVelocities:
    """Outcome of :func:`bound_velocities`.

    Attributes:
        velocities: the safe knot velocities, or None when no safe choice was found.
        changed: number of knot velocities moved away from the spline's.
        reason: why the knots cannot be followed within the limits; empty when they can.
        excess: largest ratio of a segment's peak speed to ``max_velocity`` left (> 1 when
            refused).

    """

    velocities: np.ndarray | None
    changed: int = 0
    reason: str = ''
    excess: float = 1.0


def bound_velocities(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    max_velocity: np.ndarray,
    passes: int = 12,
) -> BoundedVelocities:
    """Adjust interior knot velocities so that the cubic curve respects the limits everywhere.

    The first knot's velocity (the hand-over) and the last one's (rest) are kept. Each interior
    velocity is clamped into ``[-max_velocity, max_velocity]`` and into the range that keeps the
    neighbouring segments' Bezier control points (``p_i +- h v_i / 3``) inside
    ``[lower, upper]``: the curve then never leaves the position limits. Segments whose exact peak
    speed still exceeds ``max_velocity`` have their knot velocities moved halfway towards the
    segment's secant slope, for up to ``passes`` rounds.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    original = np.asarray(velocities, dtype=np.float64)
    if len(times) < 2:
        return BoundedVelocities(original.copy())
    h = np.diff(times)[:, None]
    secant = np.diff(positions, axis=0) / h
    # Position hull: knot i bounds the segment after it (p_i + h_i v_i / 3) and before it. A
    # segment with an end outside the limits (a start being brought into them) may reach its
    # ends, no further.
    seg_lower = np.minimum(np.minimum(lower, positions[:-1]), positions[1:])
    seg_upper = np.maximum(np.maximum(upper, positions[:-1]), positions[1:])
    low = np.full(positions.shape, -np.inf)
    high = np.full(positions.shape, np.inf)
    low[:-1] = np.maximum(low[:-1], 3.0 * (seg_lower - positions[:-1]) / h)
    high[:-1] = np.minimum(high[:-1], 3.0 * (seg_upper - positions[:-1]) / h)
    low[1:] = np.maximum(low[1:], 3.0 * (positions[1:] - seg_upper) / h)
    high[1:] = np.minimum(high[1:], 3.0 * (positions[1:] - seg_lower) / h)
    low = np.maximum(low, -max_velocity)
    high = np.minimum(high, max_velocity)
    fixed = np.zeros(positions.shape, dtype=bool)
    fixed[0] = fixed[-1] = True
    safe = np.where(fixed, original, np.clip(original, low, high))
    for _ in range(passes):
        peak = segment_peak_speed(times, positions, safe)
        over = peak > max_velocity * (1.0 + _SPEED_SLACK)
        if not np.any(over):
            return BoundedVelocities(safe, int(np.count_nonzero(safe != original)))
        target = np.zeros_like(safe)
        weight = np.zeros_like(safe)
        target[:-1] += np.where(over, secant, 0.0)
        weight[:-1] += over
        target[1:] += np.where(over, secant, 0.0)
        weight[1:] += over
        move = (weight > 0) & ~fixed
        toward = np.where(move, target / np.maximum(weight, 1), safe)
        safe = np.where(move, np.clip(0.5 * (safe + toward), low, high), safe)
    ratio = segment_peak_speed(times, positions, safe) / max_velocity
    segment, joint = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return BoundedVelocities(
        None,
        reason=f'joint {joint} cannot follow segment {segment} within max_velocity '
        f'{max_velocity[joint]:.3f} (needs {ratio[segment, joint] * max_velocity[joint]:.3f})',
        excess=float(ratio[segment, joint]),
    )


def braking_stop(
    position: np.ndarray,
    velocity: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    deceleration: np.ndarray,
    min_duration: float,
) -> tuple[float, np.ndarray]:
    """Where and after how long a motion stops at constant deceleration: ``(seconds, position)``.

    All joints stop together after ``max(min_duration, max |v| / deceleration)`` seconds at
    ``position + velocity * T / 2``, inside the limits (or no further out than ``position``).
    From ``(position, velocity)`` the cubic JTC draws to that point with zero end velocity is
    exactly the constant deceleration.
    """
    position = np.asarray(position, dtype=np.float64)
    velocity = np.asarray(velocity, dtype=np.float64)
    duration = max(float(min_duration), float(np.max(np.abs(velocity) / deceleration, initial=0.0)))
    stop = position + 0.5 * duration * velocity
    return duration, np.clip(stop, np.minimum(lower, position), np.maximum(upper, position))


#: Franka Panda joint speed limits, rad/s (datasheet), the default of :class:`MotionConfig`.
PANDA_MAX_VELOCITY = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
#: Braking deceleration of a hold, rad/s^2: half the Panda's joint acceleration limits.
PANDA_STOP_DECELERATION = (7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0)
#: Franka Panda joint acceleration limits, rad/s^2 (datasheet).
PANDA_MAX_ACCELERATION = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)
#: Franka Panda joint jerk limits, rad/s^3 (datasheet).
PANDA_MAX_JERK = (7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0)


@dataclass(frozen=True)
class MotionConfig:
    """How command rows become a trajectory: arm columns, limits, braking, hand-over lead.

    The first ``len(max_velocity)`` columns of a row are arm joints (splined and bounded); the
    columns after them (the gripper) are not sent in the arm trajectory and get no velocity.

    Attributes:
        max_velocity: largest speed of each arm joint on the interpolated curve, rad/s.
        stop_deceleration: deceleration of each arm joint when a hold brakes a motion, rad/s^2
            (at most ``max_acceleration``).
        max_acceleration: largest acceleration of each arm joint on the curve, rad/s^2, or
            None for no limit.
        max_jerk: largest jerk of each arm joint on each cubic segment, rad/s^3, or None.
        lead: seconds between a chunk's arrival and its hand-over point (the trajectory must
            reach the controller before its first point).
        hold_time: shortest duration of a hold, seconds.
        max_stretch: how much slower than the policy's timing a segment of a chunk may be
            played to respect the limits (core/time_scaling.py); a chunk that needs more is
            refused.

    """

    max_velocity: np.ndarray = PANDA_MAX_VELOCITY
    stop_deceleration: np.ndarray = PANDA_STOP_DECELERATION
    lead: float = 0.05
    hold_time: float = 1.0 / 15.0
    max_stretch: float = 4.0
    max_acceleration: np.ndarray | None = None
    max_jerk: np.ndarray | None = None

    def __post_init__(self) -> None:
        velocity = np.asarray(self.max_velocity, dtype=np.float64)
        arrays = {'max_velocity': velocity, 'stop_deceleration': self.stop_deceleration}
        for name in ('max_acceleration', 'max_jerk'):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name)
        arrays = {name: np.asarray(values, dtype=np.float64) for name, values in arrays.items()}
        if (
            velocity.ndim != 1
            or len(velocity) == 0
            or any(values.shape != velocity.shape for values in arrays.values())
        ):
            raise ValueError(
                f'{", ".join(arrays)} need one value per arm joint, got shapes '
                f'{[values.shape for values in arrays.values()]}'
            )
        for name, values in arrays.items():
            if not np.all(np.isfinite(values)) or np.any(values <= 0):
                raise ValueError(f'{name} must be finite and > 0, got {values}')
        acceleration = arrays.get('max_acceleration')
        if acceleration is not None and np.any(arrays['stop_deceleration'] > acceleration):
            raise ValueError(
                f'stop_deceleration {arrays["stop_deceleration"]} exceeds max_acceleration '
                f'{acceleration}'
            )
        if not self.lead >= 0 or not self.hold_time > 0 or not self.max_stretch >= 1:
            raise ValueError(
                f'lead must be >= 0, hold_time > 0 and max_stretch >= 1: {self.lead}, '
                f'{self.hold_time}, {self.max_stretch}'
            )
        for name, values in arrays.items():
            object.__setattr__(self, name, values)

    @property
    def arm_joints(self) -> int:
        """Number of arm columns at the start of each row."""
        return len(self.max_velocity)
