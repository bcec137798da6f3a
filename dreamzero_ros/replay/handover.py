# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Hand-over quality of replayed chunks: velocity and acceleration steps where chunks meet.

:func:`command_plans` rebuilds the arm command the policy node would have sent from the replayed
chunks, with the node's own hand-over, safety limits and knots (core/motion/chunk_scheduler,
core/motion/safety, core/motion/trajectory), each chunk taking over at ``query_time + latency``.
:func:`boundary_steps` measures, at every hand-over time ``t``, the change of velocity and of
acceleration across ``t`` on a grid of one control step ``dt``: ``|v(t, t+dt) - v(t-dt, t)|``
and the same for second differences. :func:`handover_quality` reports these figures for the
command and, at the same times, for the recorded robot motion (the reference): a smooth
hand-over shows steps no larger than the robot's own motion does; and what
joint_trajectory_controller commands at 1 kHz from these plans (core/control/command_check.py),
against the limits (:func:`command_figures`): accelerations, the acceleration jump at each
hand-over, the jerk of the 1 kHz samples, and the checks a Franka applies to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from dreamzero_ros.core.control.command_check import (
    CommandLimits,
    CommandMonitor,
    differences,
    jtc_command,
)
from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, plan_chunk, with_lead_in
from dreamzero_ros.core.motion.spline_segments import segment_extremes
from dreamzero_ros.replay.metrics import distribution


class ChunkArrival(NamedTuple):
    """What :func:`command_plans` reads of a chunk (a replay's ``ChunkRecord`` has it too).

    Attributes:
        query_time: when the policy was asked, s.
        stamp: time of the chunk's first row, s.
        latency_s: how long the answer took: it arrives at ``query_time + latency_s``.
        step_duration: seconds between rows.
        actions: the rows, ``(horizon, width)``.
        state: the state measured when the policy was asked (the hold before the first chunk).

    """

    query_time: float
    stamp: float
    latency_s: float
    step_duration: float
    actions: np.ndarray
    state: np.ndarray


def command_plans(records: Sequence, loop: LoopConfig) -> list[ActionPlan]:
    """The plans the node would have commanded for ``records`` (in order), as the node builds them.

    Chunks the node would not use (late, refused by the limits) are left out.
    """
    return [plan for _, plan in timed_command_plans(records, loop)]


def timed_command_plans(records: Sequence, loop: LoopConfig) -> list[tuple[float, ActionPlan]]:
    """:func:`command_plans`, each with the time its chunk arrived."""
    plans: list[tuple[float, ActionPlan]] = []
    for record in records:
        now = record.query_time + record.latency_s
        base = plans[-1][1] if plans else ActionPlan.hold(record.state, now)
        planned = plan_chunk(
            base,
            record.actions,
            record.stamp,
            record.step_duration,
            now,
            loop.blend,
            loop.limits,
            loop.motion,
            loop.motion.lead,
        )
        if planned.smoothed is not None and planned.smoothed.plan is not None:
            plans.append((now, with_lead_in(planned.smoothed.plan, base, now)))
    return plans


def boundary_steps(
    boundaries: np.ndarray, sample: Callable[[np.ndarray], np.ndarray], dt: float
) -> dict[str, float | None]:
    """Largest velocity and acceleration step across ``boundaries`` of the curve ``sample``.

    ``sample(times)`` returns positions ``(len(times), D)``; NaN samples are left out.
    """
    if len(boundaries) == 0:
        return {'velocity_step_max': None, 'acceleration_step_max': None}
    offsets = dt * np.arange(-2, 3)
    p = np.stack([sample(t + offsets) for t in boundaries])  # (B, 5, D)
    v_before, v_after = (p[:, 2] - p[:, 1]) / dt, (p[:, 3] - p[:, 2]) / dt
    a_before = (p[:, 2] - 2 * p[:, 1] + p[:, 0]) / dt**2
    a_after = (p[:, 4] - 2 * p[:, 3] + p[:, 2]) / dt**2
    velocity, acceleration = np.abs(v_after - v_before), np.abs(a_after - a_before)
    return {
        'velocity_step_max': float(np.nanmax(velocity)) if np.isfinite(velocity).any() else None,
        'acceleration_step_max': float(np.nanmax(acceleration))
        if np.isfinite(acceleration).any()
        else None,
    }


