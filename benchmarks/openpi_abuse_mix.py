# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Good clients' latency and the server's memory on the OpenPI bridge, with and without abusers.

The server runs in its own process with the default limits and a policy of real latency: each
inference takes ``--latency-ms`` (100 ms, sleeping: a GPU inference leaves the CPU to the
server). 6 good clients send DROID requests (224x224, as sim-evals) in lockstep from 127.0.0.1,
each from its own thread here. With abusers, 4 more addresses (127.0.0.2-5, one process each)
each keep ``--abuser-connections`` connections (12: more than the per-address cap) busy with
requests the server refuses, in turn: a 15 MiB map holding a msgpack bomb, a 15 MiB array (not
a map), three 720p int16 frames out of the pixel range (decoded, then refused), a request with
an unknown endpoint and a 24 MiB frame (over the payload cap); every connection reconnects at
once when it is closed or refused. During the abuse a new client from 127.0.0.6 connects and
sends one request (it must get a slot and an answer). A short run first warms up (not printed),
then two runs of the same server code in this process: no abusers, abusers. Printed per run:
the good clients' p50 / p95 latency and requests served, each against the run without abusers
(goal: at most 1.2x), the abusers' refusals answered and handshakes refused, the newcomer's
answer and latency, and the server's resident memory before the abusers start, at its peak
and 3 s after they stopped.

    python benchmarks/openpi_abuse_mix.py --seconds 15
