# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node with ``engine.backend: remote`` (an OpenPI server with an API key), JPEG frames."""

import socket
import sys
import time

from closed_loop import Peer
from node_support import ARM, NODE, is_hold
import pytest

from dreamzero_ros.core.config.node_config import PARAMETERS
from dreamzero_ros.engine.workers.protocol import free_port

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0
#: The remote server's key; the node reads it from a file, no parameter shows it.
KEY = 'remote-key-91c2'


def _wait_listening(port: int, server: Peer, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.process.poll() is not None:
            pytest.fail(f'OpenPI server exited with {server.process.returncode}')
        with socket.socket() as sock:
            if sock.connect_ex(('127.0.0.1', port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f'OpenPI server not listening on {port} after {timeout} s')


def _chunk_trajectories(harness) -> list:
    """Controller trajectories answering observations (holds have a zero stamp)."""
    return [m for m in harness.messages('controller') if not is_hold(m)]


def test_remote_backend_with_a_key_file_and_compressed_frames_gives_trajectories(
    tmp_path, closed_loop
):
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    key_file = tmp_path / 'remote_key'
    key_file.write_text(KEY + '\n')
    key_file.chmod(0o600)
    port = free_port()
    loop = closed_loop('remote_harness')
    harness = loop.harness
    server = loop.start_peer(
        'server',
        [sys.executable, '-m', 'dreamzero_ros.openpi.cli', '--checkpoint', str(checkpoint),
         '--device', 'cpu', '--num-threads', '1', '--port', str(port),
         '--api-key-file', str(key_file)],
        grace=20.0,
    )  # fmt: skip
    _wait_listening(port, server, 60)
    harness.record('controller', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    node = loop.start_node(
        'engine.backend:=remote',
        f'engine.remote_uri:=ws://127.0.0.1:{port}',
        f'engine.remote_api_key_file:={key_file}',
        'engine.warmup:=false',
        'image_transport:=compressed',
    )
    clips, _ = demo_clips(15)
    loop.stream_cameras(clips, joint_states=True, compressed=True)
    harness.wait_for(
        lambda: len(_chunk_trajectories(harness)) >= 2,
        TIMEOUT,
        'two chunks through the remote policy',
        node.log,
    )
    chunks = _chunk_trajectories(harness)
    assert all(m.joint_names == ARM for m in chunks)
    assert 'connecting to the OpenPI server' in node.log()
    values = harness.get_parameters(NODE, [spec.name for spec in PARAMETERS])
    assert not [name for name, value in values.items() if KEY in str(value)]
    assert loop.close() == 0, node.log()[-3000:]
