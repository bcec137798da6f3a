# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Measure what the OpenPI bridge adds to one inference, against calling the policy directly.

A policy that returns a fixed chunk at once isolates the bridge: request packing, the WebSocket
round trip on loopback, unpacking, undoing ``resize_with_pad``, resizing to 180x320, the
worker-thread hand-off and the reply. Printed per client image size, with the direct call as
the baseline; ``--engine-preset tiny`` adds a row with the real tiny engine behind the bridge.

    python benchmarks/openpi_bridge.py --requests 50
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from websockets.sync.client import connect

from dreamzero_ros.core.observations import image_resize
from dreamzero_ros.droid_clips import synthetic_clips
from dreamzero_ros.engine.loader import load_engine
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.openpi import OpenPIServer, ServerConfig, msgpack_numpy
from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk, Observation


class InstantPolicy:
    """Returns a constant (24, 8) chunk without doing any work."""

    metadata = {'image_resolution': (180, 320), 'n_external_cameras': 2}

    def infer(self, observation: Observation) -> ActionChunk:
        """A constant chunk."""
        return ActionChunk(actions=np.zeros((24, 8), np.float32), stamp=observation.stamp)

    def reset(self, session_id: str = 'default') -> None:
        """Nothing to forget."""


def _request(frames: dict, index: int, size: tuple[int, int]) -> dict:
    request = {
        f'observation/{camera}': image_resize.resize_with_pad(clip[index % len(clip)], *size)
        for camera, clip in frames.items()
    }
    request['observation/joint_position'] = np.zeros(7)
    request['observation/gripper_position'] = np.zeros(1)
    request['prompt'] = 'put the marker in the cup'
    request['session_id'] = 'bench'
    return request


def _bridge_ms(url: str, requests: list[bytes]) -> list[float]:
    times = []
    with connect(url, compression=None, max_size=None) as ws:
        ws.recv()
        for message in requests:
            start = time.perf_counter()
            ws.send(message)
            ws.recv()
            times.append((time.perf_counter() - start) * 1000.0)
    return times


def _direct_ms(policy, frames: dict, count: int) -> list[float]:
    times = []
    for index in range(count):
        observation = Observation(
            images={camera: clip[index % len(clip)] for camera, clip in frames.items()},
            joint_position=np.zeros(7),
            gripper_position=np.zeros(1),
            prompt='put the marker in the cup',
            session_id='bench-direct',
        )
        start = time.perf_counter()
        policy.infer(observation)
        times.append((time.perf_counter() - start) * 1000.0)
    policy.reset('bench-direct')
    return times


def _row(label: str, times: list[float], baseline: float) -> str:
    median = statistics.median(times)
    p95 = sorted(times)[max(0, int(0.95 * len(times)) - 1)]
    return f'{label:<34} {median:9.2f} {p95:9.2f} {median - baseline:+11.2f}'


def main() -> int:
    """Run the measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--requests', type=int, default=50, help='requests per row')
    parser.add_argument('--engine-preset', choices=('tiny', 'small'), default=None)
    args = parser.parse_args()
    frames = synthetic_clips(8, height=720, width=1280)
    frames = {camera: frames[camera] for camera in DROID_CAMERAS}
    small = {camera: image_resize.resize(clip, 180, 320) for camera, clip in frames.items()}

    policy = InstantPolicy()
    handle = OpenPIServer(policy, ServerConfig(port=0)).start()
    direct = _direct_ms(policy, small, args.requests)
    baseline = statistics.median(direct)
    print(f'{"path":<34} {"p50 ms":>9} {"p95 ms":>9} {"vs direct":>11}')
    print(_row('direct policy call (180x320)', direct, baseline))
    try:
        for size in ((180, 320), (224, 224), (720, 1280)):
            packed = [msgpack_numpy.packb(_request(frames, i, size)) for i in range(args.requests)]
            label = f'bridge, client sends {size[0]}x{size[1]}'
            print(_row(label, _bridge_ms(handle.url, packed), baseline))
    finally:
        handle.stop()

    if args.engine_preset:
        engine = load_engine(None, EngineOptions(device='cpu'), preset=args.engine_preset)
        count = max(3, args.requests // 10)
        direct = _direct_ms(engine, small, count)
        engine_baseline = statistics.median(direct)
        print(_row(f'direct {args.engine_preset} engine (180x320)', direct, engine_baseline))
        handle = OpenPIServer(engine, ServerConfig(port=0)).start()
        try:
            packed = [msgpack_numpy.packb(_request(frames, i, (224, 224))) for i in range(count)]
            label = f'bridge + {args.engine_preset} engine, 224x224'
            print(_row(label, _bridge_ms(handle.url, packed), engine_baseline))
        finally:
            handle.stop()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
