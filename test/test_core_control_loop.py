# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of the node's ROS-free decision logic: queries, merging, holds, resets."""

from types import SimpleNamespace

import numpy as np
import pytest

from dreamzero_ros.core.control.control_loop import ControlLoop, LoopConfig
from dreamzero_ros.core.control.latency_stats import LatencyStats
from dreamzero_ros.core.motion.chunk_scheduler import BlendConfig
from dreamzero_ros.core.motion.safety import SafetyLimits
from dreamzero_ros.core.observations.observation_cache import CacheConfig, ObservationCache
from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk

ARM = tuple(f'j{i}' for i in range(7))
DT = 1 / 15


def make_loop(delta_mode='clamp', max_delta=0.5, min_replan_period=0.0, **limit_options):
    cache = ObservationCache(CacheConfig(ARM, 'g', max_age=0.5, max_skew=0.2))
    options = dict(lower=np.full(8, -3.0), upper=np.full(8, 3.0))
    options.update(limit_options)
    limits = SafetyLimits(max_step_delta=np.full(8, max_delta), delta_mode=delta_mode, **options)
    loop = ControlLoop(
        cache, LoopConfig(limits, BlendConfig(2, 12), min_replan_period), prompt='pick'
    )
    return loop, cache


def feed(cache, stamp, joints=0.0):
    for camera in DROID_CAMERAS:
        cache.add_image(camera, np.zeros((4, 4, 3), np.uint8), stamp)
    arm = list(joints) if np.ndim(joints) else [joints] * 7
    cache.add_joint_state([*ARM, 'g'], [*arm, 0.5], stamp)


def chunk_for(query, value=0.1, horizon=24):
    actions = np.full((horizon, 8), value, dtype=np.float32)
    actions[:, 7] = 0.5  # the gripper stays where feed() puts it
    return ActionChunk(actions, stamp=query.observation.stamp, step_duration=DT)


def querying_loop(**options):
    """A loop (:func:`make_loop` with ``options``), its cache and its first query (fed at 1.0)."""
    loop, cache = make_loop(**options)
    feed(cache, 1.0)
    return loop, cache, loop.poll(1.0).query


def playing_loop():
    """A loop (and its cache) playing the answer to its first query since 1.1."""
    loop, cache, query = querying_loop()
    loop.on_chunk(query, chunk_for(query, 0.2), 1.1)
    return loop, cache


def test_one_query_in_flight_then_plan():
    loop, cache = make_loop()
    feed(cache, 1.0)
    first = loop.poll(1.0)
    assert first.query is not None and first.query.observation.prompt == 'pick'
    assert loop.poll(1.05).query is None  # one in flight
    outcome = loop.on_chunk(first.query, chunk_for(first.query), now=1.3)
    # rows before now + lead (1.35 s) are past: the hand-over row is the 7th (1.4 s)
    assert outcome.discarded == '' and outcome.dropped_steps == 6
    assert outcome.plan.times[0] == pytest.approx(1.0 + 6 * DT)
    np.testing.assert_allclose(loop.command_at(2.0)[:7], 0.1)
    assert loop.latency.last == pytest.approx(0.3)
    feed(cache, 1.3)
    assert loop.poll(1.31).query is not None


def test_min_replan_period_spaces_queries():
    loop, cache, query = querying_loop(min_replan_period=0.5)
    loop.on_chunk(query, chunk_for(query), 1.1)
    feed(cache, 1.2)
    assert loop.poll(1.2).query is None
    assert loop.poll(1.5).query is not None


def test_an_answered_observation_is_not_sent_again_until_new_input_or_a_new_generation():
    loop, cache, query = querying_loop()
    loop.on_chunk(query, chunk_for(query), 1.1)
    assert loop.poll(1.2).query is None and loop.poll(1.2).refusal is None
    cache.add_joint_state([*ARM, 'g'], [0.0] * 7 + [0.5], 1.2)  # newer joints: a new input
    query = loop.poll(1.25).query
    assert query.observation.stamp == 1.2
    loop.on_chunk(query, chunk_for(query), 1.28)
    assert loop.poll(1.29).query is None
    loop.set_prompt('place', 1.3)  # a new generation asks again about the same input
    assert loop.poll(1.3).query.observation.prompt == 'place'


