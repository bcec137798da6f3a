# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Trajectory math: JTC interpolation, spline knot velocities, safety bounds, braking holds."""

import numpy as np
import pytest

from dreamzero_ros.core.chunk_scheduler import ActionPlan, braking_hold, smooth_plan
from dreamzero_ros.core.trajectory import (
    MotionConfig,
    bound_velocities,
    braking_stop,
    interpolate,
    sample_knots,
    segment_peak_speed,
    spline_velocities,
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


@pytest.mark.parametrize('degree', ['cubic', 'quintic'])
def test_jtc_interpolation_meets_both_points(degree):
    rng = np.random.default_rng(0)
    p0, v0, a0, p1, v1, a1 = rng.normal(size=(6, 3))
    if degree == 'cubic':
        a0 = a1 = None
    start, end = (p0, v0, a0), (p1, v1, a1)
    for elapsed, (p, v, a) in ((0.0, start), (0.3, end)):
        position, velocity, acceleration = interpolate(0.3, start, end, elapsed)
        np.testing.assert_allclose(position, p, atol=1e-12)
        np.testing.assert_allclose(velocity, v, atol=1e-9)
        if a is not None:
            np.testing.assert_allclose(acceleration, a, atol=1e-7)


def test_jtc_interpolation_is_linear_without_velocities_and_outside_the_segment():
    p0, p1 = np.zeros(2), np.array([1.0, -2.0])
    position, velocity, _ = interpolate(2.0, (p0, None, None), (p1, None, None), 0.5)
    np.testing.assert_allclose(position, [0.25, -0.5])
    np.testing.assert_allclose(velocity, [0.5, -1.0])
    # past the end JTC clamps the time and uses the linear form even with velocities
    position, velocity, _ = interpolate(2.0, (p0, p0, None), (p1, p0, None), 3.0)
    np.testing.assert_allclose(position, p1)
    np.testing.assert_allclose(velocity, [0.5, -1.0])


def test_knot_sampling_is_the_cubic_jtc_draws():
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.uniform(0.05, 0.1, 6))
    positions, velocities = rng.normal(size=(2, 6, 2))
    for t in np.linspace(times[0], times[-1], 37)[1:-1]:
        i = int(np.searchsorted(times, t, side='right')) - 1
        expected = interpolate(
            times[i + 1] - times[i],
            (positions[i], velocities[i], None),
            (positions[i + 1], velocities[i + 1], None),
            t - times[i],
        )
        position, velocity = sample_knots(times, positions, velocities, np.array([t]))
        np.testing.assert_allclose(position[0], expected[0], atol=1e-12)
        np.testing.assert_allclose(velocity[0], expected[1], atol=1e-9)


def test_spline_reproduces_a_cubic_and_is_c2():
    times = np.linspace(0.0, 1.0, 9)
    curve = np.stack([times**3 - times, 2 * times**2], axis=1)
    slope = np.stack([3 * times**2 - 1, 4 * times], axis=1)
    velocities = spline_velocities(times, curve, slope[0], slope[-1])
    np.testing.assert_allclose(velocities, slope, atol=1e-12)


def test_spline_acceleration_is_continuous_and_ends_at_rest():
    rng = np.random.default_rng(2)
    times = DT * np.arange(12)
    positions = np.cumsum(rng.normal(0, 0.02, (12, 3)), axis=0)
    start = np.array([0.3, -0.2, 0.1])
    velocities = spline_velocities(times, positions, start)
    np.testing.assert_allclose(velocities[0], start)
    np.testing.assert_allclose(velocities[-1], 0.0)
    for i in range(1, 11):
        left = interpolate(
            DT,
            (positions[i - 1], velocities[i - 1], None),
            (positions[i], velocities[i], None),
            DT,
        )
        right = interpolate(
            DT, (positions[i], velocities[i], None), (positions[i + 1], velocities[i + 1], None), 0
        )
        np.testing.assert_allclose(left[2], right[2], atol=1e-8)


def test_peak_speed_is_exact():
    rng = np.random.default_rng(3)
    times = np.cumsum(rng.uniform(0.05, 0.2, 8))
    positions, velocities = rng.normal(size=(2, 8, 3))
    sampled = np.abs(sample_knots(times, positions, velocities, dense(times, 4000))[1])
    peaks = segment_peak_speed(times, positions, velocities)
    assert peaks.max(axis=0) == pytest.approx(sampled.max(axis=0), rel=1e-5)


def test_bounded_curve_stays_inside_position_limits_at_the_limit():
    times = DT * np.arange(6)
    positions = np.array([[0.0], [0.05], [0.1], [0.1], [0.05], [0.0]])  # touches upper = 0.1
    velocities = spline_velocities(times, positions, np.array([0.5]))
    raw = sample_knots(times, positions, velocities, dense(times))[0]
    assert raw.max() > 0.1  # the plain spline overshoots the limit
    bounded = bound_velocities(times, positions, velocities, -1.0, 0.1, np.array([5.0]))
    curve = sample_knots(times, positions, bounded.velocities, dense(times))[0]
    assert curve.max() <= 0.1 + 1e-12 and bounded.changed > 0
    assert bounded.velocities[0, 0] == 0.5 and bounded.velocities[-1, 0] == 0.0


