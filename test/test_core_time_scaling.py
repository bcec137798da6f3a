# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Time scaling: the curve the controller follows stays within the joint limits; rows never move."""

from types import SimpleNamespace

import numpy as np
import pytest

from dreamzero_ros.core.chunk_scheduler import smooth_plan
from dreamzero_ros.core.jtc import Point, Trajectory, TrajectoryFollower
from dreamzero_ros.core.node_config import build_settings
from dreamzero_ros.core.time_scaling import cubic_extremes, jtc_curve_extremes, scale_time
from dreamzero_ros.core.trajectory import MotionConfig
from dreamzero_ros.replay.handover import command_plans

DT = 1 / 15
LOOP = build_settings({'engine.checkpoint': 'c'}).loop  # the Panda defaults
MOTION = LOOP.motion
ARM = 7


def zigzag_rows(seed, steps=24, size=0.1):
    """Rows a noisy policy gives: up to ``size`` rad per 15 Hz step, alternating."""
    rng = np.random.default_rng(seed)
    deltas = rng.uniform(0.3, 1.0, (steps, ARM)) * size * (-1.0) ** np.arange(steps)[:, None]
    return np.cumsum(deltas, axis=0) + rng.uniform(-0.5, 0.5, ARM)


def sampled(times, rows, velocities, per_segment=200):
    """Velocity and acceleration sampled finely along the JTC curve through the knots."""
    return jtc_curve_extremes(
        (rows[0], velocities[0]), times[0], times, rows, velocities, per_segment
    )


@pytest.mark.parametrize('seed', range(6))
def test_the_scaled_curve_is_within_the_limits_along_the_spline_and_rows_are_kept(seed):
    rows = zigzag_rows(seed)
    times = 10.0 + DT * np.arange(len(rows))
    start = np.full(ARM, 0.3)
    lower, upper = LOOP.limits.lower[:ARM], LOOP.limits.upper[:ARM]
    # without acceleration limits the policy's timing needs far more than the Panda gives
    unscaled = scale_time(times, rows, start, lower - 5, upper + 5, MotionConfig(max_stretch=4.0))
    _, acceleration = sampled(unscaled.times, rows, unscaled.velocities)
    assert np.any(acceleration > 3 * MOTION.max_acceleration)
    scaled = scale_time(times, rows, start, lower - 5, upper + 5, MOTION)
    assert scaled.times is not None, scaled.reason
    assert scaled.times[0] == times[0] and np.all(np.diff(scaled.times) >= np.diff(times) - 1e-12)
    speed, acceleration = sampled(scaled.times, rows, scaled.velocities)
    assert np.all(speed <= MOTION.max_velocity * (1 + 1e-6))
    assert np.all(acceleration <= MOTION.max_acceleration * (1 + 1e-6))
    _, _, jerk = cubic_extremes(scaled.times, rows, scaled.velocities)
    assert np.all(jerk <= MOTION.max_jerk * (1 + 1e-6))
    np.testing.assert_array_equal(scaled.velocities[0], start)  # the hand-over velocity
    np.testing.assert_array_equal(scaled.velocities[-1], 0.0)  # ends at rest
    assert 1.0 < scaled.stretch <= MOTION.max_stretch


def test_smooth_plan_never_moves_a_row_and_keeps_the_gripper():
    rows = np.column_stack([zigzag_rows(7, size=0.05), np.linspace(0, 1, 24)])
    times = DT * np.arange(24)
    smoothed = smooth_plan(times, rows, np.zeros(8), LOOP.limits.lower, LOOP.limits.upper, MOTION)
    np.testing.assert_array_equal(smoothed.plan.rows, rows)
    np.testing.assert_array_equal(smoothed.plan.velocities[:, ARM], 0.0)


def test_a_chunk_that_needs_more_than_max_stretch_is_refused():
    rows = zigzag_rows(1, size=0.3)
    times = DT * np.arange(len(rows))
    tight = MotionConfig(max_stretch=1.5, max_acceleration=np.array(MOTION.max_acceleration))
    refused = scale_time(times, rows, np.zeros(ARM), rows.min() - 1, rows.max() + 1, tight)
    assert refused.times is None and 'exceeds max_acceleration' in refused.reason


