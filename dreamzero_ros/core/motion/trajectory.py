# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Joint trajectory math: knot velocities and accelerations, position bounds, JTC's interpolation.

joint_trajectory_controller (JTC) interpolates between two points linearly when they carry
positions only, with a cubic when they carry velocities and a quintic with accelerations
(``Trajectory::interpolate_between_points``). :func:`sample_knots` reproduces that for a knot
sequence (core/motion/spline_segments.py), so that the node's plan is exactly the curve the
controller executes.

The node sends positions, velocities and accelerations. :func:`spline_knots` gives the knots
those of a C2 spline (continuous acceleration) that starts with the velocity and acceleration of
the motion in force (a hand-over continuous in position, velocity and acceleration) and ends at
rest (JTC rejects a trajectory whose last velocity is not zero; a Franka needs zero acceleration
there too). :func:`bound_knots` then keeps the curve inside the position limits: each quintic
segment's exact position range is checked, and interior knots are slowed towards rest where it
would leave them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dreamzero_ros.core.motion.spline_segments import (
    SegmentExtremes,
    sample_segments,
    segment_extremes,
    segment_polynomials,
)
from dreamzero_ros.core.robot.panda import PANDA_MAX_VELOCITY, PANDA_STOP_DECELERATION

#: Slack of the position check against floating-point rounding, relative to the range.
_POSITION_SLACK = 1e-12


