# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Matplotlib figures of an evaluation, rendered to PNG bytes (no display needed)."""

from __future__ import annotations

import io

from matplotlib.figure import Figure
import numpy as np

from dreamzero_ros.replay.evaluation import Evaluation


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png', dpi=100, bbox_inches='tight')
    return buffer.getvalue()


#: Most predicted chunks drawn per joint; more are thinned to every k-th (the plot says which).
MAX_PLOTTED_CHUNKS = 12


def thinning(count: int, limit: int = MAX_PLOTTED_CHUNKS) -> int:
    """The step that thins ``count`` chunks to at most ``limit`` (1: keep all)."""
    return max(1, -(-count // limit))


def joints_plot(evaluation: Evaluation) -> bytes:
    """Recorded reference of each joint with the predicted chunks (every k-th beyond a dozen)."""
    names = evaluation.config.topics.joint_names
    every = thinning(len(evaluation.records))
    shown = evaluation.records[::every]
    start, stop = evaluation.span_s
    horizon_s = max((r.step_duration * len(r.actions) for r in evaluation.records), default=0.0)
    reference = evaluation.reference
    inside = (reference.times >= start) & (reference.times <= stop + horizon_s)
    figure = Figure(figsize=(12, 2.0 * ((len(names) + 1) // 2)))
    axes = figure.subplots((len(names) + 1) // 2, 2, sharex=True, squeeze=False).ravel()
    for column, name in enumerate(names):
        axis = axes[column]
        axis.plot(
            reference.times[inside] - start,
            reference.positions[inside, column],
            color='black',
            linewidth=1.2,
            label=f'recorded ({evaluation.reference_topic})',
        )
        for index, record in enumerate(shown):
            steps = record.stamp + record.step_duration * np.arange(len(record.actions))
            axis.plot(
                steps - start,
                record.actions[:, column],
                color=f'C{index % 10}',
                linewidth=1.0,
                alpha=0.8,
                label='predicted chunks' if index == 0 else None,
            )
        axis.set_title(name, fontsize=9)
        axis.set_ylabel('0 open .. 1 closed' if column == len(names) - 1 else 'rad', fontsize=8)
        axis.tick_params(labelsize=8)
    for axis in axes[len(names) :]:
        axis.set_visible(False)
    axes[0].legend(fontsize=7, loc='upper right')
    for axis in axes[-2:]:
        axis.set_xlabel('time since first query (s)', fontsize=8)
    count = len(evaluation.records)
    which = f'one in {every} of {count} chunks' if every > 1 else 'every chunk'
    figure.suptitle(f'Predicted chunks ({which}) vs recorded joints (gripper in [0, 1])')
    return _png(figure)


def horizon_error_plot(metrics: dict) -> bytes:
    """MAE per horizon step for each arm joint, their mean, and the hold-position baseline."""
    errors = metrics['errors']
    names = errors['joint_names']
    by_step_joint = np.array(errors['by_step_joint']['mae'], dtype=float)
    steps = np.arange(by_step_joint.shape[0])
    figure = Figure(figsize=(10, 4))
    axis = figure.subplots()
    for column, name in enumerate(names[:-1]):
        axis.plot(steps, by_step_joint[:, column], linewidth=0.9, alpha=0.7, label=name)
    axis.plot(
        steps,
        np.array(errors['by_step']['arm_mae'], dtype=float),
        color='black',
        linewidth=2.2,
        label='arm mean',
    )
    axis.plot(
        steps,
        np.array(metrics['hold_baseline_errors']['by_step']['arm_mae'], dtype=float),
        color='grey',
        linestyle='--',
        linewidth=1.5,
        label='hold-position baseline (arm mean)',
    )
    axis.set_xlabel('horizon step')
    axis.set_ylabel('MAE (rad)')
    axis.set_title('Error by horizon step')
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    return _png(figure)


def error_heatmap(metrics: dict) -> bytes:
    """MAE per horizon step and joint as an image."""
    errors = metrics['errors']
    mae = np.array(errors['by_step_joint']['mae'], dtype=float)
    figure = Figure(figsize=(10, 3.2))
    axis = figure.subplots()
    image = axis.imshow(mae.T, aspect='auto', cmap='magma', interpolation='nearest')
    axis.set_yticks(range(len(errors['joint_names'])), errors['joint_names'], fontsize=7)
    axis.set_xlabel('horizon step')
    axis.set_title('MAE by step and joint (arm rad, gripper [0, 1])')
    figure.colorbar(image, ax=axis)
    return _png(figure)


def latency_histogram(evaluation: Evaluation, metrics: dict) -> bytes:
    """Histogram of per-chunk inference latency with p50 and p95 marked."""
    latencies = np.array([record.latency_s for record in evaluation.records]) * 1e3
    summary = metrics['latency_s']
    figure = Figure(figsize=(8, 3.5))
    axis = figure.subplots()
    axis.hist(latencies, bins=min(40, max(5, latencies.size // 2)), color='C0', alpha=0.8)
    for key, style in (('p50', '-'), ('p95', '--')):
        value = summary[key] * 1e3
        axis.axvline(value, color='black', linestyle=style, label=f'{key} {value:.1f} ms')
    axis.set_xlabel('latency (ms)')
    axis.set_ylabel('chunks')
    axis.set_title('Inference latency')
    axis.legend()
    return _png(figure)


def all_plots(evaluation: Evaluation, metrics: dict) -> dict[str, bytes]:
    """File stem -> PNG bytes of every figure (empty where no chunk was produced)."""
    if not evaluation.records:
        return {}
    return {
        'joints': joints_plot(evaluation),
        'error_by_step': horizon_error_plot(metrics),
        'error_heatmap': error_heatmap(metrics),
        'latency': latency_histogram(evaluation, metrics),
    }
