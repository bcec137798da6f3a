# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Time scaling: the curve the controller follows stays within the joint limits; rows never move.

What joint_trajectory_controller commands at 1 kHz from the node's plans
(core/control/command_check.py) is checked as a Franka checks it: acceleration and jerk by finite
differences, hand-overs, holds and braking included.
"""

import dataclasses

import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.control.command_check import (
    CommandLimits,
    CommandMonitor,
    differences,
    jtc_command,
)
from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.motion.braking import braking_hold
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, smooth_plan
from dreamzero_ros.core.motion.safety import SafetyLimits
from dreamzero_ros.core.motion.spline_segments import segment_extremes
from dreamzero_ros.core.motion.time_scaling import scale_time
from dreamzero_ros.core.motion.trajectory import MotionConfig
from dreamzero_ros.replay.handover import ChunkArrival, timed_command_plans

DT = 1 / 15
LOOP = build_settings({'engine.checkpoint': 'c'}).loop  # the Panda defaults
MOTION = LOOP.motion
ARM = 7
#: Panda "ready" pose.
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def zigzag_rows(seed, steps=24, size=0.1):
    """Rows a noisy policy gives: up to ``size`` rad per 15 Hz step, alternating."""
    rng = np.random.default_rng(seed)
    deltas = rng.uniform(0.3, 1.0, (steps, ARM)) * size * (-1.0) ** np.arange(steps)[:, None]
    return np.cumsum(deltas, axis=0) + rng.uniform(-0.5, 0.5, ARM)


def monitor(loop=LOOP, positions=True):
    """A Franka's checks with the loop's limits (its position limits unless not ``positions``)."""
    limits = CommandLimits.of_loop(loop)
    if not positions:
        limits = dataclasses.replace(limits, lower=None, upper=None)
    return CommandMonitor(limits)


@pytest.mark.parametrize('seed', range(6))
def test_the_scaled_curve_is_within_the_limits_along_the_spline_and_rows_are_kept(seed):
    rows = zigzag_rows(seed)
    times = 10.0 + DT * np.arange(len(rows))
    start, bend = np.full(ARM, 0.3), np.full(ARM, 2.0)
    lower, upper = LOOP.limits.lower[:ARM], LOOP.limits.upper[:ARM]
    # without acceleration limits the policy's timing needs far more than the Panda gives
    loose = MotionConfig(max_stretch=4.0)
    unscaled = scale_time(times, rows, start, bend, lower - 5, upper + 5, loose)
    extremes = segment_extremes(unscaled.times, rows, unscaled.velocities, unscaled.accelerations)
    assert np.any(extremes.acceleration > 3 * MOTION.max_acceleration)
    scaled = scale_time(times, rows, start, bend, lower - 5, upper + 5, MOTION)
    assert scaled.times is not None, scaled.reason
    assert scaled.times[0] == times[0] and np.all(np.diff(scaled.times) >= np.diff(times) - 1e-12)
    extremes = segment_extremes(scaled.times, rows, scaled.velocities, scaled.accelerations)
    assert np.all(extremes.speed <= MOTION.max_velocity * (1 + 1e-6))
    assert np.all(extremes.acceleration <= MOTION.max_acceleration * (1 + 1e-6))
    assert np.all(extremes.jerk <= MOTION.max_jerk * (1 + 1e-6))
    np.testing.assert_array_equal(scaled.velocities[0], start)  # the hand-over's velocity
    np.testing.assert_array_equal(scaled.accelerations[0], bend)  # and acceleration
    np.testing.assert_array_equal(scaled.velocities[-1], 0.0)  # ends at rest
    np.testing.assert_array_equal(scaled.accelerations[-1], 0.0)
    assert 1.0 < scaled.stretch <= MOTION.max_stretch
    # the 1 kHz samples JTC takes of it pass a Franka's checks
    plan = ActionPlan(scaled.times, rows, scaled.velocities, scaled.accelerations)
    check = monitor(positions=False)  # these rows lie outside the Panda's
    check.feed(plan.positions_at(np.arange(scaled.times[0], scaled.times[-1] + 0.01, 1e-3)))
    assert check.violations == {}, check.first


def test_smooth_plan_never_moves_a_row_and_keeps_the_gripper():
    rows = np.column_stack([zigzag_rows(7, size=0.05), np.linspace(0, 1, 24)])
    times = DT * np.arange(24)
    smoothed = smooth_plan(
        times, rows, np.zeros(8), np.zeros(8), LOOP.limits.lower, LOOP.limits.upper, MOTION
    )
    np.testing.assert_array_equal(smoothed.plan.rows, rows)
    np.testing.assert_array_equal(smoothed.plan.velocities[:, ARM], 0.0)
    np.testing.assert_array_equal(smoothed.plan.accelerations[:, ARM], 0.0)


def test_a_chunk_that_needs_more_than_max_stretch_is_refused():
    rows = zigzag_rows(1, size=0.3)
    times = DT * np.arange(len(rows))
    tight = MotionConfig(max_stretch=1.5, max_acceleration=np.array(MOTION.max_acceleration))
    zero = np.zeros(ARM)
    refused = scale_time(times, rows, zero, zero, rows.min() - 1, rows.max() + 1, tight)
    assert refused.times is None and 'exceeds max_acceleration' in refused.reason


def _records(seed, count=8, period=0.4, amplitude=0.4, center=None):
    """Chunks of a policy that moves and disagrees with itself, arriving 0.2-0.6 s late."""
    rng = np.random.default_rng(seed)
    center = np.array([0.0, 0.0, 0.0, -1.5, 0.0, 0.0, 0.0]) if center is None else center
    out = []
    for k in range(count):
        stamp = 1.0 + period * k
        steps = stamp + DT * np.arange(24)
        actions = np.zeros((24, 8))
        actions[:, :ARM] = amplitude * np.sin(2.0 * steps[:, None] + np.arange(ARM))
        actions[:, :ARM] += center + rng.normal(0, 0.03, (24, ARM))
        actions[:, ARM] = 0.5
        out.append(
            ChunkArrival(stamp, stamp, float(rng.uniform(0.2, 0.6)), DT, actions, actions[0])
        )
    return out


@pytest.mark.parametrize('seed', range(3))
def test_what_jtc_commands_at_1khz_across_hand_overs_is_within_the_limits(seed):
    """The node's plans at DROID timing through JTC, received anywhere in the lead."""
    timed = timed_command_plans(_records(seed, count=10, period=0.6), LOOP)
    assert len(timed) == 10
    for delay in (0.0, 0.5 * MOTION.lead, MOTION.lead):
        command = jtc_command(timed, ARM, delay)
        check = monitor()
        check.feed(command.positions)
        assert check.violations == {}, (delay, check.first)
        # continuous acceleration at every hand-over: no jump beyond rounding
        assert command.jumps.shape == (9, ARM) and command.jumps.max() < 1e-6, delay
        _, acceleration, jerk = differences(command.positions)
        assert np.all(np.abs(jerk).max(axis=0) <= MOTION.max_jerk)
        assert np.abs(acceleration).max() > 1.0  # it does move
    # JTC's default (closed loop: a Franka has no acceleration state) and open loop alike
    open_loop = jtc_command(timed, ARM, 0.01, interpolate_from_desired_state=True)
    np.testing.assert_allclose(open_loop.positions, jtc_command(timed, ARM, 0.01).positions)


