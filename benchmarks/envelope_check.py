# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Cost of the safety envelope check of one 24-point chunk (core/motion/envelope.py), on one core.

The packaged Panda URDF through pinocchio, the default envelope (flange and both fingertips,
1 cm resolution) with a table and a keep-out box. Chunks of 24 rows at 15 Hz, smoothed as the
node smooths them: the demo robot's slow motion, the same motion eight times faster, and a
chunk driving the hand into the table (cut into a braking hold). Baseline in the same run:
forward kinematics and the same checks at the 24 waypoints only (what a waypoint check costs).

    python benchmarks/envelope_check.py --repeats 300
"""

from __future__ import annotations

from importlib import resources
import statistics

from bench_timing import one_core_options, timed_ms
import numpy as np

from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan, smooth_plan
from dreamzero_ros.core.motion.envelope import Envelope, EnvelopeConfig
from dreamzero_ros.core.motion.trajectory import MotionConfig
from dreamzero_ros.core.robot.panda import PANDA_ARM_JOINTS, PANDA_LOWER, PANDA_UPPER
from dreamzero_ros.droid_clips import demo_joint_trajectory

ARM = PANDA_ARM_JOINTS
LOWER, UPPER = np.array(PANDA_LOWER), np.array(PANDA_UPPER)
TIMES = np.arange(24) / 15
BUDGET_MS = 2.0


def _plan(joints: np.ndarray) -> ActionPlan:
    rows = np.hstack([joints, np.zeros((len(joints), 1))])
    smoothed = smooth_plan(TIMES, rows, np.zeros(8), np.zeros(8), LOWER, UPPER, MotionConfig())
    assert smoothed.plan is not None, smoothed.reason
    return smoothed.plan


def chunks() -> dict[str, ActionPlan]:
    """The benchmark's chunks by name."""
    slow, _ = demo_joint_trajectory(2.0 + TIMES)
    fast, _ = demo_joint_trajectory(2.0 + 8 * TIMES)
    down = slow[0] + np.minimum(1.0, np.arange(1, 25) / 18)[:, None] * np.eye(7)[1]
    return {
        'demo motion': _plan(slow),
        'demo motion x8': _plan(fast),
        'into the table': _plan(down),
    }


def main() -> int:
    """Print the cost of each chunk's check, against the waypoint-only baseline."""
    options = one_core_options(__doc__.splitlines()[0])
    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    config = EnvelopeConfig(table_height=0.15, keep_out=(((0.6, 0.3, 0.0), (0.9, 0.6, 0.4)),))
    envelope = Envelope.from_description(urdf, ARM, config)
    motion = MotionConfig()
    print(f'envelope check of a 24-point chunk, 1 core (cpu {options.cpu}), {options.repeats} runs')
    print(f'{"chunk":<16} {"samples":>7} {"cut":>4} {"median ms":>10} {"p95 ms":>8} '
          f'{"waypoints ms":>13} {"ratio":>6}')  # fmt: skip
    worst = 0.0
    for name, plan in chunks().items():
        result = envelope.cut(plan, LOWER, UPPER, motion)

        def check(plan: ActionPlan = plan) -> None:
            envelope.cut(plan, LOWER, UPPER, motion)

        def waypoints(plan: ActionPlan = plan) -> None:
            envelope.slack(envelope.points.positions(plan.rows[:, :7])).min()

        check()
        full = timed_ms(None, check, options.repeats)
        base = timed_ms(None, waypoints, options.repeats)
        median = statistics.median(full)
        p95 = statistics.quantiles(full, n=20)[-1]
        if result.violation is None:
            worst = max(worst, median)
        print(
            f'{name:<16} {result.samples:>7} {"yes" if result.violation else "no":>4} '
            f'{median:>10.3f} {p95:>8.3f} {statistics.median(base):>13.3f} '
            f'{median / statistics.median(base):>6.1f}'
        )
    print(f'largest median of a chunk kept whole: {worst:.3f} ms (budget {BUDGET_MS} ms)')
    return 0 if worst <= BUDGET_MS else 1


if __name__ == '__main__':
    raise SystemExit(main())