def test_stale_input_holds_once_and_discards_the_answer():
    loop, cache = playing_loop()
    feed(cache, 1.1)
    query = loop.poll(1.1).query
    result = loop.poll(1.7)  # inputs 0.6 s old
    assert result.refusal.reason.value == 'stale'
    held = loop.command_at(1.7)
    np.testing.assert_allclose(result.hold.rows[0], held)
    np.testing.assert_allclose(result.hold.velocities[-1], 0.0)
    stop = loop.command_at(5.0)
    assert loop.poll(1.8).hold is None  # already holding
    outcome = loop.on_chunk(query, chunk_for(query, 0.9), 1.9)
    assert outcome.plan is None and 'input went bad' in outcome.discarded
    np.testing.assert_allclose(loop.command_at(5.0), stop)
    # the hold brakes what was still moving towards 0.2 and stops there (a smooth braking
    # from the decelerating motion: within micro-radians of where the plan would have)
    assert np.all((held[:7] <= stop[:7] + 1e-12) & (stop[:7] <= 0.2 + 1e-5))
    assert loop.counters.holds == 1


def test_holding_ends_with_the_next_good_chunk():
    loop, cache = playing_loop()
    loop.poll(2.0)
    assert loop.holding
    feed(cache, 2.1)
    query = loop.poll(2.1).query
    outcome = loop.on_chunk(query, chunk_for(query, 0.3), 2.2)
    assert outcome.plan is not None and loop.holding == ''


def test_reset_discards_answers_to_earlier_queries():
    loop, cache, query = querying_loop()
    loop.reset(1.05, session_id='episode-2')
    outcome = loop.on_chunk(query, chunk_for(query), 1.1)
    assert outcome.plan is None and 'reset' in outcome.discarded
    feed(cache, 1.1)
    assert loop.poll(1.1).query.observation.session_id == 'episode-2'


def test_prompt_change_discards_and_new_queries_carry_the_prompt():
    loop, cache, query = querying_loop()
    assert loop.set_prompt('pick', 1.0) is None  # unchanged prompt: nothing happens
    loop.set_prompt('place', 1.02)
    assert loop.on_chunk(query, chunk_for(query), 1.1).plan is None
    feed(cache, 1.1)
    assert loop.poll(1.1).query.observation.prompt == 'place'


def test_pause_brakes_discards_the_answer_in_flight_and_stops_querying_until_resumed():
    loop, cache = playing_loop()
    feed(cache, 1.1)
    in_flight = loop.poll(1.1).query
    hold = loop.pause(1.2, 'task canceled')
    assert hold is not None and loop.paused == 'task canceled'
    np.testing.assert_allclose(hold.velocity_at(hold.end_time), 0.0, atol=1e-12)
    assert loop.pause(1.25, 'again') is None  # already holding: nothing new to send
    outcome = loop.on_chunk(in_flight, chunk_for(in_flight, 0.3), 1.3)
    assert outcome.plan is None and 'paused' in outcome.discarded
    feed(cache, 1.4)
    assert loop.poll(1.4).query is None and loop.poll(1.5).refusal is None
    loop.resume()
    assert loop.paused == '' and loop.poll(1.5).query is not None


def test_late_chunk_is_counted_and_not_used():
    loop, cache, query = querying_loop()
    outcome = loop.on_chunk(query, chunk_for(query, horizon=3), 1.5)
    assert outcome.plan is None and outcome.discarded.startswith('late')
    assert loop.counters.chunks_late == 1 and loop.counters.steps_dropped == 3


def test_first_chunk_is_rate_limited_from_the_measured_joints():
    loop, cache = make_loop(max_delta=0.05)
    feed(cache, 1.0, joints=0.0)
    query = loop.poll(1.0).query
    outcome = loop.on_chunk(query, chunk_for(query, 1.0), 1.0)
    # the plan starts at rest on the measured joints, then moves 0.05 per step
    np.testing.assert_allclose(outcome.plan.rows[:3, 0], [0.0, 0.05, 0.10])
    np.testing.assert_allclose(outcome.plan.velocities[0], 0.0)
    assert outcome.verdict.delta_clamps > 0


