# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Metric math of replay evaluation: horizon errors, latency statistics, chunk timing.

Pure numpy on arrays; no bag or policy here. Errors are ``predicted - reference`` per chunk,
horizon step and action dimension; NaN entries (reference not recorded) are left out of every
mean and counted in ``samples``.
"""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np

from dreamzero_ros.policy_types import DROID_ARM_DOF

PERCENTILES = (50, 90, 95, 99)


def _nanmean(values: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    count = np.isfinite(values).sum(axis=axis)
    total = np.nansum(values, axis=axis)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _listed(values: np.ndarray) -> list:
    """JSON-ready nested lists; NaN becomes None."""
    return np.where(np.isfinite(values), values, None).tolist() if values.size else []


def _scalar(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def horizon_errors(
    predicted: np.ndarray, reference: np.ndarray, names: list[str], arm_dof: int = DROID_ARM_DOF
) -> dict[str, object]:
    """MAE and RMSE of ``predicted`` vs ``reference``, both ``(N, H, D)``.

    Returns:
        ``by_step_joint`` (``H x D`` MAE and RMSE), ``by_step`` (arm joints pooled, per step),
        ``by_joint`` (steps pooled, per joint name), ``arm`` and ``gripper`` totals (the first
        ``arm_dof`` columns are the arm, radians; a column after them the gripper in ``[0, 1]``;
        the gripper figures are None without one), and ``samples`` (valid entries per step and
        joint).

    """
    predicted = np.asarray(predicted, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if predicted.shape != reference.shape or predicted.ndim != 3:
        raise ValueError(
            f'shapes differ or are not (N, H, D): {predicted.shape}, {reference.shape}'
        )
    error = predicted - reference
    absolute, squared = np.abs(error), error**2
    arm = slice(0, arm_dof)
    # Without a gripper column its figures are the mean of nothing: NaN, reported as None.
    gripper = absolute[:, :, -1] if error.shape[2] > arm_dof else np.full(error.shape[:2], np.nan)
    gripper_squared = gripper**2
    return {
        'joint_names': list(names),
        'samples': np.isfinite(error).sum(axis=0).tolist(),
        'by_step_joint': {
            'mae': _listed(_nanmean(absolute, axis=0)),
            'rmse': _listed(np.sqrt(_nanmean(squared, axis=0))),
        },
        'by_step': {
            'arm_mae': _listed(_nanmean(absolute[:, :, arm], axis=(0, 2))),
            'arm_rmse': _listed(np.sqrt(_nanmean(squared[:, :, arm], axis=(0, 2)))),
            'gripper_mae': _listed(_nanmean(gripper, axis=0)),
        },
        'by_joint': {
            name: {
                'mae': _scalar(_nanmean(absolute[:, :, column])),
                'rmse': _scalar(np.sqrt(_nanmean(squared[:, :, column]))),
            }
            for column, name in enumerate(names)
        },
        'arm': {
            'mae': _scalar(_nanmean(absolute[:, :, arm])),
            'rmse': _scalar(np.sqrt(_nanmean(squared[:, :, arm]))),
            'max_abs': _scalar(np.nanmax(absolute[:, :, arm], initial=-np.inf)),
        },
        'gripper': {
            'mae': _scalar(_nanmean(gripper)),
            'rmse': _scalar(np.sqrt(_nanmean(gripper_squared))),
        },
    }


def group_errors(
    predicted: np.ndarray,
    reference: np.ndarray,
    hold: np.ndarray,
    groups: Sequence[tuple[str, Sequence[int]]],
    names: Sequence[str],
) -> dict[str, dict[str, object]]:
    """Each action group scored against its own recorded motion (all ``(N, H, D)``).

    Returns, per group name: its ``joints``, the ``mae``, ``rmse`` and ``max_abs`` of the
    policy over its columns, and ``hold_baseline_mae`` (holding the measured state).
    """
    predicted, reference, hold = (
        np.asarray(a, dtype=np.float64) for a in (predicted, reference, hold)
    )
    scores = {}
    for name, columns in groups:
        columns = list(columns)
        error = np.abs(predicted[:, :, columns] - reference[:, :, columns])
        baseline = np.abs(hold[:, :, columns] - reference[:, :, columns])
        scores[name] = {
            'joints': [names[c] for c in columns],
            'mae': _scalar(_nanmean(error)),
            'rmse': _scalar(np.sqrt(_nanmean(error**2))),
            'max_abs': _scalar(np.nanmax(error, initial=-np.inf)),
            'hold_baseline_mae': _scalar(_nanmean(baseline)),
        }
    return scores


def distribution(values: np.ndarray) -> dict[str, float | int | None]:
    """Count, mean, std, min, percentiles and max of finite ``values``."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {'count': 0}
    summary: dict[str, float | int | None] = {
        'count': int(values.size),
        'mean': float(values.mean()),
        'std': float(values.std()),
        'min': float(values.min()),
    }
    for q in PERCENTILES:
        summary[f'p{q}'] = float(np.percentile(values, q))
    summary['max'] = float(values.max())
    return summary


def chunk_timing(
    stamps: np.ndarray,
    latencies_s: np.ndarray,
    observation_ages_s: np.ndarray,
    step_duration_s: float,
    horizon: int,
    query_period_s: float,
) -> dict[str, object]:
    """How the chunks would have fitted a live control loop.

    Returns:
        ``stamp_interval_s`` between consecutive chunks; ``observation_age_s`` at query time;
        ``steps_elapsed_on_arrival`` = ``ceil(latency / step_duration)`` (rows already in the
        past when the chunk arrives); ``late_fraction`` (chunks arriving after their last
        row); ``keeps_up_fraction`` (latency within one query period).

    """
    latencies_s = np.asarray(latencies_s, dtype=np.float64)
    elapsed = np.ceil(latencies_s / step_duration_s - 1e-9) if latencies_s.size else latencies_s
    horizon_s = horizon * step_duration_s
    return {
        'chunks': int(latencies_s.size),
        'query_period_s': query_period_s,
        'step_duration_s': step_duration_s,
        'horizon': horizon,
        'horizon_s': horizon_s,
        'stamp_interval_s': distribution(np.diff(np.asarray(stamps, dtype=np.float64))),
        'observation_age_s': distribution(observation_ages_s),
        'steps_elapsed_on_arrival': distribution(elapsed),
        'late_fraction': _scalar(float(np.mean(latencies_s >= horizon_s)))
        if latencies_s.size
        else None,
        'keeps_up_fraction': _scalar(float(np.mean(latencies_s <= query_period_s)))
        if latencies_s.size
        else None,
    }