"""

from __future__ import annotations

import argparse
import multiprocessing
from pathlib import Path
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from dreamzero_ros.core.observations import image_resize
from dreamzero_ros.droid_clips import synthetic_clips
from dreamzero_ros.openpi import OpenPIServer, ServerConfig, msgpack_numpy
from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk, Observation

GOOD_CLIENTS = 6
ABUSIVE_ADDRESSES = [f'127.0.0.{i}' for i in range(2, 6)]
NEWCOMER = '127.0.0.6'
MIB = 2**20


class LatencyPolicy:
    """Returns a constant (24, 8) chunk after ``latency_s`` (sleeping, as a GPU frees the CPU)."""

    metadata = {'image_resolution': (180, 320), 'n_external_cameras': 2}

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    def infer(self, observation: Observation) -> ActionChunk:
        """A constant chunk, after the latency."""
        time.sleep(self.latency_s)
        return ActionChunk(actions=np.zeros((24, 8), np.float32), stamp=observation.stamp)

    def reset(self, session_id: str = 'default') -> None:
        """Nothing to forget."""


def serve(port_file: str, latency_s: float) -> None:
    """The server process: default limits, serve until killed; the port goes to ``port_file``."""
    config = ServerConfig(port=0, max_sessions=16)
    handle = OpenPIServer(LatencyPolicy(latency_s), config).start()
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
    oversized = b'\x81\xa1x\xc6' + (24 * MIB).to_bytes(4, 'big') + bytes(24 * MIB)
    return [bomb, array, msgpack_numpy.packb(pixels), unknown, oversized]


def _connect(url: str, source: str, timeout: float = 10.0):  # noqa: ANN202 - a connection
    host, port = url.removeprefix('ws://').split(':')
    sock = socket.create_connection((host, int(port)), timeout=timeout, source_address=(source, 0))
    return connect(url, sock=sock, compression=None, max_size=None, open_timeout=timeout)


def _abuse_loop(url: str, source: str, end: float, counts: dict, lock: threading.Lock) -> None:
    bad = _bad_requests()
    index = 0
    while time.monotonic() < end:
        try:
            with _connect(url, source) as ws:
                ws.recv(timeout=10)
                while time.monotonic() < end:
                    ws.send(bad[index % len(bad)])
                    index += 1
                    ws.recv(timeout=max(0.1, end - time.monotonic()))
                    with lock:
                        counts['answered'] += 1
        except InvalidStatus:
            with lock:
                counts['handshakes_refused'] += 1
        except (ConnectionClosed, TimeoutError, OSError):
            with lock:
                counts['closed'] += 1


def abuse(url: str, source: str, connections: int, seconds: float, totals) -> None:  # noqa: ANN001
    """One abusive address (its own process): ``connections`` loops of refused requests."""
    counts = {'answered': 0, 'handshakes_refused': 0, 'closed': 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds
    threads = [
        threading.Thread(target=_abuse_loop, args=(url, source, end, counts, lock))
        for _ in range(connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with totals.get_lock():
        totals[0] += counts['answered']
        totals[1] += counts['handshakes_refused']
        totals[2] += counts['closed']


def _good(url: str, requests: list[bytes], seconds: float, times: list[float]) -> None:
    end = time.monotonic() + seconds
    with _connect(url, '127.0.0.1') as ws:
        ws.recv()
        index = 0
        while time.monotonic() < end:
            start = time.perf_counter()
            ws.send(requests[index % len(requests)])
            reply = ws.recv()
            assert isinstance(reply, bytes), reply
            times.append((time.perf_counter() - start) * 1000.0)
            index += 1


def _newcomer(url: str, request: bytes, result: dict) -> None:
    start = time.perf_counter()
    try:
        with _connect(url, NEWCOMER) as ws:
            ws.recv(timeout=30)
            ws.send(request)
            reply = ws.recv(timeout=30)
            result['answer'] = 'served' if isinstance(reply, bytes) else f'error {reply[:60]}'
    except InvalidStatus as error:
        result['answer'] = f'HTTP {error.response.status_code}'
    except (ConnectionClosed, TimeoutError, OSError) as error:
        result['answer'] = type(error).__name__
    result['ms'] = (time.perf_counter() - start) * 1000.0


def _rss_mib(pid: int, field: str = 'VmRSS') -> float:
    status = Path(f'/proc/{pid}/status').read_text()
    return int(re.search(rf'^{field}:\s+(\d+) kB', status, re.MULTILINE).group(1)) / 1024


def _run(
    port: int, pid: int, abusive: bool, seconds: float, requests: list[bytes], connections: int
) -> dict:
    url = f'ws://127.0.0.1:{port}'
    rss_before = _rss_mib(pid)
    Path(f'/proc/{pid}/clear_refs').write_text('5')  # VmHWM from here
    totals = multiprocessing.Array('l', 3)
    bad = [
        multiprocessing.Process(target=abuse, args=(url, source, connections, seconds + 2, totals))
        for source in (ABUSIVE_ADDRESSES if abusive else [])
    ]
    for process in bad:
        process.start()
    time.sleep(1.0 if abusive else 0.0)  # the abusers are at it
    times: list[list[float]] = [[] for _ in range(GOOD_CLIENTS)]
    threads = [
        threading.Thread(target=_good, args=(url, requests, seconds, times[i]))
        for i in range(GOOD_CLIENTS)
    ]
    newcomer: dict = {}
    if abusive:
        threads.append(threading.Thread(target=_newcomer, args=(url, requests[0], newcomer)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for process in bad:
        process.join()
    peak = _rss_mib(pid, 'VmHWM')
    time.sleep(3.0)
    return {
        'times': [t for client in times for t in client],
        'answered': totals[0],
        'handshakes_refused': totals[1],
        'newcomer': newcomer,
        'rss': (rss_before, peak, _rss_mib(pid)),
    }


def main() -> int:
    """Run the mixes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=15.0, help='per run')
    parser.add_argument('--latency-ms', type=float, default=100.0, help='per inference')
    parser.add_argument(
        '--abuser-connections', type=int, default=12, help='connections per abusive address'
    )
    parser.add_argument('--serve', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms / 1000.0)
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
            'session_id': f'good-{index % GOOD_CLIENTS}',
        }
        requests.append(msgpack_numpy.packb(request))
    port_file = Path(f'/tmp/openpi-abuse-mix-{time.monotonic_ns()}.port')
    server = subprocess.Popen([sys.executable, __file__, '--serve', str(port_file)])
    try:
        while not port_file.exists() or not port_file.read_text():
            if server.poll() is not None:
                raise RuntimeError('the server exited')
            time.sleep(0.1)
        port = int(port_file.read_text())
        _run(port, server.pid, False, 3.0, requests, 0)  # warm-up
        runs = {
            'no abusers': _run(port, server.pid, False, args.seconds, requests, 0),
            f'{len(ABUSIVE_ADDRESSES)} abusive addresses x {args.abuser_connections}': _run(
                port, server.pid, True, args.seconds, requests, args.abuser_connections
            ),
        }
    finally:
        server.kill()
        server.wait()
        port_file.unlink(missing_ok=True)
    base = sorted(runs['no abusers']['times'])
    base_p50 = statistics.median(base)
    base_p95 = base[max(0, int(0.95 * len(base)) - 1)]
    print(
        f'{GOOD_CLIENTS} good clients, {args.seconds:g} s per run, policy '
        f'{args.latency_ms:g} ms per inference, default server limits'
    )
    print(
        f'{"run":<34} {"p50 ms":>7} {"p95 ms":>7} {"p50 x":>6} {"p95 x":>6} {"served":>6} '
        f'{"refused":>7} {"503/429":>7} {"newcomer":>16} {"RSS MiB before/peak/after":>26}'
    )
    for label, run in runs.items():
        times = sorted(run['times'])
        p50 = statistics.median(times)
        p95 = times[max(0, int(0.95 * len(times)) - 1)]
        newcomer = run['newcomer']
        arrival = f'{newcomer["answer"]} {newcomer["ms"]:.0f} ms' if newcomer else '-'
        rss = '/'.join(f'{value:.0f}' for value in run['rss'])
        print(
            f'{label:<34} {p50:7.1f} {p95:7.1f} {p50 / base_p50:6.2f} {p95 / base_p95:6.2f} '
            f'{len(times):6d} {run["answered"]:7d} {run["handshakes_refused"]:7d} '
            f'{arrival:>16} {rss:>26}'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
