# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Cartesian envelope with the packaged Panda URDF through pinocchio: FK, cut, refusals."""

import dataclasses
from importlib import resources

import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, smooth_plan
from dreamzero_ros.core.motion.envelope import Envelope, EnvelopeConfig
from dreamzero_ros.core.motion.trajectory import MotionConfig
from dreamzero_ros.core.robot.kinematics import LinkPoints
from dreamzero_ros.core.robot.panda import PANDA_LOWER, PANDA_UPPER

URDF = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
ARM = tuple(f'panda_joint{i}' for i in range(1, 8))
#: Franka's "ready" pose; libfranka gives its end effector (hand TCP) at x 0.307, z 0.487 m.
READY = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])
LOWER, UPPER = np.array(PANDA_LOWER), np.array(PANDA_UPPER)
MOTION = MotionConfig()


def test_forward_kinematics_of_known_panda_poses():
    points = LinkPoints(URDF, ARM, ['panda_link8', 'panda_hand_tcp'], frame='panda_link0')
    # zero pose: the flange 0.088 m out and 0.333 + 0.316 + 0.384 - 0.107 = 0.926 m up
    np.testing.assert_allclose(points.positions(np.zeros(7))[0, 0], [0.088, 0.0, 0.926], atol=1e-9)
    tcp = points.positions(READY)[0, 1]
    np.testing.assert_allclose(tcp, [0.307, 0.0, 0.487], atol=5e-4)
    # joint 1 turns everything about the vertical axis
    turned = READY.copy()
    turned[0] = np.pi / 2
    np.testing.assert_allclose(points.positions(turned)[0, 1], [0.0, 0.307, 0.487], atol=5e-4)


def test_arm_joint_order_and_fingertip_offsets():
    reordered = LinkPoints(URDF, ARM[::-1], ['panda_hand_tcp'])
    direct = LinkPoints(URDF, ARM, ['panda_hand_tcp'])
    np.testing.assert_allclose(reordered.positions(READY[::-1]), direct.positions(READY))
    # pointing down, the fingertips (finger link + 0.045 m) are level with the TCP, 4 cm aside
    tips = LinkPoints(URDF, ARM, EnvelopeConfig().links, EnvelopeConfig().offsets, 'panda_link0')
    left, right = tips.positions(READY)[0, 1:]
    assert left[2] == pytest.approx(0.487, abs=5e-4) == right[2]
    assert abs(left[1] - right[1]) == pytest.approx(0.08, abs=1e-6)  # the hand open


def test_speed_bound_bounds_every_point_motion():
    points = LinkPoints(URDF, ARM, EnvelopeConfig().links, EnvelopeConfig().offsets)
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = rng.uniform(LOWER[:7], UPPER[:7])
        step = rng.normal(size=7) * 1e-4
        moved = np.linalg.norm(points.positions(q + step) - points.positions(q), axis=-1).max()
        assert moved <= points.speed_bound(step) * (1 + 1e-6) + 1e-12


@pytest.mark.parametrize(
    ('urdf', 'joints', 'links', 'frame', 'message'),
    [
        ('<robot name="x"><link', ARM, ['panda_link8'], '', 'does not parse'),
        (URDF, (*ARM[:6], 'elbow'), ['panda_link8'], '', "no joint 'elbow'"),
        (URDF, ARM, ['panda_tool'], '', "no link 'panda_tool'"),
        (URDF, ARM, ['panda_link8'], 'table', "no link 'table'"),
        (URDF, ARM, ['panda_link8'], 'panda_link3', 'moves with the arm joints'),
        (URDF, (*ARM, 'panda_finger_joint1'), ['panda_link8'], '', 'only bounded revolute'),
    ],
)
def test_description_refusals(urdf, joints, links, frame, message):
    with pytest.raises(ValueError, match=message):
        LinkPoints(urdf, joints, links, frame=frame)


@pytest.mark.parametrize(
    ('values', 'message'),
    [
        ({'envelope.keep_out': [0.0, 0.0, 0.0, 1.0, 1.0]}, '6 values per box'),
        ({'envelope.keep_out': [0.0, 0.0, 0.0, 1.0, -1.0, 1.0]}, 'keep_out box 0 needs min < max'),
        ({'envelope.workspace_min': [1.0, -1.0, -0.5]}, 'must lie below workspace_max'),
        ({'envelope.workspace_max': [1.0, 1.0]}, 'need 3 finite values'),
        ({'envelope.link_offsets': [0.0, 0.0]}, '3 finite values per link'),
        ({'envelope.links': []}, 'distinct and non-empty'),
        ({'envelope.table_height': 1.6}, 'leaves no room'),
    ],
)
def test_bad_envelope_parameters_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        build_settings(values)


