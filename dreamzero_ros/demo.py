# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-demo``: the policy node on a small model over a demo robot stream, over real DDS.

Three processes: the policy node (``config/cpu_small.yaml`` with a random-weight checkpoint of
the ``small`` preset, written once to a cache folder by the real checkpoint writer and loaded by
the real loader), the demo stream (the real DROID clips where present, synthetic frames
otherwise, and a joint trajectory), and this listener, which prints each action chunk and its
latency, then a summary.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
import contextlib
from dataclasses import dataclass
import os
from pathlib import Path
import random
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np

from dreamzero_ros.droid_clips import CLIP_FPS, CLIPS_ENV, find_clips_dir
from dreamzero_ros.engine.loader import cached_random_checkpoint

DEFAULT_CACHE = Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'dreamzero_ros'


def config_file(name: str) -> Path:
    """A config file of the package: from the source tree, else from the install's share."""
    source = Path(__file__).resolve().parents[1] / 'config' / name
    if source.is_file():
        return source
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory('dreamzero_ros')) / 'config' / name


def demo_checkpoint(cache_dir: Path, preset: str) -> tuple[Path, bool]:
    """The random-weight checkpoint of ``preset`` in ``cache_dir``, written on first use."""
    return cached_random_checkpoint(cache_dir, preset)


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, 'w') as out:
        return subprocess.Popen(
            [sys.executable, '-m', *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _fmt(row: np.ndarray) -> str:
    return '[' + ' '.join(f'{v:+.3f}' for v in row) + ']'


@dataclass
class DemoRun:
    """The running demo processes and the listener collecting their output."""

    node: subprocess.Popen
    listener: Any
    executor: Any
    logs: Path

    def wait_chunks(
        self, count: int, timeout: float, on_chunk: Callable[[Any], None] = lambda chunk: None
    ) -> bool:
        """Spin until ``count`` chunks arrived (``on_chunk`` sees each); False on timeout.

        Raises:
            RuntimeError: the policy node exited.

        """
        deadline = time.monotonic() + timeout
        self.listener.max_chunks = count
        seen = 0
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.2)
            if self.node.poll() is not None:
                raise RuntimeError(
                    f'the policy node exited ({self.node.returncode}); see '
                    f'{self.logs}/policy_node.log'
                )
            for chunk in self.listener.chunks[seen:]:
                on_chunk(chunk)
                seen += 1
            if seen >= count:
                # the node's diagnostics after the last chunk (published every second)
                reports = self.listener.diagnostics_received
                end = time.monotonic() + 2.0
                while self.listener.diagnostics_received == reports and time.monotonic() < end:
                    self.executor.spin_once(timeout_sec=0.1)
                return True
        return False


@contextlib.contextmanager
def demo_system(
    checkpoint: Path,
    logs: Path,
    transport: str = 'raw',
    node_parameters: tuple[str, ...] = (),
    stream_rate: float = CLIP_FPS,
) -> Iterator[DemoRun]:
    """Start the policy node (cpu_small.yaml on ``checkpoint``), the stream and a listener.

    Picks a random ROS_DOMAIN_ID (100-200) and loopback discovery unless the environment sets
    them. ``node_parameters`` are extra ``name:=value`` overrides; the stream publishes every
    camera and the joint states at ``stream_rate`` Hz.
    """
    env = dict(os.environ)
    env.setdefault('ROS_DOMAIN_ID', str(random.randint(100, 200)))
    env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    env['PYTHONUNBUFFERED'] = '1'
    os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE')})
    logs.mkdir(parents=True, exist_ok=True)
    config = config_file('cpu_small.yaml')
    print(f'ROS_DOMAIN_ID={env["ROS_DOMAIN_ID"]}; node config {config}; logs in {logs}')
    clips = find_clips_dir()
    print(
        f'camera frames: the real DROID clips in {clips}'
        if clips is not None
        else f'camera frames: synthetic (DROID clips not found; set {CLIPS_ENV})'
    )
    overrides = [f'engine.checkpoint:={checkpoint}', 'engine.warmup:=false', *node_parameters]
    node_args = ['dreamzero_ros.ros.policy_node_main', '--ros-args', '--params-file', str(config)]
    for override in overrides:
        node_args += ['-p', override]
    node = _start(node_args, env, logs / 'policy_node.log')
    stream = _start(
        [
            'dreamzero_ros.ros.demo_stream',
            '--frames',
            '90',
            '--transport',
            transport,
            '--rate',
            str(stream_rate),
        ],
        env,
        logs / 'demo_stream.log',
    )
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from dreamzero_ros.ros.demo_listener import DemoListener

    rclpy.init()
    listener = DemoListener()
    executor = SingleThreadedExecutor()
    executor.add_node(listener)
    try:
        yield DemoRun(node, listener, executor, logs)
    finally:
        executor.shutdown()
        listener.destroy_node()
        rclpy.try_shutdown()
        _stop(node)  # first: it holds and shuts down before its inputs go stale
        _stop(stream)


def _print_chunk(chunk: Any) -> None:
    print(
        f'chunk {chunk.chunk_id}: actions {chunk.shape}, observation stamp {chunk.stamp:.3f}, '
        f'latency {chunk.latency:.2f} s, first row {_fmt(chunk.first_row)}'
    )


def run(options: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    checkpoint, written = demo_checkpoint(options.cache_dir, options.preset)
    print(
        f'{"wrote" if written else "using"} a random-weight {options.preset!r} DreamZero '
        f'checkpoint at {checkpoint} (real layout, random weights: the actions are not '
        'meaningful, the pipeline is real)'
    )
    logs = options.cache_dir / 'logs'
    with demo_system(checkpoint, logs, options.transport) as demo:
        try:
            done = demo.wait_chunks(options.chunks, options.timeout, _print_chunk)
        except RuntimeError as error:
            print(error)
            return 1
        print(demo.listener.summary(time.monotonic() - start))
    if not done:
        print(f'timed out after {options.timeout:.0f} s; see {logs}/policy_node.log')
        return 1
    return 0


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-demo``."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-demo',
        description='Run the DreamZero policy node on a small random-weight model over a demo '
        'robot stream (real DROID clips where present) and print its action chunks.',
    )
    parser.add_argument('--chunks', type=int, default=3, help='chunks to print before stopping')
    parser.add_argument(
        '--preset', default='small', choices=('tiny', 'small'), help='engine preset'
    )
    parser.add_argument('--transport', default='raw', choices=('raw', 'compressed'))
    parser.add_argument(
        '--cache-dir', type=Path, default=DEFAULT_CACHE, help='where the checkpoint is kept'
    )
    parser.add_argument('--timeout', type=float, default=240.0, help='give up after seconds')
    return run(parser.parse_args(args))


if __name__ == '__main__':
    sys.exit(main())
