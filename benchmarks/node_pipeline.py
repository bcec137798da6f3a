# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the ROS layer adds to a chunk's latency: the node over DDS vs the engine called directly.

Runs the demo system (policy node on ``config/cpu_small.yaml``, the demo stream of DROID clips,
a listener) for ``--chunks`` chunks, then calls the same engine on the same checkpoint directly in
this process, one call at a time, with the same thread count. Prints per-chunk figures and the
ratio of the end-to-end latency (observation stamp -> chunk received by another process) to the
direct ``engine.infer`` time.

    python benchmarks/node_pipeline.py --preset small --chunks 8
"""

import argparse
from pathlib import Path
import sys
import tempfile
import time

import numpy as np


def _direct_inference(checkpoint: Path, calls: int, threads: int) -> list[float]:
    from dreamzero_ros.droid_clips import demo_clips, demo_joint_trajectory
    from dreamzero_ros.engine.loader import load_engine
    from dreamzero_ros.policy_types import Observation

    engine = load_engine(checkpoint, device='cpu', dtype='float32', num_threads=threads)
    clips, _ = demo_clips(calls)
    joints, gripper = demo_joint_trajectory(np.arange(calls) / 15.0)
    seconds = []
    for index in range(calls):
        observation = Observation(
            images={camera: clip[index] for camera, clip in clips.items()},
            joint_position=joints[index],
            gripper_position=gripper[index],
            prompt='pick up the marker and put it in the cup',
        )
        start = time.perf_counter()
        engine.infer(observation)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--preset', default='small', choices=('tiny', 'small'))
    parser.add_argument('--chunks', type=int, default=8, help='chunks measured (after 1 warm-up)')
    parser.add_argument('--threads', type=int, default=1, help='engine.num_threads of the node')
    parser.add_argument('--cache-dir', type=Path, default=None)
    options = parser.parse_args()

    from dreamzero_ros.demo import DEFAULT_CACHE, demo_checkpoint, demo_system

    cache = options.cache_dir or DEFAULT_CACHE
    checkpoint, _ = demo_checkpoint(cache, options.preset)
    with tempfile.TemporaryDirectory() as logs:
        with demo_system(
            checkpoint, Path(logs), node_parameters=(f'engine.num_threads:={options.threads}',)
        ) as demo:
            if not demo.wait_chunks(options.chunks + 1, 600.0):
                print('timed out', file=sys.stderr)
                return 1
            end_to_end = [chunk.latency for chunk in demo.listener.chunks[1:]]
            node_report = demo.listener.diagnostics
    direct = _direct_inference(checkpoint, options.chunks + 1, options.threads)[1:]
    e2e_p50, direct_p50 = float(np.median(end_to_end)), float(np.median(direct))
    print(
        f'preset {options.preset}, {options.chunks} chunks after one warm-up, '
        f'{options.threads} torch threads'
    )
    print(f'{"":32s}{"p50 ms":>10s}{"p95 ms":>10s}')
    for label, values in (
        ('engine.infer, direct', direct),
        ('node: observation -> listener', end_to_end),
    ):
        print(
            f'{label:32s}{1000 * np.median(values):10.1f}{1000 * np.percentile(values, 95):10.1f}'
        )
    print(
        f'node-reported inference p50 {node_report.get("inference_p50_ms")} ms, latency p50 '
        f'{node_report.get("latency_p50_ms")} ms, {node_report.get("frames_received")} frames '
        f'received, {node_report.get("frames_dropped")} dropped'
    )
    print(
        f'ratio end-to-end / direct (p50): {e2e_p50 / direct_p50:.3f}; '
        f'ROS layer adds {1000 * (e2e_p50 - direct_p50):.1f} ms'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