def _plan_toward_table(shoulder=1.0, start=1.7e9):
    """24 rows at 15 Hz from the ready pose lowering the hand (joint 2 forward), smoothed.

    Stamped like a node's plan (seconds since 1970: float spacing 2.4e-7 s).
    """
    times = start + np.arange(24) / 15
    target = READY.copy()
    target[1] += shoulder
    ramp = np.minimum(1.0, (times - start) / 1.2)[:, None]
    rows = np.hstack([READY + (target - READY) * ramp, np.zeros((24, 1))])
    return smooth_plan(times, rows, np.zeros(8), np.zeros(8), LOWER, UPPER, MOTION).plan


def _dense(plan, start, end, count=3000):
    times = np.linspace(start, end, count)
    return times, plan.positions_at(times)


def test_plan_inside_is_kept_unchanged():
    envelope = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.0))
    plan = _plan_toward_table()
    cut = envelope.cut(plan, LOWER, UPPER, MOTION, chunk_id=7)
    assert cut.violation is None and cut.plan is plan and cut.samples >= len(plan.times)


def test_a_dip_between_two_waypoints_is_caught():
    # both knots at the ready pose (fingertips 0.487 m up); the cubic between them swings the
    # shoulder forward 0.25 rad (the fingertips down to 0.406 m) and back
    velocity = np.zeros((2, 8))
    velocity[0, 1], velocity[1, 1] = 1.0, -1.0
    plan = ActionPlan(np.array([0.0, 1.0]), np.tile(np.append(READY, 0.0), (2, 1)), velocity)
    envelope = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.42))
    knots = envelope.points.positions(plan.rows[:, :7])
    assert envelope.slack(knots).min() > 0.05  # a check at the waypoints sees nothing
    cut = envelope.cut(plan, LOWER, UPPER, MOTION)
    assert cut.violation is not None and 0.0 < cut.violation.time < 0.5 and cut.hold_inside
    _, executed = _dense(cut.plan, 0.0, cut.plan.end_time + 0.5)
    assert envelope.points.positions(executed[:, :7])[..., 2].min() > 0.42


def test_cut_before_the_table_then_braking_hold_within_limits():
    envelope = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.3))
    plan = _plan_toward_table()
    points = envelope.points
    # the original plan goes below the table: the cut must not be a no-op
    _, original = _dense(plan, plan.start_time, plan.end_time)
    assert points.positions(original[:, :7])[..., 2].min() < 0.3
    cut = envelope.cut(plan, LOWER, UPPER, MOTION, chunk_id=3)
    violation = cut.violation
    assert violation is not None and violation.chunk_id == 3 and violation.bound.startswith('table')
    assert violation.link in EnvelopeConfig().links and 'chunk 3' in str(violation)
    assert cut.hold_inside and plan.start_time < cut.cut_time < violation.time
    held = cut.plan
    # nothing of the plan beyond the cut: every knot up to the cut, then the stop
    assert np.all(held.times[:-1] <= cut.cut_time + 1e-12)
    assert held.end_time < violation.time + MOTION.hold_time + 1.0
    # the same curve up to the cut (no jump), then braking to rest
    times, before = _dense(held, plan.start_time, cut.cut_time)
    np.testing.assert_allclose(before, plan.positions_at(times), atol=1e-12)
    np.testing.assert_allclose(held.velocity_at(cut.cut_time), plan.velocity_at(cut.cut_time))
    np.testing.assert_allclose(held.velocities[-1], 0.0)
    times, after = _dense(held, cut.cut_time, held.end_time + 0.5)
    assert np.all((after >= LOWER - 1e-9) & (after <= UPPER + 1e-9))
    steps = np.abs(np.diff(after[:, :7], axis=0)).max()
    assert steps < MOTION.max_velocity.max() * (times[1] - times[0]) * 1.01
    # the whole executed curve stays above the table, fingertips included
    _, executed = _dense(held, held.start_time, held.end_time + 0.5, 6000)
    assert points.positions(executed[:, :7])[..., 2].min() > 0.3


def test_start_outside_brakes_from_the_start():
    envelope = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.6))
    plan = _plan_toward_table()
    cut = envelope.cut(plan, LOWER, UPPER, MOTION)
    assert cut.violation.time == plan.start_time and not cut.hold_inside
    assert cut.cut_time == plan.start_time and len(cut.plan.times) == 2
    np.testing.assert_allclose(cut.plan.rows[0], plan.rows[0])