def _records(seed, count=8):
    """Chunks of a policy that moves and disagrees with itself, arriving 0.2-0.6 s late."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        stamp = 1.0 + 0.4 * k
        steps = stamp + DT * np.arange(24)
        actions = np.zeros((24, 8))
        actions[:, :ARM] = 0.4 * np.sin(2.0 * steps[:, None] + np.arange(ARM)) + rng.normal(
            0, 0.03, (24, ARM)
        )
        actions[:, 3] -= 1.5  # panda_joint4 lives below zero
        actions[:, ARM] = 0.5
        out.append(
            SimpleNamespace(
                query_time=stamp,
                stamp=stamp,
                latency_s=float(rng.uniform(0.2, 0.6)),
                step_duration=DT,
                actions=actions,
                state=actions[0],
            )
        )
    return out


@pytest.mark.parametrize('seed', range(3))
def test_what_jtc_follows_across_hand_overs_is_within_the_limits(seed):
    """The node's plans through JTC's own interpolation, each received somewhere in the lead."""
    records = _records(seed)
    plans = command_plans(records, LOOP)
    assert len(plans) == len(records)
    arm = TrajectoryFollower(tuple(f'j{i}' for i in range(ARM)), plans[0].rows[0, :ARM])
    worst_speed, worst_acceleration = np.zeros(ARM), np.zeros(ARM)
    for record, plan, following in zip(records, plans, [*plans[1:], None], strict=True):
        now = record.query_time + record.latency_s
        # the worst-case receipt: anywhere between the chunk's arrival and the lead's end
        for received in np.linspace(now, now + MOTION.lead, 4):
            speed, acceleration = jtc_curve_extremes(
                _state_at(plans, plan, received),
                received,
                plan.times,
                plan.rows[:, :ARM],
                plan.velocities[:, :ARM],
                100,
            )
            worst_speed = np.maximum(worst_speed, speed)
            worst_acceleration = np.maximum(worst_acceleration, acceleration)
        end = following.handover_time if following is not None else plan.end_time
        trajectory = Trajectory(
            0.0,
            arm.joints,
            tuple(
                Point(t, tuple(p[:ARM]), tuple(v[:ARM]))
                for t, p, v in zip(plan.times, plan.rows, plan.velocities, strict=True)
            ),
        )
        arm.accept(trajectory, now)
        for t in np.arange(now, end, 0.002):
            arm.update(t)
            worst_acceleration = np.maximum(worst_acceleration, np.abs(arm.acceleration))
            worst_speed = np.maximum(worst_speed, np.abs(arm.velocity))
    assert np.all(worst_speed <= MOTION.max_velocity * (1 + 1e-6)), worst_speed
    assert np.all(worst_acceleration <= MOTION.max_acceleration * (1 + 1e-6)), worst_acceleration


def _state_at(plans, plan, time):
    """The command in force at ``time`` (the plan before ``plan``) as (positions, velocities)."""
    index = plans.index(plan)
    before = plans[index - 1] if index else plan
    return before.position_at(time)[:ARM], before.velocity_at(time)[:ARM]


def test_a_hold_brakes_within_the_limits_whenever_it_is_received_in_the_lead():
    from dreamzero_ros.core.chunk_scheduler import ActionPlan, braking_hold

    # at rest until 1.0, then moving: a hold made at 0.98 reaches the controller while it moves
    times = np.array([1.0, 1.0 + DT, 1.0 + 2 * DT])
    rows = np.array([[0.0] * 8, [0.02] * 8, [0.06] * 8])
    velocities = np.array([[0.0] * 8, [0.5] * 8, [0.0] * 8])
    velocities[:, ARM] = 0.0
    plan = ActionPlan(times, rows, velocities)
    lower, upper = np.full(8, -3.0), np.full(8, 3.0)
    short = braking_hold(plan, 0.98, lower, upper, MotionConfig(lead=0.1))  # no acc. limit
    assert short.end_time - short.start_time == pytest.approx(MotionConfig().hold_time)
    limit = np.array(MOTION.max_acceleration) / 4
    motion = MotionConfig(lead=0.1, max_acceleration=limit, stop_deceleration=limit / 2)
    hold = braking_hold(plan, 0.98, lower, upper, motion)
    duration, stop = hold.end_time - hold.start_time, hold.rows[-1, :ARM]
    assert duration > short.end_time - short.start_time
    for received in np.linspace(0.98, 0.98 + motion.lead, 11):
        state = plan.position_at(received)[:ARM], plan.velocity_at(received)[:ARM]
        _, acceleration = jtc_curve_extremes(
            state, received, np.array([received + duration]), stop[None], np.zeros((1, ARM))
        )
        assert np.all(acceleration <= motion.max_acceleration * (1 + 1e-6))


def test_after_a_hold_the_next_chunk_takes_over_once_the_hold_has_settled():
    from test_core_control_loop import chunk_for, feed, make_loop

    loop, cache = make_loop(max_delta=0.01)
    feed(cache, 100.0)
    query = loop.poll(100.0).query
    loop.on_chunk(query, chunk_for(query, 1.0), 100.0)  # moving
    hold = loop.hold(100.3, 'test')
    assert hold.end_time > 100.3
    feed(cache, 100.35)
    query = loop.poll(100.35).query
    plan = loop.on_chunk(query, chunk_for(query, 1.0), 100.35).plan
    assert plan.handover_time >= hold.end_time + loop.config.motion.lead - 1e-9
    # until then the plan repeats the hold
    for t in np.linspace(100.35, plan.handover_time, 7):
        np.testing.assert_allclose(plan.position_at(t), hold.position_at(t), atol=1e-12)
