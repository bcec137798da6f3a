# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Measure how an OpenPI server process copes with hostile or careless clients.

Starts ``dreamzero-openpi-server --preset tiny`` on the CPU as a separate process, then runs a
battery of bad inputs against it and prints one JSON report: the server's peak resident memory
growth (``VmHWM``, reset between cases through ``/proc/PID/clear_refs``) under msgpack bombs,
``/healthz`` latency meanwhile, the delay a huge prompt causes to another client's inference,
the size of error replies and of the server log for huge bad fields, what a zero-size dtype of
2^40 elements does, and whether idle connections that answer pings lock a new client out.

    .venv/bin/python scripts/openpi_abuse_check.py --idle-wait 0
    .venv/bin/python scripts/openpi_abuse_check.py --server-arg=--idle-evict-after=5 --idle-wait 8

Linux only (``/proc``). Figures depend on the machine's load: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import inspect
import json
import os
from pathlib import Path
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from dreamzero_ros.openpi import msgpack_numpy

MIB = 2**20
#: websockets >= 17.1 wants legacy=True for a connection held outside a with block.
LEGACY = {'legacy': True} if 'legacy' in inspect.signature(connect).parameters else {}


def _proc_kib(pid: int, field: str) -> int:
    text = Path(f'/proc/{pid}/status').read_text()
    return int(re.search(rf'^{field}:\s+(\d+) kB', text, re.MULTILINE).group(1))


class ServerProcess:
    """The standalone server with the tiny random engine, its log in a file."""

    def __init__(self, extra_args: list[str]) -> None:
        self._log = tempfile.NamedTemporaryFile(prefix='openpi-abuse-', suffix='.log')
        command = [sys.executable, '-m', 'dreamzero_ros.openpi.cli', '--preset', 'tiny']
        command += ['--device', 'cpu', '--num-threads', '1', '--port', '0', *extra_args]
        env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
        self.process = subprocess.Popen(command, stderr=self._log, env=env)
        self.port = self._wait_for_port()

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            match = re.search(r'listening on ws://[\d.]+:(\d+)', self.log_text())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise RuntimeError('server exited:\n' + self.log_text())
            time.sleep(0.2)
        raise TimeoutError('server did not start')

    @property
    def url(self) -> str:
        """WebSocket address of the server."""
        return f'ws://127.0.0.1:{self.port}'

    def log_text(self) -> str:
        """The server's log so far."""
        return Path(self._log.name).read_text(errors='replace')

    def log_bytes(self) -> int:
        """Size of the server's log so far."""
        return os.path.getsize(self._log.name)

    def reset_peak(self) -> int:
        """Reset the peak RSS to the current RSS; return the current RSS, KiB."""
        Path(f'/proc/{self.process.pid}/clear_refs').write_text('5')
        return _proc_kib(self.process.pid, 'VmRSS')

    def peak_kib(self) -> int:
        """Peak resident memory since the last :meth:`reset_peak`, KiB."""
        return _proc_kib(self.process.pid, 'VmHWM')

    def stop(self) -> None:
        """End the server."""
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


def open_client(url: str) -> ClientConnection:
    """A connection that has read the metadata frame."""
    ws = connect(url, compression=None, max_size=None, open_timeout=30, proxy=None, **LEGACY)
    ws.recv(timeout=30)
    return ws


def droid_request(session_id: str, prompt: str = 'put the marker in the cup') -> dict:
    """A well-formed DROID request with 180x320 frames."""
    rng = np.random.default_rng(0)
    request = {
        f'observation/{name}': rng.integers(0, 256, (180, 320, 3), dtype=np.uint8)
        for name in ('wrist_image_left', 'exterior_image_1_left', 'exterior_image_2_left')
    }
    request['observation/joint_position'] = np.zeros(7)
    request['observation/gripper_position'] = np.zeros(1)
    request['prompt'] = prompt
    request['session_id'] = session_id
    return request