def handover_quality(
    records: Sequence, reference: Callable[[np.ndarray], np.ndarray], loop: LoopConfig
) -> dict[str, object]:
    """Velocity (rad/s) and acceleration (rad/s^2) steps at hand-overs: command vs recorded."""
    timed = timed_command_plans(records, loop)
    plans = [plan for _, plan in timed]
    arm = loop.motion.arm_joints
    dt = float(records[0].step_duration) if records else 1.0
    boundaries = np.array([plan.start_time for plan in plans[1:]])

    def command(times: np.ndarray) -> np.ndarray:
        index = np.searchsorted([plan.start_time for plan in plans], times, side='right') - 1
        out = np.full((len(times), arm), np.nan)
        for i, t in enumerate(times):
            if index[i] >= 0:
                out[i] = plans[index[i]].position_at(t)[:arm]
        return out

    return {
        'hand_overs': int(len(boundaries)),
        'step_s': dt,
        'command': boundary_steps(boundaries, command, dt),
        'recorded': boundary_steps(boundaries, lambda t: reference(t)[:, :arm], dt),
        'accelerations': command_figures(timed, loop),
    }


#: Seconds from a chunk's arrival to its receipt by the controller (a local DDS delivery).
RECEIPT_DELAY = 1e-3


def _per_joint(values: np.ndarray) -> dict[str, list[float]]:
    """p50 / p95 / max per joint of ``(M, N)`` values (empty lists without any)."""
    if not len(values):
        return {'p50': [], 'p95': [], 'max': []}
    return {
        'p50': np.percentile(values, 50, axis=0).tolist(),
        'p95': np.percentile(values, 95, axis=0).tolist(),
        'max': values.max(axis=0).tolist(),
    }


def command_figures(
    timed: Sequence[tuple[float, ActionPlan]], loop: LoopConfig, delay: float = RECEIPT_DELAY
) -> dict[str, object]:
    """What joint_trajectory_controller commands at 1 kHz from ``timed`` plans, against the limits.

    Each plan reaches the controller ``delay`` after its chunk arrived. ``segment`` is the
    distribution over the plans' segments of their largest acceleration (rad/s^2, over the arm
    joints; exact); ``max`` per joint the largest acceleration of the 1 kHz command, ``limit``
    the acceleration limits (None without) and ``ratio_max`` the largest ``max / limit``;
    ``jump`` the acceleration jump at each hand-over and ``jerk`` the jerk of the 1 kHz samples
    (rad/s^3, third differences as a Franka computes them), p50 / p95 / max per joint, beside
    ``jerk_limit`` and ``jerk_ratio_max``; ``violations`` the 1 kHz samples a Franka would
    abort the motion for, by its error's name.
    """
    motion = loop.motion
    arm = motion.arm_joints
    segments = []
    for _, plan in timed:
        if len(plan.times) > 1:
            fields = [
                None if values is None else values[:, :arm]
                for values in (plan.velocities, plan.accelerations)
            ]
            segments.append(
                segment_extremes(plan.times, plan.rows[:, :arm], *fields).acceleration.max(axis=1)
            )
    command = jtc_command(timed, arm, delay)
    _, acceleration, jerk = differences(command.positions)
    acceleration, jerk = np.abs(acceleration), np.abs(jerk)
    monitor = CommandMonitor(CommandLimits.of_loop(loop))
    if len(command.positions):
        monitor.feed(command.positions)
    largest = acceleration.max(axis=0) if len(acceleration) else np.zeros(arm)
    worst_jerk = jerk.max(axis=0) if len(jerk) else np.zeros(arm)

    def ratio(values: np.ndarray, limit: np.ndarray | None) -> float | None:
        return None if limit is None or not timed else float(np.max(values / limit))

    return {
        'segment': distribution(np.concatenate(segments) if segments else np.array([])),
        'max': largest.tolist(),
        'limit': None if motion.max_acceleration is None else motion.max_acceleration.tolist(),
        'ratio_max': ratio(largest, motion.max_acceleration),
        'jump': _per_joint(command.jumps),
        'jerk': _per_joint(jerk),
        'jerk_limit': None if motion.max_jerk is None else motion.max_jerk.tolist(),
        'jerk_ratio_max': ratio(worst_jerk, motion.max_jerk),
        'violations': dict(monitor.violations),
    }
