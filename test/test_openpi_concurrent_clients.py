# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Many clients on one server: sessions kept, capacity explicit, idle connections never in the way.

The tiny engine serves real openpi-client processes (their own venv) and raw WebSocket clients,
which can hold connections open without sending anything while they answer keepalive pings.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
from openpi_support import (
    CHECK,
    LOOP,
    REPO,
    assert_closed,
    droid_frames,
    droid_request,
    open_client,
    openpi_python,
    run_openpi,
    tiny_engine,
)
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection

from dreamzero_ros.openpi import OpenPIServer, ServerConfig, msgpack_numpy

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

CLIENTS = 6


@pytest.fixture(scope='module')
def engine(tmp_path_factory):
    return tiny_engine(tmp_path_factory.mktemp('tiny-checkpoint'), max_sessions=CLIENTS)


@pytest.fixture(scope='module')
def frames():
    return droid_frames(2)


def _infer(ws: ClientConnection, frames: dict, session_id: str) -> dict | str:
    ws.send(msgpack_numpy.packb(droid_request(frames, 0, session_id)))
    reply = ws.recv(timeout=120)
    return reply if isinstance(reply, str) else msgpack_numpy.unpackb(reply)


def test_six_concurrent_reference_clients_keep_their_sessions(engine, tmp_path):
    handle = OpenPIServer(engine, ServerConfig(port=0, max_sessions=CLIENTS)).start()
    frames_npz = tmp_path / 'frames.npz'
    np.savez(frames_npz, **droid_frames(24))
    args = [LOOP, '--port', str(handle.port), '--steps', '24', '--frames', str(frames_npz)]
    try:
        processes = [
            subprocess.Popen(
                [openpi_python(), *args, '--session-id', f'robot-{index}'],
                cwd=REPO,
                env={**os.environ, 'PYTHONPATH': ''},
                stdout=subprocess.PIPE,
                text=True,
            )
            for index in range(CLIENTS)
        ]
        outputs = [json.loads(process.communicate(timeout=600)[0]) for process in processes]
    finally:
        handle.stop()
    assert all(process.returncode == 0 for process in processes)
    for out in outputs:
        # Every chunk continued its own session: none was dropped for another client's.
        assert out['chunk_ids'] == [0, 1, 2]


def test_a_client_beyond_capacity_is_refused_and_evicts_nobody(engine, frames):
    config = ServerConfig(port=0, max_sessions=CLIENTS, idle_evict_after_s=600.0)
    handle = OpenPIServer(engine, config).start()
    clients = [open_client(handle.url) for _ in range(CLIENTS + 1)]
    try:
        for index, ws in enumerate(clients[:CLIENTS]):
            assert _infer(ws, frames, f'robot-{index}')['chunk_id'] == 0
        refused = json.loads(_infer(clients[-1], frames, 'one-too-many'))
        assert refused['error'] == 'ServerBusy'
        assert f'all {CLIENTS} sessions are in use' in refused['message']
        for index, ws in enumerate(clients[:CLIENTS]):
            assert _infer(ws, frames, f'robot-{index}')['chunk_id'] == 1
        # The refused connection stays usable once a session is free.
        clients[0].close()
        assert _infer(clients[-1], frames, 'one-too-many')['chunk_id'] == 0
    finally:
        for ws in clients:
            ws.close()
        handle.stop()


def test_an_idle_client_answering_pings_outlives_the_idle_threshold(engine):
    config = ServerConfig(port=0, ping_interval_s=0.3, ping_timeout_s=2.0, idle_evict_after_s=1.0)
    handle = OpenPIServer(engine, config).start()
    try:
        out = run_openpi([CHECK, '--port', str(handle.port), '--idle-s', '4', 'idle'])
    finally:
        handle.stop()
    assert out['first']['chunk_id'] == 0
    # Nobody needed its room: the connection and its session are still there.
    assert out['after_idle']['raised'] is None
    assert out['after_idle']['result']['chunk_id'] == 1


def test_idle_sockets_do_not_starve_a_new_client(engine, frames):
    config = ServerConfig(
        port=0, max_connections=8, max_connections_per_client=4, idle_evict_after_s=1.0
    )
    handle = OpenPIServer(engine, config).start()
    idle = [open_client(handle.url) for _ in range(4)]
    try:
        assert _infer(idle[0], frames, 'holder')['chunk_id'] == 0
        with pytest.raises(InvalidStatus) as refused:
            open_client(handle.url)
        assert refused.value.response.status_code == 503
        assert b'too many connections from 127.0.0.1' in refused.value.response.body
        for ws in idle:  # keepalive pings are answered in the background meanwhile
            ws.ping().wait(5)
        time.sleep(1.2)
        newcomer = open_client(handle.url)
        assert _infer(newcomer, frames, 'newcomer')['chunk_id'] == 0
        # One idle connection was closed for it, told why, and it was not the one holding a
        # session; that one still continues its session.
        closed = []
        for ws in idle:
            try:
                ws.recv(timeout=0.5)
            except ConnectionClosed as error:
                closed.append((ws, error.rcvd))
            except TimeoutError:
                pass
        assert len(closed) == 1 and closed[0][0] is not idle[0]
        assert closed[0][1].code == 1013 and 'evicted after' in closed[0][1].reason
        assert _infer(idle[0], frames, 'holder')['chunk_id'] == 1
        newcomer.close()
    finally:
        for ws in idle:
            ws.close()
        handle.stop()


def test_an_idle_session_makes_room_for_a_new_client_and_its_owner_is_told(engine, frames):
    config = ServerConfig(port=0, max_sessions=1, idle_evict_after_s=1.0)
    handle = OpenPIServer(engine, config).start()
    holder, newcomer = open_client(handle.url), open_client(handle.url)
    try:
        assert _infer(holder, frames, 'first')['chunk_id'] == 0
        busy = json.loads(_infer(newcomer, frames, 'second'))
        assert busy['error'] == 'ServerBusy'
        time.sleep(1.2)
        assert _infer(newcomer, frames, 'second')['chunk_id'] == 0
        assert_closed(holder, 1013, 'needed a session', timeout=5)
    finally:
        holder.close()
        newcomer.close()
        handle.stop()


def test_connection_caps_count_per_client_address(engine):
    config = ServerConfig(port=0, max_connections=3, max_connections_per_client=2)
    handle = OpenPIServer(engine, config).start()
    clients = [open_client(handle.url, '127.0.0.2') for _ in range(2)]
    try:
        with pytest.raises(InvalidStatus, match='503'):
            open_client(handle.url, '127.0.0.2')
        clients.append(open_client(handle.url, '127.0.0.3'))  # another client is not affected
        with pytest.raises(InvalidStatus) as full:
            open_client(handle.url, '127.0.0.4')
        assert b'server full' in full.value.response.body
    finally:
        for ws in clients:
            ws.close()
        handle.stop()


def test_a_capacity_beyond_what_the_engine_keeps_is_refused(engine):
    with pytest.raises(ValueError, match='more than the policy keeps for the server'):
        OpenPIServer(engine, ServerConfig(port=0, max_sessions=CLIENTS + 1))
    assert OpenPIServer(engine, ServerConfig(port=0)).capacity.max_sessions == CLIENTS
    # The node's own control loop keeps one session of the engine it serves.
    node_bridge = OpenPIServer(engine, ServerConfig(port=0, reserved_sessions=1))
    assert node_bridge.capacity.max_sessions == CLIENTS - 1