def sample_knots(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray | None,
    accelerations: np.ndarray | None,
    at: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, velocities, accelerations ``(len(at), D)`` of a knot sequence, holding its ends.

    Between knots (ends included): quintic with ``accelerations``, cubic with ``velocities``
    only, linear without (as JTC). Before the first knot and after the last the end positions
    hold at rest.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    at = np.atleast_1d(np.asarray(at, dtype=np.float64))
    if len(times) == 1:
        held = np.broadcast_to(positions[0], (len(at), positions.shape[1])).copy()
        return held, np.zeros_like(held), np.zeros_like(held)
    _, coefficients = segment_polynomials(times, positions, velocities, accelerations)
    p, v, a = sample_segments(times, coefficients, at)
    return p, v, a


def _solve_tridiagonal(
    lower: np.ndarray, diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray
) -> np.ndarray:
    """Thomas algorithm for ``(n,)`` bands and ``(n, N)`` right-hand sides (all joints at once)."""
    count = len(diagonal)
    sweep = np.zeros(count)
    solution = np.zeros_like(rhs)
    sweep[0], solution[0] = upper[0] / diagonal[0], rhs[0] / diagonal[0]
    for i in range(1, count):
        pivot = diagonal[i] - lower[i] * sweep[i - 1]
        sweep[i] = upper[i] / pivot
        solution[i] = (rhs[i] - lower[i] * solution[i - 1]) / pivot
    for i in range(count - 2, -1, -1):
        solution[i] -= sweep[i] * solution[i + 1]
    return solution


def spline_knots(
    times: np.ndarray,
    positions: np.ndarray,
    start_velocity: np.ndarray,
    start_acceleration: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Knot velocities and accelerations ``(K, N)`` of a C2 spline starting as the motion in force.

    The spline passes through ``positions`` at ``times``, starts with ``start_velocity`` and
    ``start_acceleration`` (the hand-over) and ends at rest (zero velocity and acceleration, as
    JTC holds the last point): cubic segments inside, a quartic first and last segment (the
    extra freedom that takes the start acceleration and the end at rest), continuous
    acceleration at every knot. Sent with these velocities and accelerations, JTC's quintic
    through the points is exactly this spline. Two knots: the one quintic between them.
    Solves a tridiagonal system (Thomas algorithm), all joints at once.
    """
    times = np.asarray(times, dtype=np.float64)
    positions = np.asarray(positions, dtype=np.float64)
    count, joints = positions.shape
    v0 = np.broadcast_to(np.asarray(start_velocity, dtype=np.float64), (joints,))
    a0 = np.broadcast_to(np.asarray(start_acceleration, dtype=np.float64), (joints,))
    velocities = np.zeros((count, joints))
    accelerations = np.zeros((count, joints))
    if count == 1:
        return velocities, accelerations
    velocities[0], accelerations[0] = v0, a0
    if count == 2:
        return velocities, accelerations
    h = np.diff(times)
    delta = np.diff(positions, axis=0)
    unknowns = count - 2
    lower, diagonal, upper = np.zeros(unknowns), np.zeros(unknowns), np.zeros(unknowns)
    rhs = np.zeros((unknowns, joints))
    # Row i - 1: the acceleration at the end of segment i - 1 equals that at the start of
    # segment i. First segment (quartic from p0, v0, a0): a0 + 6 (v0 + v_1) / h - 12 d / h^2.
    # Cubic segment: a(0) = 6 d / h^2 - (4 v_i + 2 v_i+1) / h, a(h) = -6 d / h^2 +
    # (2 v_i + 4 v_i+1) / h. Last segment (quartic to rest): a(0) = 12 d / h^2 - 6 v / h.
    for i in range(1, count - 1):
        row = i - 1
        ha, hb = h[i - 1], h[i]
        if i == 1:
            diagonal[row] += 6.0 / ha
            rhs[row] += 12.0 * delta[0] / ha**2 - a0 - 6.0 * v0 / ha
        else:
            lower[row] = 2.0 / ha
            diagonal[row] += 4.0 / ha
            rhs[row] += 6.0 * delta[i - 1] / ha**2
        if i == count - 2:
            diagonal[row] += 6.0 / hb
            rhs[row] += 12.0 * delta[i] / hb**2
        else:
            upper[row] = 2.0 / hb
            diagonal[row] += 4.0 / hb
            rhs[row] += 6.0 * delta[i] / hb**2
    velocities[1:-1] = _solve_tridiagonal(lower, diagonal, upper, rhs)
    accelerations[1:-1] = _start_accelerations(h, delta, velocities)
    return velocities, accelerations


def _start_accelerations(h: np.ndarray, delta: np.ndarray, velocities: np.ndarray) -> np.ndarray:
    """Acceleration at the start of segments ``1 .. K - 2`` of :func:`spline_knots`' spline."""
    hb = h[1:, None]
    start = 6.0 * delta[1:] / hb**2 - (4.0 * velocities[1:-1] + 2.0 * velocities[2:]) / hb
    last = 12.0 * delta[-1] / h[-1] ** 2 - 6.0 * velocities[-2] / h[-1]  # quartic to rest
    start[-1] = last
    return start


@dataclass(frozen=True)
class BoundedKnots:
    """Outcome of :func:`bound_knots`.

    Attributes:
        velocities: the knot velocities whose curve stays within the position limits, or None.
        accelerations: the knot accelerations, or None.
        changed: number of knots moved towards rest for the position limits.
        reason: why the curve cannot stay within them; empty when it can.
        extremes: the exact extremes of the bounded curve's segments (None when refused).

    """

    velocities: np.ndarray | None
    accelerations: np.ndarray | None
    changed: int = 0
    reason: str = ''
    extremes: SegmentExtremes | None = None


def bound_knots(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray,
    accelerations: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    passes: int = 8,
) -> BoundedKnots:
    """Slow interior knots towards rest until the quintic curve stays within the position limits.

    The first knot (the hand-over) and the last (rest) are kept. A segment whose exact position
    range (core/motion/spline_segments.py) leaves ``[lower, upper]`` (or, for a segment with an end
    outside, a start being brought into them, the range of its ends) has the velocity and
    acceleration of its interior end knots halved, for ``passes`` rounds, then set to zero: a
    segment between two knots at rest never leaves the range of its ends. Only a first segment
    that leaves the limits from the hand-over state itself is refused.
    """
    positions = np.asarray(positions, dtype=np.float64)
    velocities = np.asarray(velocities, dtype=np.float64).copy()
    accelerations = np.asarray(accelerations, dtype=np.float64).copy()
    original = velocities.copy(), accelerations.copy()
    if len(positions) < 2:
        return BoundedKnots(velocities, accelerations, extremes=segment_extremes(times, positions))
    allowed_low = np.minimum(np.minimum(lower, positions[:-1]), positions[1:])
    allowed_high = np.maximum(np.maximum(upper, positions[:-1]), positions[1:])
    slack = _POSITION_SLACK * np.maximum(1.0, np.abs(allowed_high - allowed_low))
    interior = np.zeros(positions.shape, dtype=bool)
    interior[1:-1] = True
    for round_ in range(passes + 2):
        extremes = segment_extremes(times, positions, velocities, accelerations)
        below = allowed_low - slack - extremes.lowest
        above = extremes.highest - allowed_high - slack
        out = (below > 0) | (above > 0)
        if not np.any(out):
            changed = (velocities != original[0]) | (accelerations != original[1])
            count = int(np.count_nonzero(changed))
            return BoundedKnots(velocities, accelerations, count, extremes=extremes)
        if round_ == passes + 1:
            break
        move = np.zeros(positions.shape, dtype=bool)
        move[:-1] |= out
        move[1:] |= out
        move &= interior
        factor = 0.5 if round_ < passes else 0.0
        velocities = np.where(move, factor * velocities, velocities)
        accelerations = np.where(move, factor * accelerations, accelerations)
    excess = np.maximum(below, above)
    segment, joint = np.unravel_index(int(np.argmax(excess)), excess.shape)
    return BoundedKnots(
        None,
        None,
        reason=f'joint {joint} would leave its position limits by '
        f'{excess[segment, joint] * 1e3:.2f} mrad on segment {segment} (moving '
        f'{velocities[segment, joint]:+.3f} rad/s at its start)',
    )


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
        max_jerk: largest jerk of each arm joint on the curve, rad/s^3, or None.
        lead: seconds between a chunk's arrival (or a hold's start) and its hand-over point
            (the trajectory must reach the controller before then).
        hold_time: shortest duration of a hold, seconds.
        max_stretch: how much slower than the policy's timing a segment of a chunk may be
            played to respect the limits (core/motion/time_scaling.py); a chunk that needs more is
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