def test_a_hold_brakes_within_the_limits_whenever_it_is_received_in_the_lead():
    timed = timed_command_plans(_records(3, count=3, period=0.6), LOOP)
    arrival, plan = timed[-1]
    now = arrival + 0.3  # moving fast
    assert np.abs(plan.velocity_at(now)[:ARM]).max() > 0.3
    lower, upper = LOOP.limits.lower, LOOP.limits.upper
    hold = braking_hold(plan, now, lower, upper, MOTION)
    np.testing.assert_allclose(hold.velocity_at(hold.end_time), 0.0, atol=1e-9)
    for delay in np.linspace(0.0, MOTION.lead, 5):
        command = jtc_command([*timed, (now, hold)], ARM, delay)
        check = monitor()
        check.feed(command.positions)
        assert check.violations == {}, (delay, check.first)
        assert command.jumps.max() < 1e-6
        # the arm comes to rest where the hold says
        np.testing.assert_allclose(command.positions[-1], hold.rows[-1, :ARM], atol=1e-12)


def test_a_stronger_braking_than_the_limits_allow_is_lengthened():
    timed = timed_command_plans(_records(3, count=3, period=0.6), LOOP)
    _, plan = timed[-1]
    now = timed[-1][0] + 0.3
    hard = dataclasses.replace(MOTION, stop_deceleration=np.asarray(MOTION.max_acceleration))
    gentle = braking_hold(plan, now, LOOP.limits.lower, LOOP.limits.upper, MOTION)
    strong = braking_hold(plan, now, LOOP.limits.lower, LOOP.limits.upper, hard)
    assert strong.end_time < gentle.end_time
    extremes = segment_extremes(
        strong.times,
        strong.rows[:, :ARM],
        strong.velocities[:, :ARM],
        strong.accelerations[:, :ARM],
    )
    assert np.all(extremes.acceleration <= MOTION.max_acceleration * (1 + 1e-9))
    assert np.all(extremes.jerk <= MOTION.max_jerk * (1 + 1e-9))


