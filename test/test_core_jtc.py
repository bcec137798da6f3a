# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""joint_trajectory_controller's acceptance rules and trajectory execution, without ROS."""

import numpy as np
import pytest

from dreamzero_ros.core.motion.jtc import (
    ControllerRules,
    Point,
    Trajectory,
    TrajectoryFollower,
    validate,
)

JOINTS = tuple(f'panda_joint{i}' for i in range(1, 8))
RULES = ControllerRules(JOINTS)


def trajectory(names=JOINTS, stamp=0.0, times=(0.1, 0.2), velocities=True, **point_fields):
    n = len(names)
    points = tuple(
        Point(
            t,
            (0.1 * i,) * n,
            (0.0,) * n if velocities else (),
            **{k: v[i] for k, v in point_fields.items()},
        )
        for i, t in enumerate(times)
    )
    return Trajectory(stamp, tuple(names), points)


def test_a_full_trajectory_is_accepted():
    assert validate(trajectory(), RULES, now=5.0) == ''
    assert validate(trajectory(stamp=5.0), RULES, now=5.1) == ''


@pytest.mark.parametrize(
    ('bad', 'reason'),
    [
        (trajectory(names=(*JOINTS, 'panda_gripper')), "don't match the controller joints"),
        (trajectory(names=JOINTS[:6]), "don't match the controller joints"),
        (trajectory(names=(*JOINTS[:6], 'panda_gripper')), "panda_gripper doesn't match"),
        (Trajectory(0.0, JOINTS, ()), 'Empty trajectory'),
        (trajectory(times=(0.2, 0.2)), 'not strictly increasing'),
        (trajectory(stamp=1.0), 'ends in the past'),
        (
            Trajectory(0.0, JOINTS, (Point(0.1, (0.0,) * 7, (0.5,) * 7),)),
            'last trajectory point of joint panda_joint1 is not zero',
        ),
        (Trajectory(0.0, JOINTS, (Point(0.1, (0.0,) * 6),)), 'positions (6) at point #0'),
        (Trajectory(0.0, JOINTS, (Point(0.1, (0.0,) * 7, (0.0,) * 3),)), 'velocities (3)'),
        (Trajectory(0.0, JOINTS, (Point(0.1, (0.0,) * 7, (), (), (1.0,) * 7),)), 'effort'),
    ],
)
def test_what_jtc_rejects(bad, reason):
    assert reason in validate(bad, RULES, now=5.0)


def test_partial_goals_only_when_allowed():
    partial = trajectory(names=JOINTS[:3])
    assert validate(partial, RULES, 0.0)
    rules = ControllerRules(JOINTS, allow_partial_joints_goal=True)
    assert validate(partial, rules, 0.0) == ''
    assert 'panda_gripper' in validate(trajectory(names=('panda_gripper',)), rules, 0.0)


def test_follower_interpolates_as_jtc_and_holds_the_end():
    follower = TrajectoryFollower(('a', 'b'), np.zeros(2))
    points = (Point(0.5, (1.0, 2.0), (1.0, 0.0)), Point(1.0, (2.0, 2.0), (0.0, 0.0)))
    follower.accept(Trajectory(10.0, ('a', 'b'), points), now=10.0)
    follower.update(10.5)
    np.testing.assert_allclose(follower.position, [1.0, 2.0])
    np.testing.assert_allclose(follower.velocity, [1.0, 0.0])
    follower.update(10.75)  # cubic: p = 1 + 0.25 + c2 t^2 + c3 t^3
    h, t = 0.5, 0.25
    c2 = (3 * 1.0 - 2 * 1.0 * h) / h**2
    c3 = (-2 * 1.0 + 1.0 * h) / h**3
    assert follower.position[0] == pytest.approx(1.0 + t + c2 * t**2 + c3 * t**3)
    follower.update(20.0)
    np.testing.assert_allclose(follower.position, [2.0, 2.0])
    np.testing.assert_allclose(follower.velocity, 0.0)


def test_follower_starts_from_its_state_at_receipt_and_positions_only_are_linear():
    follower = TrajectoryFollower(('a',), np.zeros(1))
    follower.accept(Trajectory(0.0, ('a',), (Point(1.0, (1.0,)), Point(2.0, (3.0,)))), now=5.0)
    follower.update(5.5)  # before the first point: from the state at receipt, linearly
    assert follower.position[0] == pytest.approx(0.5)
    follower.update(6.5)
    assert follower.position[0] == pytest.approx(2.0) and follower.velocity[0] == 2.0


