# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Trajectory math: JTC interpolation, the C2 spline's knots, position bounds, braking holds."""

import numpy as np
import pytest

from dreamzero_ros.core.motion.braking import braking_curve, braking_hold
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, smooth_plan
from dreamzero_ros.core.motion.spline_segments import segment_extremes
from dreamzero_ros.core.motion.trajectory import (
    MotionConfig,
    bound_knots,
    sample_knots,
    spline_knots,
)

DT = 1 / 15


def dense(times, per_segment=200):
    return np.concatenate(
        [
            np.linspace(a, b, per_segment, endpoint=False)
            for a, b in zip(times[:-1], times[1:], strict=True)
        ]
        + [times[-1:]]
    )


def jtc_interpolate(
    duration: float,
    start: tuple[np.ndarray, np.ndarray | None, np.ndarray | None],
    end: tuple[np.ndarray, np.ndarray | None, np.ndarray | None],
    elapsed: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """JTC's ``interpolate_between_points``, transcribed: the reference the spline code meets.

    (positions, velocities, accelerations) at ``elapsed``.

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


@pytest.mark.parametrize('degree', ['cubic', 'quintic'])
def test_a_segment_meets_both_points(degree):
    rng = np.random.default_rng(0)
    positions, velocities, accelerations = rng.normal(size=(3, 2, 3))
    if degree == 'cubic':
        accelerations = None
    times = np.array([1.0, 1.3])
    p, v, a = sample_knots(times, positions, velocities, accelerations, times)
    np.testing.assert_allclose(p, positions, atol=1e-12)
    np.testing.assert_allclose(v, velocities, atol=1e-9)
    if accelerations is not None:
        np.testing.assert_allclose(a, accelerations, atol=1e-7)


def test_positions_only_are_linear_and_the_ends_hold_at_rest():
    times, positions = np.array([0.0, 2.0]), np.array([[0.0, 0.0], [1.0, -2.0]])
    p, v, a = sample_knots(times, positions, None, None, np.array([0.5, 3.0]))
    np.testing.assert_allclose(p, [[0.25, -0.5], [1.0, -2.0]])
    np.testing.assert_allclose(v, [[0.5, -1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(a, 0.0)


@pytest.mark.parametrize('degree', ['cubic', 'quintic'])
def test_knot_sampling_is_what_jtc_draws(degree):
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.uniform(0.05, 0.1, 6))
    positions, velocities, accelerations = rng.normal(size=(3, 6, 2))
    if degree == 'cubic':
        accelerations = None
    for t in np.linspace(times[0], times[-1], 37)[1:-1]:
        i = int(np.searchsorted(times, t, side='right')) - 1
        pick = lambda k: None if accelerations is None else accelerations[k]  # noqa: E731
        expected = jtc_interpolate(
            times[i + 1] - times[i],
            (positions[i], velocities[i], pick(i)),
            (positions[i + 1], velocities[i + 1], pick(i + 1)),
            t - times[i],
        )
        sampled = sample_knots(times, positions, velocities, accelerations, np.array([t]))
        for got, want, tolerance in zip(sampled, expected, (1e-12, 1e-9, 1e-6), strict=True):
            np.testing.assert_allclose(got[0], want, atol=tolerance)


def test_spline_starts_as_the_motion_in_force_is_c2_and_ends_at_rest():
    rng = np.random.default_rng(2)
    for count in (2, 3, 4, 12):
        times = np.cumsum(rng.uniform(0.04, 0.1, count))
        positions = np.cumsum(rng.normal(0, 0.02, (count, 3)), axis=0)
        start, bend = np.array([0.3, -0.2, 0.1]), np.array([2.0, -1.0, 0.5])
        velocities, accelerations = spline_knots(times, positions, start, bend)
        np.testing.assert_array_equal(velocities[0], start)
        np.testing.assert_array_equal(accelerations[0], bend)
        np.testing.assert_array_equal(velocities[-1], 0.0)  # JTC needs the end at rest,
        np.testing.assert_array_equal(accelerations[-1], 0.0)  # a Franka too
        for i in range(1, count - 1):  # the acceleration meets at every knot
            left = jtc_interpolate(
                times[i] - times[i - 1],
                (positions[i - 1], velocities[i - 1], accelerations[i - 1]),
                (positions[i], velocities[i], accelerations[i]),
                times[i] - times[i - 1],
            )
            right = jtc_interpolate(
                times[i + 1] - times[i],
                (positions[i], velocities[i], accelerations[i]),
                (positions[i + 1], velocities[i + 1], accelerations[i + 1]),
                0.0,
            )
            np.testing.assert_allclose(left[2], right[2], atol=1e-6)
        if count > 3:  # inside, the quintics JTC draws are the spline's cubics (linear a)
            middle = np.linspace(times[1] + 1e-3, times[2] - 1e-3, 5)
            acceleration = sample_knots(times, positions, velocities, accelerations, middle)[2]
            np.testing.assert_allclose(np.diff(acceleration, 2, axis=0), 0.0, atol=1e-6)


def test_segment_extremes_are_exact():
    rng = np.random.default_rng(3)
    times = np.cumsum(rng.uniform(0.05, 0.2, 8))
    positions, velocities, accelerations = rng.normal(size=(3, 8, 3))
    p, v, a = sample_knots(times, positions, velocities, accelerations, dense(times, 4000))
    extremes = segment_extremes(times, positions, velocities, accelerations)
    assert extremes.speed.max(axis=0) == pytest.approx(np.abs(v).max(axis=0), rel=1e-5)
    assert extremes.acceleration.max(axis=0) == pytest.approx(np.abs(a).max(axis=0), rel=1e-4)
    assert extremes.highest.max(axis=0) == pytest.approx(p.max(axis=0), rel=1e-7)
    assert extremes.lowest.min(axis=0) == pytest.approx(p.min(axis=0), rel=1e-7)


def test_bounded_curve_stays_inside_position_limits_at_the_limit():
    times = DT * np.arange(6)
    positions = np.array([[0.0], [0.05], [0.1], [0.1], [0.05], [0.0]])  # touches upper = 0.1
    velocities, accelerations = spline_knots(times, positions, np.array([0.5]), np.zeros(1))
    raw = sample_knots(times, positions, velocities, accelerations, dense(times))[0]
    assert raw.max() > 0.1  # the plain spline overshoots the limit
    bounded = bound_knots(times, positions, velocities, accelerations, -1.0, 0.1)
    curve = sample_knots(times, positions, bounded.velocities, bounded.accelerations, dense(times))
    assert curve[0].max() <= 0.1 + 1e-12 and bounded.changed > 0
    assert bounded.velocities[0, 0] == 0.5 and bounded.velocities[-1, 0] == 0.0


def test_a_hand_over_that_must_leave_the_limits_is_refused():
    times = DT * np.arange(3)
    positions = np.array([[0.09], [0.1], [0.05]])
    # moving up at 3 rad/s 0.01 rad below the limit: no curve through these knots stays inside
    velocities, accelerations = spline_knots(times, positions, np.array([3.0]), np.zeros(1))
    bounded = bound_knots(times, positions, velocities, accelerations, -1.0, 0.1)
    assert bounded.velocities is None and 'position limits' in bounded.reason


def test_braking_is_smooth_within_the_limits_and_inside():
    motion = MotionConfig(
        max_velocity=np.full(3, 2.0),
        stop_deceleration=np.full(3, 2.0),
        max_acceleration=np.full(3, 4.0),
        max_jerk=np.full(3, 100.0),
    )
    position, velocity, acceleration = (
        np.zeros(3),
        np.array([1.0, -0.5, 0.0]),
        np.array([3.0, 0, 0]),
    )
    braking = braking_curve(position, velocity, acceleration, -1.0, 1.0, motion)
    assert braking.within_limits
    times = np.array([0.0, braking.duration])
    rows, speeds, changes = (np.stack([x, 0 * x]) for x in (position, velocity, acceleration))
    rows[1] = braking.stop
    extremes = segment_extremes(times, rows, speeds, changes)
    assert np.all(extremes.acceleration <= 4.0 * (1 + 1e-9))
    assert np.all(extremes.jerk <= 100.0 * (1 + 1e-9))
    p, v, a = sample_knots(times, rows, speeds, changes, np.array([0.0, braking.duration]))
    np.testing.assert_allclose(a[0], acceleration)  # continuous with the motion braked
    np.testing.assert_allclose(v[1], 0.0, atol=1e-12)  # to rest
    np.testing.assert_allclose(a[1], 0.0, atol=1e-9)
    # 0.95 rad, moving up at 1 rad/s: the stop is clipped onto the limit and the curve found
    # that stays inside (a longer braking would overshoot it)
    near = braking_curve(np.array([0.95]), np.array([1.0]), np.zeros(1), -1.0, 1.0, _one(motion))
    assert near.stop[0] <= 1.0


def _one(motion):
    return MotionConfig(
        max_velocity=motion.max_velocity[:1],
        stop_deceleration=motion.stop_deceleration[:1] * 4,
        max_acceleration=motion.max_acceleration[:1] * 4,
        max_jerk=motion.max_jerk[:1] * 10,
    )


def test_braking_hold_follows_the_plan_through_the_lead_then_stops_and_keeps_the_gripper():
    motion = MotionConfig(max_velocity=np.full(2, 3.0), stop_deceleration=np.full(2, 4.0))
    times = DT * np.arange(5)
    rows = np.column_stack([0.1 * np.arange(5), -0.1 * np.arange(5), np.full(5, 0.7)])
    plan = smooth_plan(times, rows, np.array([1.5, -1.5, 0]), np.zeros(3), -5.0, 5.0, motion).plan
    hold = braking_hold(plan, 0.1, np.full(3, -5.0), np.full(3, 5.0), motion)
    assert hold.start_time == 0.1
    lead = np.linspace(0.1, 0.1 + motion.lead, 7)
    for mine, theirs in zip(hold.states_at(lead), plan.states_at(lead), strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)  # the plan in force until then
    np.testing.assert_allclose(hold.velocities[-1], 0.0)
    np.testing.assert_allclose(hold.accelerations[-1], 0.0)
    assert hold.rows[-1, 2] == pytest.approx(0.7)


def test_smooth_plan_holds_the_gripper_column_between_rows():
    motion = MotionConfig(max_velocity=np.full(1, 3.0), stop_deceleration=np.full(1, 4.0))
    times = DT * np.arange(3)
    rows = np.array([[0.0, 0.0], [0.05, 1.0], [0.1, 1.0]])
    plan = smooth_plan(times, rows, np.zeros(2), np.zeros(2), -1.0, 1.0, motion).plan
    np.testing.assert_allclose(plan.velocities[:, 1], 0.0)
    gripper = plan.positions_at(dense(times))[:, 1]
    assert gripper.min() >= 0.0 and gripper.max() <= 1.0


def test_plan_velocity_is_zero_outside_its_rows():
    plan = ActionPlan(np.array([1.0, 2.0]), np.array([[0.0], [1.0]]), np.array([[1.0], [0.0]]))
    assert plan.velocity_at(0.5)[0] == 0.0 and plan.velocity_at(3.0)[0] == 0.0
    assert plan.velocity_at(1.0 + 1e-9)[0] == pytest.approx(1.0, abs=1e-6)


def test_rows_too_fast_for_the_speed_limit_are_played_slower():
    motion = MotionConfig(max_velocity=np.array([1.0]), stop_deceleration=np.array([4.0]))
    times = DT * np.arange(8)
    rows = np.column_stack([0.1 * np.arange(8), np.zeros(8)])  # 1.5 rad/s wanted
    smoothed = smooth_plan(times, rows, np.zeros(2), np.zeros(2), -5.0, 5.0, motion)
    assert smoothed.stretch > 1.5 and smoothed.plan.start_time == 0.0
    np.testing.assert_allclose(smoothed.plan.rows, rows)
    position, velocity, _ = smoothed.plan.states_at(dense(smoothed.plan.times))
    assert np.abs(velocity).max() <= 1.0 + 1e-9 and position.max() <= 0.7 + 1e-12
    refused = smooth_plan(
        times,
        10 * rows,
        np.zeros(2),
        np.zeros(2),
        -50.0,
        50.0,
        MotionConfig(np.array([1.0]), np.array([4.0])),
    )
    assert refused.plan is None and 'slower' in refused.reason
