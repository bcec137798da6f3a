# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed and size of dreamzero-export: three 180x320 cameras at 15 Hz, Franka joints at 50 Hz.

A bag of the DROID clips (synthetic frames where they are absent) is written by
dreamzero-make-bag, raw (rgb8 Image) and JPEG (CompressedImage), in mcap; each is exported in
this process. Figures: camera frames exported per second (per camera), the bag's seconds per
second of wall time (real-time factor; above 1 is faster than real time), CPU seconds, and the
dataset's size per hour of recording. Baseline in the same run: reading the same bag through the
observation cache at the same frames (decoding every image used) without encoding or writing.

    python benchmarks/export_speed.py --frames 300
"""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
import tempfile
import time

from dreamzero_ros.export.cli import build_parser, config_from_args, recordings
from dreamzero_ros.export.exporter import export
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.bag_maker import BagSpec, make_bag
from dreamzero_ros.replay.observations import observations, query_times

CAMERAS = 3


def _timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob('*') if path.is_file())


def _read_only(bag: Path, config) -> int:
    """The baseline: every frame's observation built from the bag, nothing encoded."""
    with BagReader(bag) as reader:
        start, end = reader.start_ns / 1e9, (reader.end_ns - 1) / 1e9
        times = query_times(start, end, 1.0 / config.layout.fps)
        built = 0
        for query in observations(reader, config.topics, config.cache, times, ''):
            built += not hasattr(query.result, 'reason')
    return built


def main() -> int:
    """Print the figures of each image format, against the read-only baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--frames', type=int, default=300, help='camera frames (15 Hz)')
    parser.add_argument('--formats', nargs='+', default=['rgb8', 'jpeg'])
    options = parser.parse_args()
    print(f'cores available: {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f}')
    with tempfile.TemporaryDirectory() as folder:
        for image_format in options.formats:
            bag = Path(folder) / f'bag_{image_format}'
            spec = BagSpec(num_frames=options.frames, source='auto', image_format=image_format)
            summary = make_bag(bag, spec)
            seconds = summary['duration_s']
            config = config_from_args(build_parser().parse_args([str(bag), '--task', 'bench']))
            read_wall, read_cpu, built = _timed(functools.partial(_read_only, bag, config))
            out = Path(folder) / f'dataset_{image_format}'
            wall, cpu, result = _timed(
                functools.partial(export, recordings([str(bag)]), out, config)
            )
            frames = result.frames
            size = _size(out)
            hours = frames / config.layout.fps / 3600
            print(
                f'{image_format:5s} ({summary["frames"]}, {seconds:.1f} s of bag): '
                f'export {wall:.2f} s wall, {cpu:.2f} s CPU: {frames / wall:.0f} frames/s per '
                f'camera ({CAMERAS * frames / wall:.0f} all cameras), {seconds / wall:.1f}x real '
                f'time; read-only baseline {read_wall:.2f} s wall, {read_cpu:.2f} s CPU '
                f'({built} observations): export/baseline {wall / read_wall:.2f}x; '
                f'bag {_size(bag) / 1e6:.1f} MB, dataset {size / 1e6:.2f} MB = '
                f'{size / 1e9 / hours:.2f} GB per hour ({size / _size(bag):.3f} of the bag)'
            )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