def describe(reply: bytes | str | BaseException) -> dict:
    """Kind and size of a reply (or of the exception raised instead)."""
    if isinstance(reply, BaseException):
        return {'kind': type(reply).__name__, 'message': str(reply)[:200]}
    if isinstance(reply, str):
        return {'kind': 'text', 'bytes': len(reply.encode()), 'head': reply[:200]}
    return {'kind': 'binary', 'bytes': len(reply)}


def round_trip(url: str, payload: bytes, timeout: float = 300.0) -> tuple[dict, float]:
    """Send one frame on a fresh connection; the reply described and the seconds it took."""
    start = time.monotonic()
    try:
        with open_client(url) as ws:
            ws.send(payload)
            reply = ws.recv(timeout=timeout)
    except (ConnectionClosed, InvalidStatus, TimeoutError, OSError) as error:
        reply = error
    return describe(reply), time.monotonic() - start


@contextlib.contextmanager
def health_probe(port: int):
    """Poll ``/healthz`` every 20 ms in the background; yields a dict that gets ``max_ms``."""
    result = {'max_ms': 0.0, 'failures': 0, 'probes': 0}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            start = time.monotonic()
            try:
                connection = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
                connection.request('GET', '/healthz')
                connection.getresponse().read()
                connection.close()
            except OSError:
                result['failures'] += 1
            result['max_ms'] = max(result['max_ms'], (time.monotonic() - start) * 1000.0)
            result['probes'] += 1
            stop.wait(0.02)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()


def msgpack_bomb(size: int) -> bytes:
    """One msgpack array of ``size - 5`` empty maps: each byte becomes a Python dict."""
    count = size - 5
    return b'\xdd' + count.to_bytes(4, 'big') + b'\x80' * count


