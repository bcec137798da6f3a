# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ArmTracking: waypoints reached and tracking error, from trajectories and joint states."""

import math

import numpy as np

from dreamzero_ros.core.motion.arm_tracking import ArmTracking
from dreamzero_ros.core.motion.jtc import Point, Trajectory, TrajectoryFollower

JOINTS = ('a', 'b')


def _motion(stamp: float, targets: list[tuple[float, float]], step: float = 0.5) -> Trajectory:
    points = tuple(Point(step * (k + 1), target, (0.0, 0.0)) for k, target in enumerate(targets))
    return Trajectory(stamp, JOINTS, points)


def _follow(tracking: ArmTracking, sends, until: float, offset: float = 0.0, rate: float = 100.0):
    """Run a perfectly tracking follower (plus ``offset``) over ``sends`` [(time, trajectory)]."""
    follower = TrajectoryFollower(JOINTS, np.zeros(2))
    pending = list(sends)
    for now in np.arange(0.0, until, 1.0 / rate):
        while pending and pending[0][0] <= now:
            seen, trajectory = pending.pop(0)
            follower.update(now)
            follower.accept(trajectory, now)
            tracking.commanded(trajectory, seen)
        follower.update(now)
        tracking.measured(now, ['x', *JOINTS], [9.0, *(follower.position + offset)])


def test_a_perfectly_tracking_arm_reaches_every_waypoint_without_error():
    tracking = ArmTracking(JOINTS)
    _follow(tracking, [(0.0, _motion(0.0 + 1e-9, [(0.2, -0.1), (0.4, -0.2), (0.4, -0.2)]))], 2.0)
    report = tracking.report()
    assert report.waypoints_reached == 3
    assert report.max_error < 1e-6
    np.testing.assert_allclose(report.latest, [0.4, -0.2], atol=1e-9)
    np.testing.assert_allclose(report.travel, [0.4, 0.2], atol=1e-9)
    assert math.isclose(report.moved, 0.4, abs_tol=1e-9)
    assert report.samples == 200


def test_an_offset_arm_shows_its_offset_as_tracking_error():
    tracking = ArmTracking(JOINTS)
    _follow(tracking, [(0.0, _motion(1e-9, [(0.2, 0.1), (0.3, 0.1)]))], 1.5, offset=0.05)
    report = tracking.report()
    assert report.waypoints_reached == 2
    assert math.isclose(report.max_error, 0.05, abs_tol=1e-9)


def test_waypoints_replaced_by_a_later_trajectory_or_hold_are_not_counted():
    tracking = ArmTracking(JOINTS)
    first = _motion(1e-9, [(0.2, 0.0), (0.4, 0.0), (0.6, 0.0), (0.8, 0.0)])  # 0.5 .. 2.0 s
    hold = Trajectory(0.0, JOINTS, (Point(0.2, (0.3, 0.0), (0.0, 0.0)),))
    second = _motion(1.2, [(0.1, 0.0), (0.0, 0.0)])  # 1.7, 2.2 s
    _follow(tracking, [(0.0, first), (0.8, hold), (1.2, second)], 3.0)
    report = tracking.report()
    # first: 0.5 only (1.0 comes after the hold at 0.8); the hold none; second: both
    assert report.waypoints_reached == 3
    assert report.max_error < 1e-6


def test_waypoints_outside_the_measurements_are_not_counted_yet():
    tracking = ArmTracking(JOINTS)
    _follow(tracking, [(0.0, _motion(1e-9, [(0.2, 0.0), (0.4, 0.0), (0.4, 0.0)]))], 1.2)
    assert tracking.report().waypoints_reached == 2  # the third is at 1.5 s


def test_joint_states_without_the_joints_or_out_of_order_are_ignored():
    tracking = ArmTracking(JOINTS)
    assert not tracking.measured(1.0, ['a'], [0.0])
    assert not tracking.measured(1.0, ['a', 'b'], [0.0])
    assert tracking.measured(1.0, ['b', 'a'], [2.0, 1.0])
    assert not tracking.measured(0.5, ['a', 'b'], [0.0, 0.0])
    report = tracking.report()
    assert report.samples == 1 and list(report.latest) == [1.0, 2.0]
    assert report.moved == 0.0 and report.waypoints_reached == 0 and math.isnan(report.max_error)


def test_no_measurement_gives_an_empty_report():
    report = ArmTracking(JOINTS).report()
    assert report.samples == 0 and report.moved == 0.0 and math.isnan(report.max_error)
