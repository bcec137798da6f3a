# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Hand-overs a Franka accepts: acceleration jumps and 1 kHz jerk, cubic points against quintic.

A policy that moves and disagrees with itself (a sinusoid around the Panda's ready pose plus
0.03 rad noise per row) sends 24-row chunks at DROID timing: rows at 15 Hz, a new chunk every
0.5-1 s, arriving 0.2-0.6 s after its observation, so only the first segments of each run. Each
chunk goes through the node's hand-over and safety limits (core/motion/chunk_scheduler.py,
core/motion/safety.py) and is timed within the Panda's datasheet limits two ways, in one run:

- before: points with positions and velocities (JTC draws cubics): the knot velocities of the C2
  cubic spline from the hand-over velocity to rest, segments stretched until each cubic is within
  the speed, acceleration and jerk limits, the lead-in carrying the plan in force's knots (the
  path before points carried accelerations);
- after: points with accelerations too (JTC draws quintics): the node's path now
  (:func:`~dreamzero_ros.core.motion.chunk_scheduler.plan_chunk`).

Both go through joint_trajectory_controller as sent (core/motion/jtc.py, each received 1 ms after
its chunk arrived) and its 1 kHz command is checked as a Franka checks it
(core/control/command_check.py). Prints, per joint, p50 / p95 / max of the acceleration jump at each
hand-over (rad/s^2) and of the 1 kHz jerk (rad/s^3, third differences) beside the jerk limits, the
largest acceleration against its limits, the samples a Franka would abort for, and the median
milliseconds of timing one chunk (the ratio against before).

    python benchmarks/micro_time_scaling.py [--chunks 20] [--seeds 10]
"""

from __future__ import annotations

import argparse
from collections import Counter
import statistics
import sys
import time

import numpy as np

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.control.command_check import (
    CommandLimits,
    CommandMonitor,
    differences,
    jtc_command,
)
from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.motion.chunk_scheduler import (
    ActionPlan,
    merge_chunk,
    plan_chunk,
    with_lead_in,
)
from dreamzero_ros.core.motion.safety import apply_limits
from dreamzero_ros.core.motion.spline_segments import segment_extremes
from dreamzero_ros.core.robot.panda import PANDA_READY
from dreamzero_ros.replay.handover import RECEIPT_DELAY, ChunkArrival

DT = 1 / 15
ARM = 7
#: Panda "ready" pose: the policy moves around it.
READY = np.array(PANDA_READY)


def records(seed: int, count: int) -> list[ChunkArrival]:
    """Chunks of a moving, noisy policy at DROID timing, as replay records."""
    rng = np.random.default_rng(seed)
    out = []
    stamp = 1.0
    for _ in range(count):
        steps = stamp + DT * np.arange(24)
        actions = np.full((24, ARM + 1), 0.5)
        actions[:, :ARM] = READY + 0.4 * np.sin(1.5 * steps[:, None] + np.arange(ARM))
        actions[:, :ARM] += rng.normal(0, 0.03, (24, ARM))
        out.append(
            ChunkArrival(stamp, stamp, float(rng.uniform(0.2, 0.6)), DT, actions, actions[0])
        )
        stamp += float(rng.uniform(0.5, 1.0))
    return out


def cubic_velocities(times: np.ndarray, rows: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Knot velocities of the C2 cubic spline from ``start`` to rest (before)."""
    count = len(times)
    h = np.diff(times)
    matrix = np.eye(count)
    rhs = np.zeros_like(rows)
    rhs[0] = start
    secant = np.diff(rows, axis=0) / h[:, None]
    for i in range(1, count - 1):
        matrix[i, i - 1], matrix[i, i + 1] = 1 / h[i - 1], 1 / h[i]
        matrix[i, i] = 2 * (1 / h[i - 1] + 1 / h[i])
        rhs[i] = 3 * (secant[i] / h[i] + secant[i - 1] / h[i - 1])
    return np.linalg.solve(matrix, rhs)


def cubic_plan(
    times: np.ndarray, rows: np.ndarray, start: np.ndarray, loop: LoopConfig
) -> ActionPlan | None:
    """The rows timed as cubics within the limits (before); None beyond ``max_stretch``."""
    motion = loop.motion
    base = np.diff(times)
    durations = base.copy()
    for _ in range(60):
        knots = times[0] + np.concatenate([[0.0], np.cumsum(durations)])
        velocities = cubic_velocities(knots, rows[:, :ARM], start[:ARM])
        extremes = segment_extremes(knots, rows[:, :ARM], velocities)
        need = np.maximum.reduce(
            [
                (extremes.speed / motion.max_velocity).max(axis=1),
                np.sqrt((extremes.acceleration / motion.max_acceleration).max(axis=1)),
                np.cbrt((extremes.jerk / motion.max_jerk).max(axis=1)),
            ]
        )
        if np.all(need <= 1 + 1e-9):
            full = np.zeros_like(rows)
            full[:, :ARM] = velocities
            return ActionPlan(knots, rows, full)
        durations = np.where(need > 1 + 1e-9, durations * np.maximum(need, 1.01), durations)
        if durations.sum() > base.sum() * motion.max_stretch:
            return None
    return None


def cubic_lead_in(plan: ActionPlan, previous: ActionPlan, now: float) -> ActionPlan:
    """``plan`` after the knots of ``previous`` from ``now`` (before: no accelerations)."""
    if previous.end_time <= now or plan.start_time - now < 1e-6:
        return plan
    inside = (previous.times > now + 1e-6) & (previous.times < plan.start_time - 1e-6)
    return ActionPlan(
        np.concatenate([[now], previous.times[inside], plan.times]),
        np.vstack([previous.position_at(now), previous.rows[inside], plan.rows]),
        np.vstack([previous.velocity_at(now), previous.velocities[inside], plan.velocities]),
        handover_time=plan.start_time,
    )