def case_bombs(server: ServerProcess, size: int, clients: int) -> dict:
    """``clients`` bombs of ``size`` bytes at once: peak RSS growth and /healthz latency."""
    baseline = server.reset_peak()
    payload = msgpack_bomb(size)
    results: list = [None] * clients

    def send(index: int) -> None:
        results[index] = round_trip(server.url, payload)

    with health_probe(server.port) as health:
        threads = [threading.Thread(target=send, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    growth_mib = (server.peak_kib() - baseline) / 1024
    return {
        'payload_mib': size / MIB,
        'clients': clients,
        'peak_rss_growth_mib': round(growth_mib, 1),
        'growth_per_payload': round(growth_mib / (clients * size / MIB), 1),
        'replies': [r[0] for r in results],
        'seconds': [round(r[1], 2) for r in results],
        'healthz_max_ms': round(health['max_ms'], 1),
        'healthz_failures': health['failures'],
    }


def case_big_prompt(server: ServerProcess, prompt_bytes: int) -> dict:
    """Another client's inference latency while a request with a huge prompt is served."""
    normal = msgpack_numpy.packb(droid_request('bystander'))
    with open_client(server.url) as bystander:
        start = time.monotonic()
        bystander.send(normal)
        bystander.recv(timeout=300)
        alone_s = time.monotonic() - start
        words = 'pick up the cup and put it in the sink '
        prompt = (words * (prompt_bytes // len(words) + 1))[:prompt_bytes]
        big = msgpack_numpy.packb(droid_request('big-prompt', prompt))
        outcome: dict = {}

        def send_big() -> None:
            outcome['reply'], outcome['seconds'] = round_trip(server.url, big)

        thread = threading.Thread(target=send_big)
        thread.start()
        time.sleep(0.5)  # the big request is in the server by now
        start = time.monotonic()
        bystander.send(normal)
        bystander.recv(timeout=300)
        during_s = time.monotonic() - start
        thread.join()
    return {
        'prompt_mib': round(prompt_bytes / MIB, 1),
        'bystander_alone_s': round(alone_s, 2),
        'bystander_during_s': round(during_s, 2),
        'big_request': outcome['reply'],
        'big_request_s': round(outcome['seconds'], 2),
    }


def case_echo(server: ServerProcess, name: str, payload: bytes) -> dict:
    """Reply size and server-log growth for one bad request."""
    log_before = server.log_bytes()
    reply, seconds = round_trip(server.url, payload)
    time.sleep(0.5)
    return {
        'case': name,
        'request_mib': round(len(payload) / MIB, 1),
        'reply': reply,
        'log_growth_bytes': server.log_bytes() - log_before,
        'seconds': round(seconds, 2),
    }


def zero_size_dtype_request() -> bytes:
    """A DROID request whose joint state declares 2^40 elements of a zero-size dtype."""
    request = msgpack_numpy.packb(droid_request('zero-size'))
    decoded = msgpack_numpy.msgpack.unpackb(request)
    decoded['observation/joint_position'] = {
        b'__ndarray__': True,
        b'data': b'',
        b'dtype': '|S0',
        b'shape': [2**20, 2**20],
    }
    return msgpack_numpy.msgpack.packb(decoded)


def case_idle_clients(server: ServerProcess, idle_wait_s: float, limit: int) -> dict:
    """Open idle connections until refused, then check whether a new client is served."""
    idle: list[ClientConnection] = []
    refusal = None
    while len(idle) < limit:
        try:
            idle.append(open_client(server.url))
        except InvalidStatus as error:
            refusal = str(error)
            break
    payload = msgpack_numpy.packb(droid_request('newcomer'))
    at_once, _ = round_trip(server.url, payload)
    time.sleep(idle_wait_s)
    after_wait, seconds = round_trip(server.url, payload)
    closed = 0
    for ws in idle:
        try:
            ws.recv(timeout=0.01)
        except ConnectionClosed:
            closed += 1
        except TimeoutError:
            pass
        ws.close()
    return {
        'idle_connections_accepted': len(idle),
        'refusal': refusal,
        'new_client_at_once': at_once,
        'idle_wait_s': idle_wait_s,
        'new_client_after_wait': after_wait,
        'after_wait_seconds': round(seconds, 2),
        'idle_connections_closed_by_server': closed,
    }


def main() -> int:
    """Run the battery and print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--server-arg', action='append', default=[], help='extra server argument (repeatable)'
    )
    parser.add_argument('--bomb-mib', type=float, default=16.0, help='bomb size (default 16)')
    parser.add_argument('--idle-wait', type=float, default=0.0, help='seconds before retrying')
    parser.add_argument('--idle-limit', type=int, default=40, help='most idle connections')
    args = parser.parse_args()
    bomb_size = int(args.bomb_mib * MIB) - 64
    server = ServerProcess(args.server_arg)
    report: dict = {'server_args': args.server_arg}
    try:
        warm, seconds = round_trip(server.url, msgpack_numpy.packb(droid_request('warm-up')))
        report['warm_up'] = {**warm, 'seconds': round(seconds, 2)}
        report['rss_after_warm_up_mib'] = round(server.reset_peak() / 1024, 1)
        report['bomb'] = case_bombs(server, bomb_size, 1)
        report['bomb_x3'] = case_bombs(server, bomb_size, 3)
        report['big_prompt'] = case_big_prompt(server, 15 * MIB)
        huge_endpoint = msgpack_numpy.packb({'endpoint': 'x' * (15 * MIB)})
        zeros_shape = msgpack_numpy.msgpack.packb(
            {'x': {b'__ndarray__': True, b'data': b'', b'dtype': '<f4', b'shape': [0] * 15 * MIB}}
        )
        report['echo'] = [
            case_echo(server, 'endpoint of 15 MiB', huge_endpoint),
            case_echo(server, 'array shape of 15 M zeros', zeros_shape),
            case_echo(server, 'zero-size dtype of 2^40 elements', zero_size_dtype_request()),
        ]
        report['idle_clients'] = case_idle_clients(server, args.idle_wait, args.idle_limit)
        after, _ = round_trip(server.url, msgpack_numpy.packb(droid_request('after')))
        report['served_afterwards'] = after
    finally:
        server.stop()
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