def test_a_new_trajectory_replaces_the_old_one_continuously():
    follower = TrajectoryFollower(('a',), np.zeros(1))
    follower.accept(Trajectory(0.0, ('a',), (Point(1.0, (1.0,), (0.0,)),)), now=0.0)
    follower.update(0.5)
    position, velocity = follower.position.copy(), follower.velocity.copy()
    follower.accept(Trajectory(0.0, ('a',), (Point(0.5, (0.0,), (0.0,)),)), now=0.5)
    follower.update(0.5 + 1e-6)
    np.testing.assert_allclose(follower.position, position, atol=1e-5)
    np.testing.assert_allclose(follower.velocity, velocity, atol=1e-2)


def test_partial_goal_holds_the_other_joints():
    follower = TrajectoryFollower(('a', 'b'), np.array([0.3, 0.7]))
    follower.accept(Trajectory(0.0, ('b',), (Point(0.1, (1.0,)),)), now=0.0)
    follower.update(1.0)
    np.testing.assert_allclose(follower.position, [0.3, 1.0])


def test_before_the_first_point_jtc_starts_from_zero_acceleration_unless_from_desired_state():
    """Quintic points: closed loop (JTC's default) zero-fills the state's acceleration.

    A Franka has no acceleration state interface; interpolate_from_desired_state keeps the
    commanded acceleration.
    """
    moving = Trajectory(0.0, ('a',), (Point(1.0, (1.0,), (0.0,), (0.0,)),))
    later = Trajectory(0.0, ('a',), (Point(1.0, (2.0,), (0.0,), (0.0,)),))
    accelerations = {}
    for desired in (False, True):
        follower = TrajectoryFollower(('a',), np.zeros(1), interpolate_from_desired_state=desired)
        follower.accept(moving, now=0.0)
        follower.update(0.3)
        assert abs(follower.acceleration[0]) > 1.0
        follower.accept(later, now=0.3)
        follower.update(0.3)
        accelerations[desired] = follower.acceleration[0]
        expected = follower.sample(np.array([0.3, 0.8]))
        follower.update(0.8)
        np.testing.assert_allclose(follower.position, expected[0][1])
    assert accelerations[False] == 0.0 and accelerations[True] != 0.0


def test_a_franka_check_flags_the_acceleration_steps_of_cubic_segments():
    from dreamzero_ros.core.control.command_check import FRANKA_ERRORS, CommandLimits, FollowerCheck
    from dreamzero_ros.core.robot.panda import PANDA_MAX_ACCELERATION, PANDA_MAX_JERK

    limits = CommandLimits(
        max_acceleration=np.array(PANDA_MAX_ACCELERATION), max_jerk=np.array(PANDA_MAX_JERK)
    )
    joints = tuple(f'j{i}' for i in range(7))
    for fields in ('cubic', 'quintic'):
        follower = TrajectoryFollower(joints, np.zeros(7))
        check = FollowerCheck(follower, limits, 0.0)
        # up to 2 rad/s and back to rest in 1 s: cubics accelerate at +-4 rad/s^2 (within
        # every limit) but step from 0 to 4, 4 to -4 and -4 to 0; quintics do not step
        accelerations = {'cubic': (), 'quintic': (0.0,) * 7}[fields]
        points = tuple(
            Point(t, (p,) * 7, (v,) * 7, accelerations)
            for t, p, v in ((0.0, 0.0, 0.0), (0.5, 0.5, 2.0), (1.0, 1.0, 0.0))
        )
        check.accept(Trajectory(0.0, joints, points), 0.0)
        for now in np.arange(0.01, 1.1, 0.01):
            check.advance(now)
        monitor = check.monitor
        assert monitor.peak['acceleration'].max() <= 6.0 + 1e-6
        if fields == 'cubic':
            np.testing.assert_allclose(monitor.jump_max, 8.0, rtol=1e-4)
            # 8 rad/s^2 within a few milliseconds: 4000 rad/s^3 by the Franka's differences,
            # over joint 2's 3750 rad/s^3 (only)
            assert list(monitor.violations) == [FRANKA_ERRORS['jerk']]
            assert monitor.first.startswith(f'{FRANKA_ERRORS["jerk"]}: joint 1 jerk')
            np.testing.assert_allclose(monitor.peak['jerk'], 4000.0, rtol=1e-6)
        else:
            assert monitor.jump_max.max() < 1e-6 and monitor.violations == {}, monitor.first
            assert monitor.peak['jerk'].max() <= 48.0 + 0.1
