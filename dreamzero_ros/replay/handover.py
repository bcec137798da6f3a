# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Hand-over quality of replayed chunks: velocity and acceleration steps where chunks meet.

:func:`command_plans` rebuilds the arm command the policy node would have sent from the replayed
chunks, with the node's own hand-over, safety limits and knot velocities (core/chunk_scheduler,
core/safety, core/trajectory), each chunk taking over at ``query_time + latency``.
:func:`boundary_steps` measures, at every hand-over time ``t``, the change of velocity and of
acceleration across ``t`` on a grid of one control step ``dt``: ``|v(t, t+dt) - v(t-dt, t)|``
and the same for second differences. :func:`handover_quality` reports these figures for the
command and, at the same times, for the recorded robot motion (the reference): a smooth
hand-over shows steps no larger than the robot's own motion does; and the command's
accelerations, on its segments and on the hand-over segments joint_trajectory_controller builds,
against the acceleration limits (:func:`acceleration_figures`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dreamzero_ros.core.chunk_scheduler import ActionPlan, merge_chunk, smooth_plan, with_lead_in
from dreamzero_ros.core.control_loop import LoopConfig
from dreamzero_ros.core.safety import apply_limits
from dreamzero_ros.core.time_scaling import cubic_extremes, jtc_curve_extremes
from dreamzero_ros.replay.metrics import distribution


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
        merged = merge_chunk(
            base,
            record.actions,
            record.stamp,
            record.step_duration,
            now,
            loop.blend,
            loop.motion.lead,
        )
        if merged is None:
            continue
        verdict = apply_limits(merged.rows[1:], merged.rows[0], loop.limits)
        if verdict.refused:
            continue
        smoothed = smooth_plan(
            merged.times,
            np.vstack([merged.rows[0], verdict.rows]),
            base.velocity_at(merged.times[0]),
            loop.limits.lower,
            loop.limits.upper,
            loop.motion,
        )
        if smoothed.plan is not None:
            plans.append((now, with_lead_in(smoothed.plan, base, now)))
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
        'accelerations': acceleration_figures(timed, loop),
    }


def acceleration_figures(
    timed: Sequence[tuple[float, ActionPlan]], loop: LoopConfig
) -> dict[str, object]:
    """Accelerations (rad/s^2) of the commanded curve against the limits.

    ``segment`` is the distribution over the plans' segments of their largest acceleration
    (over the arm joints; exact on each cubic); ``max`` per joint, on the whole curve;
    ``hand_over_max`` per joint on the segments joint_trajectory_controller builds from its
    state at the receipt of each plan (received anywhere from its chunk's arrival to
    ``motion.lead`` later; sampled) to the plan's points; ``limit`` per joint (None without
    acceleration limits) and ``ratio_max``, the largest of ``max / limit`` and
    ``hand_over_max / limit``.
    """
    motion = loop.motion
    arm = motion.arm_joints
    limit = motion.max_acceleration
    segments: list[np.ndarray] = []
    whole, hand_over = np.zeros(arm), np.zeros(arm)
    for index, (now, plan) in enumerate(timed):
        if len(plan.times) > 1:
            _, acceleration, _ = cubic_extremes(
                plan.times, plan.rows[:, :arm], plan.velocities[:, :arm]
            )
            segments.append(acceleration.max(axis=1))
            whole = np.maximum(whole, acceleration.max(axis=0))
        if index == 0:
            continue
        previous = timed[index - 1][1]
        for received in np.linspace(now, now + motion.lead, 5):
            state = previous.position_at(received)[:arm], previous.velocity_at(received)[:arm]
            _, acceleration = jtc_curve_extremes(
                state, received, plan.times, plan.rows[:, :arm], plan.velocities[:, :arm], 20
            )
            hand_over = np.maximum(hand_over, acceleration)
    ratio = None
    if limit is not None and timed:
        ratio = float(np.max(np.maximum(whole, hand_over) / limit))
    return {
        'segment': distribution(np.concatenate(segments) if segments else np.array([])),
        'max': whole.tolist(),
        'hand_over_max': hand_over.tolist(),
        'limit': None if limit is None else limit.tolist(),
        'ratio_max': ratio,
    }