PANDA_LOWER = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973, 0.0]
PANDA_UPPER = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973, 1.0]


@pytest.mark.parametrize('mode', ['approach', 'hold'])
def test_measured_joint_outside_limits_never_jumps_to_the_limit(mode):
    # Joint 4 measured at +0.40 rad, above its upper limit -0.0698: the first command may not
    # jump 0.47 rad onto the limit; it moves there at max_step_delta per step, or holds.
    loop, cache = make_loop(
        max_delta=0.1,
        lower=np.array(PANDA_LOWER),
        upper=np.array(PANDA_UPPER),
        outside_limits=mode,
    )
    measured = np.array([0.0, 0.0, 0.0, 0.40, 0.0, 1.5, 0.0])
    feed(cache, 1.0, joints=measured)
    query = loop.poll(1.0).query
    chunk = chunk_for(query)
    chunk.actions[:, :7] = np.clip(measured, PANDA_LOWER[:7], PANDA_UPPER[:7])
    outcome = loop.on_chunk(query, chunk, 1.0)
    if mode == 'hold':
        assert outcome.discarded.startswith('safety refused chunk: joint 3 starts at +0.4000')
        assert loop.command_at(1.5) is None and loop.counters.chunks_outside_limits == 1
        return
    rows = outcome.plan.rows  # the first row is the hand-over point: the measured joints
    steps = np.abs(np.diff(np.vstack([[*measured, 0.5], rows]), axis=0))
    assert np.all(steps <= 0.1 + 1e-9)
    np.testing.assert_allclose(rows[:6, 3], [0.40, 0.30, 0.20, 0.10, 0.0, -0.0698], atol=1e-12)
    assert loop.counters.chunks_outside_limits == 1


def test_safety_refusal_holds():
    loop, cache, query = querying_loop(delta_mode='refuse', max_delta=0.05)
    outcome = loop.on_chunk(query, chunk_for(query, 0.01), 1.0)
    assert outcome.plan is not None
    feed(cache, 1.1)
    query = loop.poll(1.1).query
    outcome = loop.on_chunk(query, chunk_for(query, 2.0), 1.2)
    assert 'safety refused' in outcome.discarded and loop.counters.chunks_refused == 1
    np.testing.assert_allclose(outcome.plan.rows[0], loop.command_at(1.2))


def test_malformed_chunk_is_discarded():
    loop, cache, query = querying_loop()
    bad = ActionChunk(np.zeros((24, 7), np.float32), stamp=1.0)
    assert 'expected (H, 8)' in loop.on_chunk(query, bad, 1.1).discarded


def test_policy_error_is_recorded_and_frees_the_slot():
    loop, cache, query = querying_loop()
    loop.on_error(query, RuntimeError('boom'), 1.1)
    assert 'boom' in loop.last_error and not loop.in_flight


def test_forget_plan_restarts_from_measurement():
    loop, cache, query = querying_loop()
    loop.on_chunk(query, chunk_for(query), 1.0)
    loop.forget_plan()
    assert loop.command_at(1.5) is None


def test_latency_stats_percentiles_and_rate():
    stats = LatencyStats(window=4)
    assert np.isnan(stats.p50) and stats.rate(1.0) == 0.0
    for i, latency in enumerate([0.1, 0.2, 0.3, 0.4, 0.5]):
        stats.record(latency, now=float(i))
    assert stats.p50 == pytest.approx(0.35) and stats.count == 5
    assert stats.p95 == pytest.approx(0.485)
    assert stats.rate(4.0) == pytest.approx(1.0)
    assert stats.rate(7.0) == pytest.approx(0.5)


def moving_chunk(query, offset=0.0, speed=0.9, horizon=24):
    steps = query.observation.stamp + DT * np.arange(horizon)
    actions = np.zeros((horizon, 8), np.float32)
    actions[:, :7] = (offset + speed * (steps - 1.0))[:, None] * np.linspace(0.5, 1.0, 7)
    actions[:, 7] = 0.5
    return ActionChunk(actions, stamp=query.observation.stamp, step_duration=DT)