def cubic_plans(chunks: list[ChunkArrival], loop: LoopConfig, spent: list[float]):
    """(arrival, plan) of each chunk with cubic points (before)."""
    timed: list[tuple[float, ActionPlan]] = []
    for record in chunks:
        now = record.query_time + record.latency_s
        base = timed[-1][1] if timed else ActionPlan.hold(record.state, now)
        merged = merge_chunk(
            base, record.actions, record.stamp, DT, now, loop.blend, loop.motion.lead
        )
        if merged is None:
            continue
        verdict = apply_limits(merged.rows[1:], merged.rows[0], loop.limits)
        begin = time.perf_counter()
        rows = np.vstack([merged.rows[0], verdict.rows])
        plan = cubic_plan(merged.times, rows, base.velocity_at(merged.times[0]), loop)
        spent.append(time.perf_counter() - begin)
        if plan is not None:
            timed.append((now, cubic_lead_in(plan, base, now)))
    return timed


def quintic_plans(chunks: list[ChunkArrival], loop: LoopConfig, spent: list[float]):
    """(arrival, plan) of each chunk as the node builds it now (after)."""
    timed: list[tuple[float, ActionPlan]] = []
    for record in chunks:
        now = record.query_time + record.latency_s
        base = timed[-1][1] if timed else ActionPlan.hold(record.state, now)
        begin = time.perf_counter()
        planned = plan_chunk(
            base,
            record.actions,
            record.stamp,
            DT,
            now,
            loop.blend,
            loop.limits,
            loop.motion,
            loop.motion.lead,
        )
        spent.append(time.perf_counter() - begin)
        if planned.smoothed is not None and planned.smoothed.plan is not None:
            timed.append((now, with_lead_in(planned.smoothed.plan, base, now)))
    return timed


def figures(runs: list[list[tuple[float, ActionPlan]]], loop: LoopConfig) -> dict:
    """Jumps, 1 kHz jerk and accelerations of the runs' JTC commands, and a Franka's checks."""
    jumps, jerks, accelerations, plans = [], [], [], 0
    violations: Counter[str] = Counter()
    for timed in runs:
        command = jtc_command(timed, ARM, RECEIPT_DELAY)
        monitor = CommandMonitor(CommandLimits.of_loop(loop))  # each run is one robot
        monitor.feed(command.positions)
        violations.update(monitor.violations)
        _, acceleration, jerk = differences(command.positions)
        jumps.append(command.jumps)
        jerks.append(np.abs(jerk))
        accelerations.append(np.abs(acceleration))
        plans += len(timed)
    return {
        'plans': plans,
        'jump': np.concatenate(jumps),
        'jerk': np.concatenate(jerks),
        'acceleration': np.concatenate(accelerations).max(axis=0),
        'violations': dict(violations),
    }


def table(name: str, values: np.ndarray, limit: np.ndarray | None, unit: str) -> None:
    """p50 / p95 / max per joint, with the limit where given."""
    tail = ' / limit' if limit is not None else ''
    print(f'  {name} ({unit}), p50 / p95 / max per joint{tail}')
    for joint in range(ARM):
        column = values[:, joint]
        figures = (np.percentile(column, 50), np.percentile(column, 95), column.max())
        row = ' '.join(f'{v:9.3g}' for v in figures)
        if limit is not None:
            row += f' / {limit[joint]:7.0f}  ({column.max() / limit[joint]:.2f}x)'
        print(f'    joint {joint + 1}: {row}')


def main(argv: list[str] | None = None) -> int:
    """Print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--chunks', type=int, default=20, help='chunks per run (default 20)')
    parser.add_argument('--seeds', type=int, default=10, help='runs (default 10)')
    args = parser.parse_args(argv)
    loop = build_settings({'engine.checkpoint': 'unused'}).loop  # the Panda's limits
    motion = loop.motion
    print(
        f'{args.seeds} runs x {args.chunks} chunks of 24 rows at 15 Hz, a chunk every 0.5-1 s, '
        f'received {RECEIPT_DELAY * 1e3:.0f} ms after arrival; Panda datasheet limits'
    )
    base_ms = None
    for name, build in (
        ('before: positions + velocities (cubic)', cubic_plans),
        ('after: positions + velocities + accelerations (quintic)', quintic_plans),
    ):
        spent: list[float] = []
        runs = [build(records(seed, args.chunks), loop, spent) for seed in range(args.seeds)]
        result = figures(runs, loop)
        ms = statistics.median(spent) * 1e3
        base_ms = base_ms or ms
        print(f'\n{name}: {result["plans"]} plans, {len(result["jump"])} hand-overs')
        print(f'  timing one chunk: {ms:.2f} ms median ({ms / base_ms:.2f}x before)')
        table('hand-over acceleration jump', result['jump'], None, 'rad/s^2')
        table('1 kHz jerk', result['jerk'], motion.max_jerk, 'rad/s^3')
        ratio = result['acceleration'] / motion.max_acceleration
        print(
            '  largest 1 kHz acceleration / limit per joint: ' + ' '.join(f'{r:.2f}' for r in ratio)
        )
        violations = result['violations']
        print(
            '  samples a Franka aborts for: '
            + (', '.join(f'{k} {v}' for k, v in violations.items()) or 'none')
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
