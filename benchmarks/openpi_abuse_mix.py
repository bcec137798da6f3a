# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Good clients' latency on the OpenPI bridge with and without clients sending only bad requests.

The server runs in its own process with a policy that answers at once (the bridge's own cost is
what abusers can take); 6 good clients send DROID requests (224x224, as sim-evals) in lockstep,
each from its own thread here, while 4 abusive clients, each in its own process, send only
requests the server refuses: a 15 MiB map holding a msgpack bomb (refused after its first
10000 objects), a 15 MiB array (not a map), three 720p int16 frames out of the pixel range
(decoded, then refused) and a small request with an unknown endpoint, in turn, reconnecting
whenever the server closes them. A short run first warms up (not printed); then three runs
side by side: no abusers; the abusers against the default refusal limits; the abusers against
a server without them (``refusal_burst`` and ``refusal_rate_per_s`` huge, never closed).
Printed: the good clients' p50 / p95 latency and requests served, each against the run
without abusers, and the refused requests the abusers got answered. All clients use
loopback, so the per-address connection cap is raised to 64 and the sessions to 16.

    python benchmarks/openpi_abuse_mix.py --seconds 15
"""

from __future__ import annotations

import argparse
import multiprocessing
from pathlib import Path
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from dreamzero_ros.core import image_resize
from dreamzero_ros.droid_clips import synthetic_clips
from dreamzero_ros.openpi import OpenPIServer, ServerConfig, msgpack_numpy
from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk, Observation

GOOD_CLIENTS = 6
ABUSERS = 4
MIB = 2**20


class InstantPolicy:
    """Returns a constant (24, 8) chunk without doing any work."""

    metadata = {'image_resolution': (180, 320), 'n_external_cameras': 2}

    def infer(self, observation: Observation) -> ActionChunk:
        """A constant chunk."""
        return ActionChunk(actions=np.zeros((24, 8), np.float32), stamp=observation.stamp)

    def reset(self, session_id: str = 'default') -> None:
        """Nothing to forget."""


def serve(port_file: str, limits: bool) -> None:
    """The server process: serve until killed; the port goes to ``port_file``."""
    settings = {'port': 0, 'max_connections': 64, 'max_connections_per_client': 64}
    settings['max_sessions'] = 16
    if not limits:
        settings |= {'refusal_burst': 10**9, 'refusal_rate_per_s': 1e9, 'close_after_refusals': 0}
    handle = OpenPIServer(InstantPolicy(), ServerConfig(**settings)).start()
    Path(port_file).write_text(str(handle.port))
    while True:
        time.sleep(3600)


def _bad_requests() -> list[bytes]:
    count = 15 * MIB
    bomb = b'\x81\xa1x\xdd' + count.to_bytes(4, 'big') + b'\x80' * count
    array = b'\xdd' + count.to_bytes(4, 'big') + b'\x80' * count
    frame = np.full((720, 1280, 3), 300, np.int16)  # decoded, then refused: outside [0, 255]
    pixels = {f'observation/{camera}': frame for camera in DROID_CAMERAS}
    pixels |= {'observation/joint_position': np.zeros(7), 'prompt': 'x'}
    unknown = msgpack_numpy.packb({'endpoint': 'nonsense'})
    return [bomb, array, msgpack_numpy.packb(pixels), unknown]


def abuse(url: str, seconds: float, answered: multiprocessing.Value) -> None:
    """One abusive client (its own process): bad requests only, reconnecting when closed."""
    bad = _bad_requests()
    end = time.monotonic() + seconds
    index = 0
    while time.monotonic() < end:
        try:
            with connect(url, compression=None, max_size=None, open_timeout=10) as ws:
                ws.recv(timeout=10)
                while time.monotonic() < end:
                    ws.send(bad[index % len(bad)])
                    index += 1
                    ws.recv(timeout=max(0.1, end - time.monotonic()))
                    with answered.get_lock():
                        answered.value += 1
        except (ConnectionClosed, InvalidStatus, TimeoutError, OSError):
            time.sleep(0.05)


def _good(url: str, requests: list[bytes], seconds: float, times: list[float]) -> None:
    end = time.monotonic() + seconds
    with connect(url, compression=None, max_size=None) as ws:
        ws.recv()
        index = 0
        while time.monotonic() < end:
            start = time.perf_counter()
            ws.send(requests[index % len(requests)])
            reply = ws.recv()
            assert isinstance(reply, bytes), reply
            times.append((time.perf_counter() - start) * 1000.0)
            index += 1


def _run(limits: bool, abusers: int, seconds: float, requests: list[bytes]) -> dict:
    port_file = Path(f'/tmp/openpi-abuse-mix-{time.monotonic_ns()}.port')
    command = [sys.executable, __file__, '--serve', str(port_file)]
    server = subprocess.Popen([*command, *([] if limits else ['--no-limits'])])
    try:
        while not port_file.exists() or not port_file.read_text():
            if server.poll() is not None:
                raise RuntimeError('the server exited')
            time.sleep(0.1)
        url = f'ws://127.0.0.1:{port_file.read_text()}'
        answered = multiprocessing.Value('i', 0)
        bad = [
            multiprocessing.Process(target=abuse, args=(url, seconds + 2, answered))
            for _ in range(abusers)
        ]
        for process in bad:
            process.start()
        time.sleep(1.0 if abusers else 0.0)  # the abusers are at it
        times: list[list[float]] = [[] for _ in range(GOOD_CLIENTS)]
        threads = [
            threading.Thread(target=_good, args=(url, requests, seconds, times[i]))
            for i in range(GOOD_CLIENTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for process in bad:
            process.join()
        served = [t for client in times for t in client]
        return {'times': served, 'refused_answered': answered.value}
    finally:
        server.kill()
        server.wait()
        port_file.unlink(missing_ok=True)


def main() -> int:
    """Run the three mixes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=15.0, help='per run')
    parser.add_argument('--serve', help=argparse.SUPPRESS)
    parser.add_argument('--no-limits', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, not args.no_limits)
        return 0
    frames = synthetic_clips(8, height=720, width=1280)
    requests = []
    for index in range(8):
        request = {
            f'observation/{camera}': image_resize.resize_with_pad(frames[camera][index], 224, 224)
            for camera in DROID_CAMERAS
        }
        request |= {
            'observation/joint_position': np.zeros(7),
            'observation/gripper_position': np.zeros(1),
            'prompt': 'put the marker in the cup',
        }
        requests.append(msgpack_numpy.packb(request))
    _run(True, 0, 3.0, requests)  # warm-up
    runs = {
        'no abusers': _run(True, 0, args.seconds, requests),
        f'{ABUSERS} abusers, refusal limits (default)': _run(True, ABUSERS, args.seconds, requests),
        f'{ABUSERS} abusers, no refusal limits': _run(False, ABUSERS, args.seconds, requests),
    }
    base = runs['no abusers']['times']
    base_p50 = statistics.median(base)
    print(f'{GOOD_CLIENTS} good clients, {args.seconds:g} s per run')
    header = f'{"run":<40} {"p50 ms":>8} {"p95 ms":>8} {"p50 x":>6} {"served":>7} {"refused":>8}'
    print(header)
    for label, run in runs.items():
        times = sorted(run['times'])
        p50 = statistics.median(times)
        p95 = times[max(0, int(0.95 * len(times)) - 1)]
        print(
            f'{label:<40} {p50:8.1f} {p95:8.1f} {p50 / base_p50:6.2f} {len(times):7d} '
            f'{run["refused_answered"]:8d}'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