@pytest.mark.parametrize('seed', range(4))
def test_with_tight_position_limits_the_evaluated_spline_never_leaves_them(seed):
    """Each joint limited to +-0.5 rad around the ready pose; the policy pushes against it."""
    lower = np.append(READY - 0.5, 0.0)
    upper = np.append(READY + 0.5, 1.0)
    limits = dataclasses.replace(LOOP.limits, lower=lower, upper=upper)
    loop = dataclasses.replace(LOOP, limits=limits)
    records = _records(seed, count=12, period=0.5, amplitude=0.7, center=READY)
    # the arm starts inside them
    records = [record._replace(state=np.append(READY, 0.5)) for record in records]
    timed = timed_command_plans(records, loop)
    assert len(timed) >= 10
    for _, plan in timed:  # every plan, its lead-in points included
        extremes = segment_extremes(
            plan.times, plan.rows[:, :ARM], plan.velocities[:, :ARM], plan.accelerations[:, :ARM]
        )
        assert np.all(extremes.lowest >= lower[:ARM] - 1e-9), (
            extremes.lowest.min(axis=0) - lower[:ARM]
        )
        assert np.all(extremes.highest <= upper[:ARM] + 1e-9), (
            extremes.highest.max(axis=0) - upper[:ARM]
        )
    command = jtc_command(timed, ARM, 0.002)
    check = monitor(loop)
    check.feed(command.positions)
    assert check.violations == {}, check.first


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


def test_the_loop_with_panda_limits_commands_nothing_a_franka_refuses():
    """Chunks, a refusal hold and a stale-input hold through the ROS-free loop, then JTC."""
    from test_core_control_loop import feed

    from dreamzero_ros.core.control.control_loop import ControlLoop
    from dreamzero_ros.core.observations.observation_cache import CacheConfig, ObservationCache
    from dreamzero_ros.policy_types import ActionChunk

    cache = ObservationCache(CacheConfig(tuple(f'j{i}' for i in range(ARM)), 'g', max_age=0.5))
    limits = SafetyLimits(np.full(8, -3.0), np.full(8, 3.0), np.full(8, 0.3))
    panda = LoopConfig(limits, LOOP.blend, motion=MOTION)
    loop = ControlLoop(cache, panda)
    sent = []
    rng = np.random.default_rng(5)
    for k in range(8):
        now = 10.0 + 0.6 * k
        feed(cache, now)
        query = loop.poll(now).query
        actions = np.full((24, 8), 0.5)
        actions[:, :ARM] = 0.3 * np.sin(2.0 * (now + DT * np.arange(24))[:, None] + np.arange(ARM))
        actions[:, :ARM] += rng.normal(0, 0.03, (24, ARM))
        if k == 5:
            actions[:, 0] = np.nan  # refused: the node holds
        arrival = now + 0.3
        outcome = loop.on_chunk(query, ActionChunk(actions, query.observation.stamp, DT), arrival)
        if outcome.plan is not None:
            sent.append((arrival, outcome.plan))
    assert loop.counters.chunks_refused == 1 and loop.counters.holds >= 1
    command = jtc_command(sent, ARM, 0.005)
    check = monitor(panda)
    check.feed(command.positions)
    assert check.violations == {}, check.first
    assert command.jumps.max() < 1e-6


def test_holds_near_tight_position_limits_stay_inside_them():
    """Where braking at once would overshoot a limit, the hold follows the plan in force first."""
    from dreamzero_ros.core.motion.braking import braking_from

    lower = np.append(READY - 0.5, 0.0)
    upper = np.append(READY + 0.5, 1.0)
    loop = dataclasses.replace(
        LOOP, limits=dataclasses.replace(LOOP.limits, lower=lower, upper=upper)
    )
    records = _records(1, count=12, period=0.5, amplitude=0.7, center=READY)
    records = [record._replace(state=np.append(READY, 0.5)) for record in records]
    followed = 0
    for arrival, plan in timed_command_plans(records, loop):
        for now in arrival + np.linspace(0.0, 0.5, 11):
            _, within = braking_from(plan, now + MOTION.lead, lower, upper, MOTION)
            hold = braking_hold(plan, now, lower, upper, MOTION)
            followed += not within
            extremes = segment_extremes(
                hold.times,
                hold.rows[:, :ARM],
                hold.velocities[:, :ARM],
                hold.accelerations[:, :ARM],
            )
            assert np.all(extremes.lowest >= lower[:ARM] - 1e-9)
            assert np.all(extremes.highest <= upper[:ARM] + 1e-9)
            assert np.all(extremes.acceleration <= MOTION.max_acceleration * (1 + 1e-9))
            assert np.all(extremes.jerk <= MOTION.max_jerk * (1 + 1e-9))
            np.testing.assert_allclose(hold.velocities[-1], 0.0, atol=1e-12)
    assert followed, 'no hold needed the plan in force: the test shows nothing'
