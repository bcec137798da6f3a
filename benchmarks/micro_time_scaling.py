# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What time scaling costs per chunk, and the accelerations it removes.

A policy that moves and disagrees with itself (a sinusoid plus 0.03 rad noise per 15 Hz row,
chunks of 24 rows every 0.4 s, arriving 0.2-0.6 s after their observation) goes through the
node's hand-over, safety limits and trajectory path twice: with the speed limit only (as the node
before acceleration limits) and with the Panda's datasheet acceleration and jerk limits. Prints
the median milliseconds of ``smooth_plan`` per chunk (and the ratio), and the accelerations
(rad/s^2) of the commanded curve: per segment (median / p95 / max over segments, largest joint)
and on the hand-over segments joint_trajectory_controller builds, against the limits.

    python benchmarks/micro_time_scaling.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from types import SimpleNamespace

import numpy as np

from dreamzero_ros.core.chunk_scheduler import smooth_plan
from dreamzero_ros.core.control_loop import LoopConfig
from dreamzero_ros.core.node_config import build_settings
from dreamzero_ros.replay.handover import acceleration_figures, timed_command_plans

DT = 1 / 15
ARM = 7


def records(seed: int, count: int) -> list[SimpleNamespace]:
    """Chunks of a moving, noisy policy, as replay records."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        stamp = 1.0 + 0.4 * k
        steps = stamp + DT * np.arange(24)
        actions = np.zeros((24, ARM + 1))
        actions[:, :ARM] = 0.4 * np.sin(2.0 * steps[:, None] + np.arange(ARM))
        actions[:, :ARM] += rng.normal(0, 0.03, (24, ARM))
        actions[:, 3] -= 1.5  # panda_joint4 lives below zero
        actions[:, ARM] = 0.5
        latency = float(rng.uniform(0.2, 0.6))
        out.append(
            SimpleNamespace(
                query_time=stamp,
                stamp=stamp,
                latency_s=latency,
                step_duration=DT,
                actions=actions,
                state=actions[0],
            )
        )
    return out


def smooth_ms(loop: LoopConfig, chunks: list[np.ndarray]) -> float:
    """Median milliseconds of one ``smooth_plan`` of a 24-row chunk."""
    times = []
    for rows in chunks:
        begin = time.perf_counter()
        smooth_plan(
            DT * np.arange(24),
            rows,
            np.full(ARM + 1, 0.2),
            loop.limits.lower,
            loop.limits.upper,
            loop.motion,
        )
        times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def main() -> int:
    """Print the table."""
    panda = build_settings({'engine.checkpoint': 'unused'}).loop
    speed_only = dataclasses.replace(
        panda, motion=dataclasses.replace(panda.motion, max_acceleration=None, max_jerk=None)
    )
    chunks = [r.actions for seed in range(5) for r in records(seed, 10)]
    print(
        'limits                      ms/chunk  segment p50 / p95 / max  hand-over max  '
        'max |a| / limit'
    )
    base_ms = None
    for name, loop in (('speed limit only', speed_only), ('Panda acc. + jerk', panda)):
        ms = smooth_ms(loop, chunks)
        base_ms = base_ms or ms
        segment, hand_over, ratio = [], 0.0, 0.0
        for seed in range(10):
            figures = acceleration_figures(timed_command_plans(records(seed, 12), loop), loop)
            segment.append(figures['segment'])
            hand_over = max(hand_over, max(figures['hand_over_max']))
            ratio = max(
                ratio,
                max(
                    max(a, h) / limit
                    for a, h, limit in zip(
                        figures['max'],
                        figures['hand_over_max'],
                        panda.motion.max_acceleration,
                        strict=True,
                    )
                ),
            )
        p50 = statistics.median(s['p50'] for s in segment)
        p95 = statistics.median(s['p95'] for s in segment)
        peak = max(s['max'] for s in segment)
        print(
            f'{name:27s} {ms:6.2f} ({ms / base_ms:4.2f}x)  {p50:6.1f} / {p95:6.1f} / '
            f'{peak:6.1f}    {hand_over:8.1f}      {ratio:6.2f}'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