def test_workspace_and_keep_out_bounds_are_named():
    plan = _plan_toward_table()
    narrow = EnvelopeConfig(workspace_max=(0.32, 1.0, 1.5))
    cut = Envelope.from_description(URDF, ARM, narrow).cut(plan, LOWER, UPPER, MOTION)
    assert cut.violation.bound == 'workspace x max'
    box = EnvelopeConfig(keep_out=(((0.2, -0.5, 0.0), (0.5, 0.5, 0.38)),))
    cut = Envelope.from_description(URDF, ARM, box).cut(plan, LOWER, UPPER, MOTION)
    assert cut.violation.bound == 'keep_out 0' and cut.violation.position[2] < 0.40


def test_a_hold_plan_is_checked_too():
    envelope = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.0))
    hold = ActionPlan.hold(np.append(READY, 0.0), 5.0)
    assert envelope.cut(hold, LOWER, UPPER, MOTION).violation is None


def test_control_loop_cuts_a_chunk_towards_the_table_and_reports_it():
    from dreamzero_ros.core.control.control_loop import ControlLoop
    from dreamzero_ros.core.control.status_report import build_report
    from dreamzero_ros.core.observations.observation_cache import ObservationCache
    from dreamzero_ros.demo_policy import TowardTheTable
    from dreamzero_ros.policy_types import DROID_CAMERAS

    settings = build_settings(
        {'gripper_joint_name': 'g', 'envelope.enabled': True, 'envelope.table_height': 0.3}
    )
    envelope = Envelope.from_description(URDF, ARM, settings.envelope_config)
    cache = ObservationCache(settings.cache)
    loop = ControlLoop(cache, settings.loop, envelope=envelope)
    stamp = 1.7e9
    for camera in DROID_CAMERAS:
        cache.add_image(camera, np.zeros((4, 4, 3), np.uint8), stamp)
    cache.add_joint_state([*ARM, 'g'], [*READY, 0.0], stamp)
    query = loop.poll(stamp).query
    chunk = dataclasses.replace(TowardTheTable().infer(query.observation), chunk_id=5)
    # 50 ms later: two rows already past, the hand-over blends from the measured pose
    outcome = loop.on_chunk(query, chunk, now=stamp + 0.05)
    assert outcome.discarded == '' and outcome.envelope is not None
    assert outcome.envelope.chunk_id == 5 and outcome.plan is loop.plan
    # the arm goes most of the way down before braking (not a hold where it stands)
    assert loop.plan.rows[-1, 1] > READY[1] + 0.3, loop.plan.rows[:, 1]
    assert loop.plan.end_time < outcome.envelope.time + 1.0 and loop.holding.startswith('envelope')
    _, executed = _dense(loop.plan, loop.plan.start_time, loop.plan.end_time + 0.5)
    assert envelope.points.positions(executed[:, :7])[..., 2].min() > 0.3
    report = build_report(
        loop, stamp + 1, lifecycle_state='active', engine_state='ready', enabled=True, dry_run=False
    )
    assert report.value('envelope_cuts') == '1' and 'chunk 5' in report.value('last_envelope')


def test_the_task_reports_envelope_cuts():
    from dreamzero_ros.core.control.task_runner import (
        ENVELOPE_HOLD,
        EXECUTING,
        CommandState,
        TaskRunner,
    )

    runner = TaskRunner(2.0)
    runner.start('goal', 'wipe the table', 0.0, CommandState(True, True, False), 0.0)
    assert runner.chunk_executed(1.0, 'chunk 2: panda_leftfinger crosses table').state == (
        ENVELOPE_HOLD
    )
    assert runner.chunk_executed(2.0).state == EXECUTING
    result = runner.cancel(3.0)
    assert '1 chunk(s) cut at the safety envelope, last: chunk 2: panda_leftfinger' in (
        result.message
    )


def test_random_plans_never_leave_the_envelope_between_samples():
    config = EnvelopeConfig(
        table_height=0.25,
        workspace_min=(-0.2, -0.5, -0.5),
        workspace_max=(0.8, 0.5, 1.0),
        keep_out=(((0.35, 0.1, 0.2), (0.6, 0.4, 0.5)),),
    )
    envelope = Envelope.from_description(URDF, ARM, config)
    rng = np.random.default_rng(1)
    kept = cut_inside = 0
    for _ in range(40):
        times = 1.7e9 + np.arange(24) / 15
        walk = np.cumsum(rng.normal(scale=0.06, size=(24, 7)), axis=0)
        rows = np.hstack([READY + walk - walk[0], np.zeros((24, 1))])
        plan = smooth_plan(times, rows, np.zeros(8), np.zeros(8), LOWER, UPPER, MOTION).plan
        if plan is None:
            continue
        cut = envelope.cut(plan, LOWER, UPPER, MOTION)
        _, dense = _dense(cut.plan, cut.plan.start_time, cut.plan.end_time, 4000)
        slack = envelope.slack(envelope.points.positions(dense[:, :7])).min()
        if cut.violation is None:
            kept += 1
            assert slack >= 0.0
        elif cut.hold_inside:
            cut_inside += 1
            assert slack >= 0.0
    assert kept >= 5 and cut_inside >= 5, (kept, cut_inside)


