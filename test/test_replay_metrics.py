# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay metric math against hand-computed values."""

import math

import numpy as np
import pytest

from dreamzero_ros.replay import metrics

NAMES = [f'j{i}' for i in range(1, 8)] + ['gripper']


def test_horizon_errors_by_step_joint_and_totals():
    # 2 chunks, horizon 3, 8 dims; errors chosen so every mean is easy by hand.
    reference = np.zeros((2, 3, 8))
    predicted = np.zeros((2, 3, 8))
    predicted[0, :, 0] = [1.0, 2.0, 3.0]  # joint 1, chunk 0
    predicted[1, :, 0] = [-3.0, -2.0, -1.0]  # joint 1, chunk 1
    predicted[:, :, 7] = 0.5  # gripper off by 0.5 everywhere
    result = metrics.horizon_errors(predicted, reference, NAMES)

    mae = np.array(result['by_step_joint']['mae'])
    rmse = np.array(result['by_step_joint']['rmse'])
    assert mae.shape == (3, 8)
    np.testing.assert_allclose(mae[:, 0], [2.0, 2.0, 2.0])  # (1+3)/2, (2+2)/2, (3+1)/2
    np.testing.assert_allclose(rmse[:, 0], [math.sqrt(5), 2.0, math.sqrt(5)])
    np.testing.assert_allclose(mae[:, 1:7], 0.0)
    np.testing.assert_allclose(mae[:, 7], 0.5)
    # Arm per step pools 7 joints x 2 chunks: (|1|+|-3|)/14 etc.
    np.testing.assert_allclose(result['by_step']['arm_mae'], [4 / 14, 4 / 14, 4 / 14])
    np.testing.assert_allclose(result['by_step']['arm_rmse'], np.sqrt([10 / 14, 8 / 14, 10 / 14]))
    np.testing.assert_allclose(result['by_step']['gripper_mae'], [0.5, 0.5, 0.5])
    assert result['by_joint']['j1']['mae'] == pytest.approx(2.0)
    assert result['by_joint']['j1']['rmse'] == pytest.approx(math.sqrt(28 / 6))
    assert result['by_joint']['j2']['mae'] == 0.0
    assert result['arm']['mae'] == pytest.approx(12 / 42)
    assert result['arm']['rmse'] == pytest.approx(math.sqrt(28 / 42))
    assert result['arm']['max_abs'] == 3.0
    assert result['gripper'] == {'mae': pytest.approx(0.5), 'rmse': pytest.approx(0.5)}
    assert result['samples'] == [[2] * 8] * 3


def test_horizon_errors_leave_out_unrecorded_steps():
    reference = np.zeros((2, 2, 8))
    reference[1, 1, :] = np.nan  # the second chunk ran past the end of the recording
    predicted = np.ones((2, 2, 8))
    predicted[1] = 3.0
    result = metrics.horizon_errors(predicted, reference, NAMES)
    np.testing.assert_allclose(result['by_step']['arm_mae'], [2.0, 1.0])
    assert result['samples'][1] == [1] * 8
    assert result['arm']['mae'] == pytest.approx((7 * 1 + 7 * 3 + 7 * 1) / 21)


def test_horizon_errors_all_unrecorded_is_null_not_nan():
    result = metrics.horizon_errors(np.zeros((1, 2, 8)), np.full((1, 2, 8), np.nan), NAMES)
    assert result['arm']['mae'] is None
    assert result['by_step']['arm_mae'] == [None, None]


def test_horizon_errors_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match='shapes'):
        metrics.horizon_errors(np.zeros((1, 2, 8)), np.zeros((1, 3, 8)), NAMES)


def test_distribution():
    summary = metrics.distribution(np.array([1.0, 2.0, 3.0, 4.0, np.nan]))
    assert summary['count'] == 4
    assert summary['mean'] == 2.5
    assert summary['min'] == 1.0 and summary['max'] == 4.0
    assert summary['p50'] == 2.5
    assert summary['std'] == pytest.approx(math.sqrt(1.25))
    assert metrics.distribution(np.array([])) == {'count': 0}


def test_chunk_timing():
    step = 0.1
    timing = metrics.chunk_timing(
        stamps=np.array([0.0, 0.5, 1.5]),
        latencies_s=np.array([0.05, 0.25, 2.0]),
        observation_ages_s=np.array([0.0, 0.01, 0.02]),
        step_duration_s=step,
        horizon=10,
        query_period_s=0.5,
    )
    assert timing['horizon_s'] == pytest.approx(1.0)
    assert timing['stamp_interval_s']['mean'] == pytest.approx(0.75)
    assert timing['stamp_interval_s']['max'] == pytest.approx(1.0)
    # ceil(0.5) = 1, ceil(2.5) = 3, ceil(20) = 20 rows already in the past on arrival
    assert timing['steps_elapsed_on_arrival']['min'] == 1
    assert timing['steps_elapsed_on_arrival']['p50'] == 3
    assert timing['steps_elapsed_on_arrival']['max'] == 20
    assert timing['late_fraction'] == pytest.approx(1 / 3)
    assert timing['keeps_up_fraction'] == pytest.approx(2 / 3)
    assert timing['observation_age_s']['max'] == pytest.approx(0.02)


def test_joint_plots_thin_many_chunks_to_a_readable_dozen():
    from dreamzero_ros.replay.plots import MAX_PLOTTED_CHUNKS, thinning

    assert MAX_PLOTTED_CHUNKS == 12
    assert thinning(0) == thinning(5) == thinning(12) == 1
    for count in (13, 53, 200):
        assert len(range(count)[:: thinning(count)]) <= 12
        assert len(range(count)[:: thinning(count)]) >= 6
