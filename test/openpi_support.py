# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the OpenPI bridge tests.

The reference client's interpreter, the scripts, DROID clips, the tiny engine, raw requests and
a server running as a process of its own.
"""

from __future__ import annotations

import http.client
import inspect
import json
import os
from pathlib import Path
import re
import signal
import socket
import subprocess
import sys
import time

from node_support import end_process
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / 'scripts'
#: The reference client's DROID loop and its check of a server's answers (run with openpi_python).
LOOP = str(SCRIPTS / 'openpi_droid_client_loop.py')
CHECK = str(SCRIPTS / 'openpi_client_check.py')
MIB = 2**20
#: Overrides where the openpi-client interpreter is looked for.
OPENPI_PYTHON_ENV = 'OPENPI_CLIENT_PYTHON'
#: What every DreamZero server sends first by default.
CLIENT_CONFIG = {
    'image_resolution': [180, 320],
    'needs_wrist_camera': True,
    'n_external_cameras': 2,
    'needs_stereo_camera': False,
    'needs_session_id': True,
    'action_space': 'joint_position',
}


def openpi_python() -> str:
    """The Python of the venv holding the reference openpi-client; skips the test if absent."""
    candidates = [os.environ.get(OPENPI_PYTHON_ENV)] if os.environ.get(OPENPI_PYTHON_ENV) else []
    candidates.append(str(REPO / '.venv-openpi/bin/python'))
    for candidate in candidates:
        if Path(candidate).is_file():
            return candidate
    pytest.skip(
        'reference openpi-client venv not found (scripts/bootstrap.sh creates .venv-openpi; '
        f'or set {OPENPI_PYTHON_ENV}); looked at ' + ', '.join(candidates)
    )


def run_openpi(args: list[str], timeout: float = 120.0) -> dict:
    """Run a script with the openpi-client interpreter and return its JSON output."""
    result = subprocess.run(
        [openpi_python(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, 'PYTHONPATH': ''},
    )
    assert result.returncode == 0, f'{args[0]} failed:\n{result.stdout}\n{result.stderr}'
    return json.loads(result.stdout.strip().splitlines()[-1])


def droid_frames(num_frames: int) -> dict:
    """``camera -> (T, 180, 320, 3)`` uint8: the real DROID clips where present, else synthetic."""
    from dreamzero_ros.droid_clips import demo_clips

    clips, _ = demo_clips(num_frames)
    return clips


def tiny_engine(folder: Path, **settings):
    """The tiny DreamZero engine with random weights, on the CPU (``settings``: EngineConfig)."""
    from dreamzero_ros.engine import DreamZeroEngine
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
    from dreamzero_ros.engine.options import EngineOptions

    write_random_checkpoint(folder, preset='tiny')
    options = EngineOptions(device='cpu', dtype='float32')
    return DreamZeroEngine.from_pretrained(folder, options, **settings)


def droid_request(frames: dict, index: int, session_id: str | None = 'raw') -> dict:
    """A raw DROID-keyed request from ``droid_frames``."""
    request = {f'observation/{camera}': clip[index] for camera, clip in frames.items()}
    request['observation/joint_position'] = np.zeros(7)
    request['observation/gripper_position'] = np.zeros(1)
    request['prompt'] = 'wipe the table'
    if session_id is not None:
        request['session_id'] = session_id
    return request


_ADDRESSES = iter(f'127.0.{n // 250 + 10}.{n % 250 + 2}' for n in range(10**6))


def loopback_address() -> str:
    """A loopback address no other call returned: a client address with a clean record."""
    return next(_ADDRESSES)


def open_client(url: str, source: str = '127.0.0.1', **options) -> ClientConnection:
    """A raw WebSocket client from ``source`` (a loopback address) that has read the metadata.

    It answers the server's keepalive pings in the background, sending nothing otherwise.
    """
    host, port = url.removeprefix('ws://').split(':')
    sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
    # websockets >= 17.1 wants legacy=True for a connection held outside a with block.
    legacy = {'legacy': True} if 'legacy' in inspect.signature(connect).parameters else {}
    options = {'compression': None, 'max_size': None, 'open_timeout': 10, **legacy, **options}
    ws = connect(url, sock=sock, **options)
    ws.recv(timeout=10)
    return ws


def healthz(port: int, timeout: float = 5.0) -> tuple[int, bytes]:
    """Status and body of ``GET /healthz``."""
    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    connection.request('GET', '/healthz')
    response = connection.getresponse()
    return response.status, response.read()


class ServerProcess:
    """``dreamzero-openpi-server --preset tiny`` on the CPU as a process of its own.

    Its log goes to a file, so that tests can measure what a request made the server write;
    its memory is read from ``/proc``.
    """

    def __init__(self, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        command = [sys.executable, '-m', 'dreamzero_ros.openpi.cli', '--preset', 'tiny']
        command += ['--device', 'cpu', '--num-threads', '1', '--port', '0', *args]
        env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
        with open(log_path, 'wb') as log:
            self.process = subprocess.Popen(command, stderr=log, env=env)
        deadline = time.monotonic() + 300
        while True:
            match = re.search(r'listening on ws://[\d.]+:(\d+)', self.log())
            if match:
                self.port = int(match.group(1))
                break
            assert self.process.poll() is None, 'server exited:\n' + self.log()
            assert time.monotonic() < deadline, 'server did not start:\n' + self.log()
            time.sleep(0.2)

    @property
    def url(self) -> str:
        """WebSocket address of the server."""
        return f'ws://127.0.0.1:{self.port}'

    def log(self) -> str:
        """The server's log so far."""
        return self.log_path.read_text(errors='replace')

    def log_size(self) -> int:
        """Bytes of log so far."""
        return self.log_path.stat().st_size

    def reset_peak_rss(self) -> int:
        """Reset the peak resident memory to the current one; returns it, bytes."""
        Path(f'/proc/{self.process.pid}/clear_refs').write_text('5')
        return self._status_kib('VmRSS') * 1024

    def rss(self) -> int:
        """Resident memory now, bytes."""
        return self._status_kib('VmRSS') * 1024

    def peak_rss(self) -> int:
        """Peak resident memory since the last :meth:`reset_peak_rss`, bytes."""
        return self._status_kib('VmHWM') * 1024

    def _status_kib(self, field: str) -> int:
        status = Path(f'/proc/{self.process.pid}/status').read_text()
        return int(re.search(rf'^{field}:\s+(\d+) kB', status, re.MULTILINE).group(1))

    def stop(self) -> None:
        """SIGTERM, then wait; kill if it does not end."""
        end_process(self.process, 30, signal.SIGTERM)


def msgpack_bomb(size: int) -> bytes:
    """``size`` bytes of msgpack: a map holding one array of one-byte empty maps.

    Without limits, a decoder builds a Python dict per byte.
    """
    count = size - 8
    return b'\x81\xa1x\xdd' + count.to_bytes(4, 'big') + b'\x80' * count


def assert_closed(ws: ClientConnection, code: int, reason: str = '', timeout: float = 10.0) -> None:
    """The server closes ``ws`` within ``timeout`` with ``code``, its reason holding ``reason``."""
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=timeout)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == code
    assert reason in closed.value.rcvd.reason
