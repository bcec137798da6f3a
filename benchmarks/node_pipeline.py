# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's own cost: by stage, under input floods, and against the engine alone.

Runs the demo system (policy node on ``config/cpu_small.yaml``, the demo stream of DROID clips
as three 320x180 rgb8 cameras, a listener in this process) three times in one run:

- ``baseline``: cameras and joint states at 15 Hz;
- ``joints 1 kHz``: the same, plus a separate process publishing joint states at 1 kHz
  (``joint_state_flood.py``, a Franka joint_state_broadcaster's rate);
- ``images 60 Hz``: the stream at 60 Hz.

With ``--views`` it runs instead: ``unwatched`` (nobody subscribes to the view topics), ``3
viewers, beside`` (three processes watching every view topic, ``views.yield_to_engine:=false``:
the predicted video decoded beside every inference, as before that option) and ``3 viewers,
yield`` (the default: decoded only while no inference is in flight, at a lower priority), with
the views' decoded and skipped chunks.

For each it prints the end-to-end latency (observation stamp -> chunk received by the listener),
the node's inference time (its ``inference_p50_ms``: work the node does per message slows the
engine's thread too), the node process's CPU use over the measured chunks (share of one core, and
CPU seconds per chunk), and the node's own
stage timings from its diagnostics (inputs read -> inference start; inference end -> trajectory
published; both taken inside the node), with the ratios of each flood to the baseline. Then it
calls the same engine directly in this process, one call at a time, with the same thread count.

    python benchmarks/node_pipeline.py --preset small --chunks 8
"""

import argparse
from dataclasses import dataclass
import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

FLOOD_SCRIPT = Path(__file__).resolve().with_name('joint_state_flood.py')
WATCHER_SCRIPT = Path(__file__).resolve().with_name('view_watcher.py')
STAGES = ('observation_to_query', 'chunk_to_publish')
#: The views decoded beside every inference (the behaviour before views.yield_to_engine).
VIEWS_BESIDE = ('views.yield_to_engine:=false',)


@dataclass(frozen=True)
class Scenario:
    """One run of the demo system."""

    name: str
    stream_rate: float = 15.0
    joint_flood_rate: float = 0.0
    viewers: int = 0
    node_parameters: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    """What one scenario measured."""

    end_to_end: list[float]
    node_cpu: float
    node_cpu_per_chunk: float
    stages: dict[str, tuple[float, float]]
    report: dict[str, str]
    flood: str


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _run(scenario: Scenario, checkpoint: Path, chunks: int, threads: int, logs: Path) -> Result:
    from dreamzero_ros.demo import demo_system

    with demo_system(
        checkpoint,
        logs / scenario.name.replace(' ', '_').replace(',', ''),
        node_parameters=(f'engine.num_threads:={threads}', *scenario.node_parameters),
        stream_rate=scenario.stream_rate,
    ) as demo:
        flood = None
        if scenario.joint_flood_rate:
            flood = subprocess.Popen(
                [sys.executable, str(FLOOD_SCRIPT), '--rate', str(scenario.joint_flood_rate)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        watchers = [
            subprocess.Popen(
                [sys.executable, str(WATCHER_SCRIPT)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for _ in range(scenario.viewers)
        ]
        for watcher in watchers:
            watcher.stdout.readline()  # 'watching'

        try:
            if not demo.wait_chunks(1, 600.0):
                raise RuntimeError(f'{scenario.name}: no chunk within 600 s')
            cpu, wall = _cpu_seconds(demo.node.pid), time.monotonic()
            if not demo.wait_chunks(chunks + 1, 600.0):
                raise RuntimeError(f'{scenario.name}: timed out')
            cpu = _cpu_seconds(demo.node.pid) - cpu
            node_cpu = cpu / (time.monotonic() - wall)
        finally:
            extras = []
            if flood is not None:
                flood.send_signal(signal.SIGINT)
                extras.append(f'flood: {flood.communicate(timeout=20)[0].strip()}')
            for watcher in watchers:
                watcher.send_signal(signal.SIGINT)
                extras.append(f'viewer: {watcher.communicate(timeout=20)[0].strip()}')
            flood_output = '; '.join(extras)
        report = dict(demo.listener.diagnostics)
        end_to_end = [chunk.latency for chunk in demo.listener.chunks[1:]]
    stages = {
        stage: (
            float(report.get(f'{stage}_p50_ms', 'nan')),
            float(report.get(f'{stage}_p95_ms', 'nan')),
        )
        for stage in STAGES
    }
    return Result(end_to_end, node_cpu, cpu / chunks, stages, report, flood_output)


def _direct_inference(checkpoint: Path, calls: int, threads: int) -> list[float]:
    from dreamzero_ros.droid_clips import demo_clips, demo_joint_trajectory
    from dreamzero_ros.engine.loader import load_engine
    from dreamzero_ros.engine.options import EngineOptions
    from dreamzero_ros.policy_types import Observation

    options = EngineOptions(device='cpu', dtype='float32', num_threads=threads)
    engine = load_engine(checkpoint, options)
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


def _print_results(results: dict[str, Result]) -> None:
    base = next(iter(results.values()))
    base_p50 = float(np.median(base.end_to_end))
    print(
        f'{"":20s}{"e2e p50":>9s}{"e2e p95":>9s}{"x base":>8s}{"infer p50":>11s}{"e2e/infer":>11s}'
        f'{"CPU":>6s}{"CPU/chunk":>11s}{"x base":>8s}'
        f'{"obs->query p50/p95":>21s}{"chunk->pub p50/p95":>21s}'
    )
    for name, result in results.items():
        p50 = float(np.median(result.end_to_end))
        p95 = float(np.percentile(result.end_to_end, 95))
        infer = float(result.report.get('inference_p50_ms', 'nan'))
        stages = ''.join(f'{f"{a:.2f} / {b:.2f} ms":>21s}' for a, b in result.stages.values())
        print(
            f'{name:20s}{1000 * p50:8.0f} {1000 * p95:8.0f} {p50 / base_p50:7.2f} '
            f'{infer:10.0f} {1000 * p50 / infer:10.2f} '
            f'{100 * result.node_cpu:4.0f} % {result.node_cpu_per_chunk:8.3f} s '
            f'{result.node_cpu_per_chunk / base.node_cpu_per_chunk:7.2f}{stages}'
        )
    for name, result in results.items():
        report = result.report
        print(
            f'{name}: {report.get("frames_received")} frames and '
            f'{report.get("joint_states_received", "?")} joint states read, '
            f'{report.get("messages_dropped", 0)} messages dropped'
            + (f'; {result.flood}' if result.flood else '')
            + (
                f'; views: {report["views_chunks_decoded"]} chunks decoded, '
                f'{report.get("views_chunks_skipped", "-")} skipped'
                if 'views_chunks_decoded' in report
                else ''
            )
        )


def main() -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--preset', default='small', choices=('tiny', 'small'))
    parser.add_argument('--chunks', type=int, default=8, help='chunks measured (after 1 warm-up)')
    parser.add_argument('--threads', type=int, default=1, help='engine.num_threads of the node')
    parser.add_argument('--cache-dir', type=Path, default=None)
    parser.add_argument('--no-direct', action='store_true', help='skip the direct engine calls')
    parser.add_argument(
        '--views', action='store_true', help='unwatched against three viewers, beside and yielding'
    )
    options = parser.parse_args()

    from dreamzero_ros.demo import DEFAULT_CACHE, demo_checkpoint

    checkpoint, _ = demo_checkpoint(options.cache_dir or DEFAULT_CACHE, options.preset)
    scenarios = (
        Scenario('baseline'),
        Scenario('joints 1 kHz', joint_flood_rate=1000.0),
        Scenario('images 60 Hz', stream_rate=60.0),
    )
    if options.views:
        scenarios = (
            Scenario('unwatched'),
            Scenario('3 viewers, beside', viewers=3, node_parameters=VIEWS_BESIDE),
            Scenario('3 viewers, yield', viewers=3),
        )
    results = {}
    with tempfile.TemporaryDirectory() as logs:
        for scenario in scenarios:
            results[scenario.name] = _run(
                scenario, checkpoint, options.chunks, options.threads, Path(logs)
            )
    print(
        f'preset {options.preset}, {options.chunks} chunks after one warm-up per run, '
        f'{options.threads} torch threads, 3 cameras 320x180 rgb8'
    )
    _print_results(results)
    if options.no_direct:
        return 0
    direct = _direct_inference(checkpoint, options.chunks + 1, options.threads)[1:]
    direct_p50 = float(np.median(direct))
    base_p50 = float(np.median(next(iter(results.values())).end_to_end))
    print(
        f'engine.infer called directly: p50 {1000 * direct_p50:.0f} ms, p95 '
        f'{1000 * np.percentile(direct, 95):.0f} ms; baseline end-to-end / direct (p50) '
        f'{base_p50 / direct_p50:.3f}'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