def test_bounded_curve_respects_the_speed_limit_and_keeps_the_ends():
    rng = np.random.default_rng(4)
    times = DT * np.arange(24)
    steps = np.clip(rng.normal(0, 0.08, (23, 7)), -0.1, 0.1)  # rate-limited rows
    positions = np.vstack([np.zeros(7), np.cumsum(steps, axis=0)])
    limit = np.array([2.175] * 4 + [2.61] * 3)  # the Panda's; from rest 0.1 rad/step needs 2.0
    velocities = spline_velocities(times, positions, np.zeros(7))
    bounded = bound_velocities(times, positions, velocities, -10.0, 10.0, limit)
    assert bounded.velocities is not None, bounded.reason
    speed = np.abs(sample_knots(times, positions, bounded.velocities, dense(times))[1])
    assert np.all(speed <= limit + 1e-9)
    np.testing.assert_allclose(bounded.velocities[[0, -1]], 0.0)


def test_a_reversal_faster_than_the_limit_is_refused():
    times = DT * np.arange(3)
    positions = np.array([[0.0], [0.1], [0.2]])  # 1.5 rad/s forward
    velocities = spline_velocities(times, positions, np.array([-2.0]))  # moving backward at 2
    bounded = bound_velocities(times, positions, velocities, -1.0, 1.0, np.array([2.0]))
    assert bounded.velocities is None and 'max_velocity' in bounded.reason


def test_braking_stop_is_a_constant_deceleration_inside_the_limits():
    velocity = np.array([1.0, -0.5, 0.0])
    duration, stop = braking_stop(np.zeros(3), velocity, -1.0, 1.0, np.array([2.0, 2.0, 2.0]), 0.1)
    assert duration == pytest.approx(0.5)
    np.testing.assert_allclose(stop, [0.25, -0.125, 0.0])
    for t in (0.0, 0.2, 0.5):
        _, v, a = interpolate(duration, (np.zeros(3), velocity, None), (stop, 0 * stop, None), t)
        np.testing.assert_allclose(a, -velocity / duration, atol=1e-9)
        np.testing.assert_allclose(v, velocity * (1 - t / duration), atol=1e-9)
    _, stop = braking_stop(np.array([0.95]), np.array([1.0]), -1.0, 1.0, np.array([1.0]), 0.1)
    assert stop[0] == 1.0


def test_braking_hold_stops_a_moving_plan_and_keeps_the_gripper():
    motion = MotionConfig(max_velocity=np.full(2, 3.0), stop_deceleration=np.full(2, 4.0))
    times = DT * np.arange(5)
    rows = np.column_stack([0.1 * np.arange(5), -0.1 * np.arange(5), np.full(5, 0.7)])
    plan = smooth_plan(times, rows, np.array([1.5, -1.5, 0]), -5.0, 5.0, motion).plan
    hold = braking_hold(plan, 0.1, np.full(3, -5.0), np.full(3, 5.0), motion)
    np.testing.assert_allclose(hold.rows[0], plan.position_at(0.1))
    np.testing.assert_allclose(hold.velocities[0, :2], plan.velocity_at(0.1)[:2])
    np.testing.assert_allclose(hold.velocities[-1], 0.0)
    assert hold.rows[-1, 2] == pytest.approx(0.7)
    assert hold.end_time - hold.start_time == pytest.approx(np.abs(hold.velocities[0]).max() / 4)


def test_smooth_plan_holds_the_gripper_column_between_rows():
    motion = MotionConfig(max_velocity=np.full(1, 3.0), stop_deceleration=np.full(1, 4.0))
    times = DT * np.arange(3)
    rows = np.array([[0.0, 0.0], [0.05, 1.0], [0.1, 1.0]])
    plan = smooth_plan(times, rows, np.zeros(2), -1.0, 1.0, motion).plan
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
    smoothed = smooth_plan(times, rows, np.zeros(2), -5.0, 5.0, motion)
    assert smoothed.stretch > 1.5 and smoothed.plan.start_time == 0.0
    np.testing.assert_allclose(smoothed.plan.rows, rows)
    position, velocity = sample_knots(
        smoothed.plan.times, rows, smoothed.plan.velocities, dense(smoothed.plan.times)
    )
    assert np.abs(velocity).max() <= 1.0 + 1e-9 and position.max() <= 0.7 + 1e-12
    refused = smooth_plan(
        times, 10 * rows, np.zeros(2), -50.0, 50.0, MotionConfig(np.array([1.0]), np.array([4.0]))
    )
    assert refused.plan is None and 'slower' in refused.reason
