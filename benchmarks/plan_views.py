# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Cost of the plan in 3D per chunk and per control tick (ros/plan_views.py), on one core.

The packaged Panda URDF through pinocchio, the flange in ``panda_link0``: the end-effector path
of a 24-row chunk (forward kinematics, then the nav_msgs/Path message), one executed-path step
(FK of one joint row, its pose message, the Path of the most poses kept). Messages are
built and serialized (what a publish does). Baseline in the same run: the JointTrajectory
message the node builds and sends for the same chunk anyway.

    python benchmarks/plan_views.py --repeats 300
"""

from __future__ import annotations

from importlib import resources
import statistics

from bench_timing import one_core_options, timed_ms
from nav_msgs.msg import Path
import numpy as np
from rclpy.serialization import serialize_message

from dreamzero_ros.core.motion.plan_geometry import ExecutedPath, description_fk, end_effector_path
from dreamzero_ros.core.robot.panda import PANDA_ARM_JOINTS
from dreamzero_ros.droid_clips import demo_joint_trajectory
from dreamzero_ros.ros.conversions import ROS_MESSAGES
from dreamzero_ros.ros.plan_views import EXECUTED_POINTS, path_msg, pose_msg

ARM = PANDA_ARM_JOINTS
TIMES = np.arange(24) / 15


def _ms(fn, repeats: int) -> float:
    return statistics.median(timed_ms(None, fn, repeats))


def main() -> int:
    """Print the median cost of each step, against the trajectory message's."""
    options = one_core_options(__doc__.splitlines()[0])
    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    fk, frame = description_fk(urdf, ARM, 'panda_link8', 'panda_link0')
    rows, _ = demo_joint_trajectory(2.0 + TIMES)
    stamp = 1000.0
    times = stamp + TIMES
    points = end_effector_path(fk, rows)
    executed = ExecutedPath(fk, EXECUTED_POINTS, min_distance=0.0)
    for index in range(EXECUTED_POINTS):
        executed.add(stamp + index / 15, rows[index % len(rows)])
    kept = [pose_msg(frame, t, p) for t, p in zip(executed.times, executed.points, strict=True)]

    def trajectory() -> None:
        stamp_ns = round(stamp * 1e9)
        serialize_message(
            ROS_MESSAGES.trajectory(
                stamp_ns, list(ARM), [round(t * 1e9) - stamp_ns for t in times], rows, 0 * rows
            )
        )

    steps = {
        'chunk FK (24 rows)': lambda: end_effector_path(fk, rows),
        'chunk Path msg': lambda: serialize_message(path_msg(frame, stamp, times, points)),
        'executed FK (1 row)': lambda: end_effector_path(fk, rows[:1]),
        'executed pose msg (1 new)': lambda: pose_msg(frame, *executed.last),
        f'executed Path msg ({EXECUTED_POINTS} kept poses)': lambda: serialize_message(
            Path(poses=list(kept))
        ),
    }
    base = _ms(trajectory, options.repeats)
    print(f'plan views, 1 core (cpu {options.cpu}), {options.repeats} runs, median ms')
    print(f'{"baseline: JointTrajectory msg (24 rows)":<40} {base:>8.3f} {"1.0":>6}')
    for name, step in steps.items():
        median = _ms(step, options.repeats)
        print(f'{name:<40} {median:>8.3f} {median / base:>6.1f}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