def test_hand_over_is_continuous_in_position_and_velocity():
    loop, cache, query = querying_loop()
    old = loop.on_chunk(query, moving_chunk(query), 1.2).plan
    feed(cache, 1.4, joints=0.3)
    query = loop.poll(1.4).query
    new = loop.on_chunk(query, moving_chunk(query, offset=0.2), 1.9).plan
    handover = new.handover_time
    assert handover >= 1.9 + loop.config.motion.lead
    first = int(np.searchsorted(new.times, handover))
    np.testing.assert_allclose(new.rows[first], old.position_at(handover), atol=1e-12)
    np.testing.assert_allclose(new.velocities[first, :7], old.velocity_at(handover)[:7], atol=1e-12)
    assert np.abs(new.velocities[first, :7]).max() > 0.3  # it was moving at the hand-over
    # the points before the hand-over (the lead-in) repeat the old plan from the arrival on:
    # its state then and its knots after it
    assert first >= 2 and new.start_time == 1.9 and new.times[1] in old.times
    for time, row, velocity in zip(new.times[:first], new.rows, new.velocities, strict=False):
        np.testing.assert_allclose(row, old.position_at(time), atol=1e-12)
        np.testing.assert_allclose(velocity, old.velocity_at(time), atol=1e-12)
    np.testing.assert_allclose(new.velocities[-1], 0.0)  # controllers need the end at rest


def _moving_loop():
    loop, cache = make_loop(max_delta=0.01)
    feed(cache, 100.0)
    query = loop.poll(100.0).query
    loop.on_chunk(query, chunk_for(query, 1.0), 100.0)  # moves 0.01 per step from 0
    feed(cache, 100.5)
    in_flight = loop.poll(100.5).query
    return loop, cache, in_flight


def test_clock_jump_back_clears_inputs_holds_and_resumes_in_the_new_timeline():
    loop, cache, in_flight = _moving_loop()
    before = loop.command_at(100.6)
    hold = loop.on_time_jump(100.6, 70.6)
    # held where the robot was commanded just before the jump, not at the plan's start
    np.testing.assert_allclose(hold.rows[0], before)
    np.testing.assert_allclose(loop.command_at(75.0), before)
    assert loop.counters.time_jumps == 1 and 'clock jumped -30.000 s' in loop.holding
    late = loop.on_chunk(in_flight, chunk_for(in_flight), 70.7)
    assert late.plan is None and 'session reset' in late.discarded
    assert loop.poll(70.7).refusal.reason.value == 'missing'  # old-timeline inputs forgotten
    feed(cache, 70.8)
    query = loop.poll(70.8).query
    assert query is not None and query.observation.stamp == 70.8
    outcome = loop.on_chunk(query, chunk_for(query, 1.0), 70.8)
    # the new plan starts from the held command: no jump either
    assert np.all(np.abs(outcome.plan.rows[0] - before) <= 0.01 + 1e-9)


def test_poll_sees_a_clock_that_went_back():
    loop, cache, _ = _moving_loop()
    loop.poll(100.6)
    result = loop.poll(90.0)
    assert result.time_jump and result.hold is not None and loop.counters.time_jumps == 1
    assert not loop.poll(90.05).time_jump  # small steps forward are ordinary time
    assert not loop.poll(90.0).time_jump  # a step back within max_skew is no jump


def test_frame_that_fails_to_decode_when_queried_holds():
    loop, cache, in_flight = _moving_loop()
    loop.on_chunk(in_flight, chunk_for(in_flight, 1.0), 100.5)
    stamp = SimpleNamespace(sec=100, nanosec=600_000_000)
    broken = SimpleNamespace(header=SimpleNamespace(stamp=stamp), format='png', data=b'\x89PNG!')
    cache.add_image_message(DROID_CAMERAS[1], broken)
    result = loop.poll(100.6)
    assert result.refusal.reason.value == 'bad_image' and result.hold is not None
    assert result.query is None