def test_two_arms_one_envelope_either_hand_towards_the_table_is_cut():
    """A bimanual description: the envelope's links lie on both arms, over all 12 arm joints."""
    from description_support import bimanual_panda_urdf

    urdf = bimanual_panda_urdf()
    joints = tuple(f'{side}_joint{i}' for side in ('left', 'right') for i in range(1, 7))
    config = EnvelopeConfig(
        links=('left_panda_link8', 'right_panda_link8'),
        offsets=np.zeros((2, 3)),
        frame='world',
        table_height=0.45,
    )
    envelope = Envelope.from_description(urdf, joints, config)
    start = np.tile(READY[:6], 2)
    hands = envelope.points.positions(start)[0]
    np.testing.assert_allclose(hands[:, 1], [0.3, -0.3], atol=1e-9)  # one hand per base
    assert hands[0, 2] == pytest.approx(hands[1, 2]) and hands[0, 2] > 0.5
    lower, upper = np.full(12, -3.0), np.full(12, 3.0)
    motion = MotionConfig(
        max_velocity=np.full(12, 2.0),
        stop_deceleration=np.full(12, 10.0),
        max_acceleration=np.full(12, 10.0),
        max_jerk=np.full(12, 5000.0),
    )
    times = np.linspace(0.0, 2.0, 21)
    for column, side in ((1, 'left'), (7, 'right')):  # joint 2 of one arm: that hand goes down
        rows = np.tile(start, (21, 1))
        rows[:, column] += np.linspace(0.0, 0.8, 21)
        cut = envelope.cut(ActionPlan(times, rows), lower, upper, motion)
        assert cut.violation is not None and cut.violation.link == f'{side}_panda_link8'
        assert cut.violation.bound.startswith('table') and cut.hold_inside
        executed = cut.plan.positions_at(np.linspace(0.0, cut.plan.end_time + 0.5, 2000))
        assert envelope.points.positions(executed)[..., 2].min() > 0.45
    level = np.tile(start, (21, 1))
    level[:, 0] += np.linspace(0.0, 0.5, 21)  # the left arm turns about the vertical axis
    assert envelope.cut(ActionPlan(times, level), lower, upper, motion).violation is None


def test_a_hold_that_brakes_through_the_table_is_counted_and_reported():
    """Braking follows the motion's tangent: a hold during a fast approach may cross a bound."""
    from dreamzero_ros.core.control.control_loop import ControlLoop
    from dreamzero_ros.core.control.status_report import build_report
    from dreamzero_ros.core.observations.observation_cache import ObservationCache

    settings = build_settings({'gripper_joint_name': 'g', 'envelope.enabled': True})
    # the shoulder swings forward at 1.2 rad/s; a hold at t = 0.3 s brakes from there
    times = np.linspace(0.0, 1.0, 11)
    rows = np.tile(np.append(READY, 0.0), (11, 1))
    rows[:, 1] += 1.2 * times
    velocities = np.zeros_like(rows)
    velocities[:, 1] = 1.2
    plan = ActionPlan(times, rows, velocities)
    points = Envelope.from_description(URDF, ARM, EnvelopeConfig()).points

    def held(table):
        envelope = Envelope.from_description(
            URDF, ARM, dataclasses.replace(EnvelopeConfig(), table_height=table)
        )
        loop = ControlLoop(ObservationCache(settings.cache), settings.loop, envelope=envelope)
        loop.plan = plan
        hold = loop.hold(0.3, 'stale input')
        executed = _dense(hold, 0.3, hold.end_time + 0.5)[1][:, :7]
        return loop, points.positions(executed)[..., 2].min()

    loop, lowest = held(0.0)
    assert loop.counters.holds_outside_envelope == 0 and loop.last_envelope is None
    loop, _ = held(lowest + 0.01)  # the same stop, now 1 cm through the table
    assert loop.counters.holds == 1 and loop.counters.holds_outside_envelope == 1
    report = build_report(
        loop, 1.0, lifecycle_state='active', engine_state='ready', enabled=True, dry_run=False
    )
    assert report.value('holds_outside_envelope') == '1'
    assert 'table' in report.value('last_envelope')
