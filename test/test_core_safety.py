# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of the command safety limits."""

import numpy as np
import pytest

from dreamzero_ros.core.motion.safety import SafetyLimits, apply_limits

LIMITS = SafetyLimits(
    lower=np.array([-1.0, -1.0, 0.0]),
    upper=np.array([1.0, 1.0, 1.0]),
    max_step_delta=np.array([0.1, 0.1, 0.5]),
)


def test_rows_within_limits_pass_unchanged():
    rows = np.array([[0.05, 0.0, 0.2], [0.1, -0.05, 0.6]])
    verdict = apply_limits(rows, np.zeros(3), LIMITS)
    assert not verdict.refused and verdict.limit_clamps == verdict.delta_clamps == 0
    np.testing.assert_allclose(verdict.rows, rows)


def test_positions_are_clamped_onto_limits():
    start = np.array([0.95, -0.95, 0.0])
    verdict = apply_limits(np.array([[1.5, -1.2, 0.0]]), start, LIMITS)
    np.testing.assert_allclose(verdict.rows, [[1.0, -1.0, 0.0]])
    assert verdict.limit_clamps == 2


def test_clamp_mode_rate_limits_every_step():
    rows = np.array([[0.5, 0.0, 1.0], [0.5, 0.0, 1.0], [0.5, 0.0, 1.0]])
    verdict = apply_limits(rows, np.zeros(3), LIMITS)
    np.testing.assert_allclose(verdict.rows[:, 0], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(verdict.rows[:, 2], [0.5, 1.0, 1.0])
    steps = np.diff(np.vstack([np.zeros(3), verdict.rows]), axis=0)
    assert np.all(np.abs(steps) <= LIMITS.max_step_delta + 1e-12)
    assert verdict.delta_clamps == 4


def test_refuse_mode_refuses_the_whole_chunk():
    limits = SafetyLimits(LIMITS.lower, LIMITS.upper, LIMITS.max_step_delta, 'refuse')
    rows = np.array([[0.05, 0.0, 0.0], [0.3, 0.0, 0.0]])
    verdict = apply_limits(rows, np.zeros(3), limits)
    assert verdict.refused and verdict.rows is None
    assert 'step 1 moves joint 0 by +0.2500' in verdict.reason


@pytest.mark.parametrize('bad', [np.nan, np.inf])
def test_non_finite_actions_are_refused(bad):
    rows = np.zeros((2, 3))
    rows[1, 2] = bad
    verdict = apply_limits(rows, np.zeros(3), LIMITS)
    assert verdict.refused and 'step 1, joint 2' in verdict.reason


def test_wrong_width_or_previous_is_refused():
    assert apply_limits(np.zeros((2, 4)), np.zeros(3), LIMITS).refused
    assert apply_limits(np.zeros((2, 3)), np.array([0.0, np.nan, 0.0]), LIMITS).refused


def test_start_outside_limits_moves_into_them_rate_limited_never_a_jump():
    # Joint 0 measured at 1.4, beyond its upper limit 1.0: the chunk asks for 0.9 at once.
    start = np.array([1.4, 0.0, 0.0])
    verdict = apply_limits(np.full((8, 3), [0.9, 0.0, 0.0]), start, LIMITS)
    assert not verdict.refused and verdict.outside_joints == (0,)
    steps = np.diff(np.vstack([start, verdict.rows]), axis=0)
    assert np.all(np.abs(steps) <= LIMITS.max_step_delta + 1e-12)
    np.testing.assert_allclose(verdict.rows[:, 0], [1.3, 1.2, 1.1, 1.0, 0.9, 0.9, 0.9, 0.9])


def test_start_outside_limits_never_moves_further_out():
    start = np.array([1.4, -1.3, 0.0])
    verdict = apply_limits(np.full((6, 3), [2.0, -2.0, 0.0]), start, LIMITS)
    np.testing.assert_allclose(verdict.rows[:, 0], [1.3, 1.2, 1.1, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(verdict.rows[:, 1], [-1.2, -1.1, -1.0, -1.0, -1.0, -1.0])
    assert verdict.outside_joints == (0, 1)


def test_start_outside_limits_refused_in_hold_mode():
    limits = SafetyLimits(LIMITS.lower, LIMITS.upper, LIMITS.max_step_delta, outside_limits='hold')
    verdict = apply_limits(np.zeros((2, 3)), np.array([0.0, 1.25, 0.0]), limits)
    assert verdict.refused and verdict.outside_joints == (1,)
    assert 'joint 1 starts at +1.2500, outside [-1.0000, +1.0000]' in verdict.reason
    inside = apply_limits(np.zeros((2, 3)), np.array([0.0, 0.95, 0.0]), limits)
    assert not inside.refused and inside.outside_joints == ()


@pytest.mark.parametrize(
    'kwargs',
    [
        dict(lower=[0.0, 1.0], upper=[1.0, 0.0], max_step_delta=[1.0, 1.0]),
        dict(lower=[0.0], upper=[1.0], max_step_delta=[0.0]),
        dict(lower=[0.0], upper=[1.0, 2.0], max_step_delta=[1.0]),
        dict(lower=[0.0], upper=[1.0], max_step_delta=[1.0], delta_mode='ignore'),
        dict(lower=[0.0], upper=[1.0], max_step_delta=[1.0], outside_limits='jump'),
    ],
)
def test_bad_limits_are_rejected(kwargs):
    with pytest.raises(ValueError):
        SafetyLimits(**kwargs)
