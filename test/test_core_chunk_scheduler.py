# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of plan interpolation and chunk merging."""

import numpy as np
import pytest

from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, BlendConfig, merge_chunk

DT = 0.1


def ramp(start, horizon=10, width=2, slope=1.0):
    return start + slope * DT * np.arange(horizon)[:, None] * np.ones((1, width))


def test_plan_interpolates_and_holds_ends():
    plan = ActionPlan(np.array([1.0, 2.0]), np.array([[0.0], [10.0]]))
    assert plan.position_at(0.0)[0] == 0.0
    assert plan.position_at(1.25)[0] == pytest.approx(2.5)
    assert plan.position_at(5.0)[0] == 10.0
    np.testing.assert_allclose(plan.positions_at(np.array([0.5, 1.5, 3.0]))[:, 0], [0, 5, 10])


def test_plan_rejects_bad_shapes():
    with pytest.raises(ValueError):
        ActionPlan(np.array([1.0, 1.0]), np.zeros((2, 1)))
    with pytest.raises(ValueError):
        ActionPlan(np.array([]), np.zeros((0, 1)))


def test_first_chunk_drops_past_rows_and_keeps_the_rest():
    actions = ramp(0.0)
    merged = merge_chunk(
        None, actions, stamp=10.0, step_duration=DT, now=10.25, blend=BlendConfig()
    )
    assert merged.dropped_steps == 3
    np.testing.assert_allclose(merged.times, 10.0 + DT * np.arange(3, 10))
    np.testing.assert_allclose(merged.rows, actions[3:])
    assert merged.blend_window == 0.0


def test_row_exactly_now_is_kept():
    merged = merge_chunk(None, ramp(0.0), 10.0, DT, 10.3, BlendConfig())
    assert merged.dropped_steps == 3 and merged.times[0] == pytest.approx(10.3)


def test_all_rows_past_returns_none():
    assert merge_chunk(None, ramp(0.0), 10.0, DT, 11.0, BlendConfig()) is None


def test_blend_starts_on_the_executing_plan_and_ends_on_the_chunk():
    old = ActionPlan(10.0 + DT * np.arange(10), np.zeros((10, 2)))
    new = np.ones((10, 2))
    now = 10.4  # latency 0.4 s -> window 4 steps
    merged = merge_chunk(old, new, stamp=10.0, step_duration=DT, now=now, blend=BlendConfig(2, 12))
    assert merged.blend_window == pytest.approx(0.4)
    np.testing.assert_allclose(merged.rows[:, 0], [0.0, 0.25, 0.5, 0.75, 1.0, 1.0])
    assert np.all(np.diff(merged.rows[:, 0]) >= 0)


@pytest.mark.parametrize(('latency', 'window'), [(0.05, 0.2), (0.7, 0.7), (3.0, 1.2)])
def test_blend_window_follows_latency_within_bounds(latency, window):
    assert BlendConfig(2, 12).window(latency, DT) == pytest.approx(window)


def test_blending_off_replaces_the_plan():
    old = ActionPlan(10.0 + DT * np.arange(10), np.zeros((10, 2)))
    merged = merge_chunk(old, np.ones((10, 2)), 10.0, DT, 10.2, BlendConfig(0, 0))
    np.testing.assert_allclose(merged.rows, 1.0)


def test_hand_over_is_continuous_for_a_shifted_chunk():
    """A chunk offset by 0.3 rad from the plan in force moves away from it gradually."""
    old = ActionPlan(10.0 + DT * np.arange(24), ramp(0.0, 24))
    new = ramp(0.3, 24)
    merged = merge_chunk(old, new, 10.5, DT, 10.9, BlendConfig(2, 12))
    jump = merged.rows[0] - old.position_at(merged.times[0])
    assert np.all(np.abs(jump) < 1e-9)
    steps = np.abs(np.diff(merged.rows[:, 0]))
    assert steps.max() < 0.3 / 4 + DT + 1e-9


@pytest.mark.parametrize('bounds', [(-1, 2), (5, 2)])
def test_bad_blend_bounds(bounds):
    with pytest.raises(ValueError):
        BlendConfig(*bounds)
