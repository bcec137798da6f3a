# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Hostile and careless requests cost the server little and never degrade other clients.

The server runs as its own process (``dreamzero-openpi-server --preset tiny``, default limits)
so that its peak resident memory (``VmHWM``) and its log can be measured from here. Refusals
are counted per client address, so each test's clients come from loopback addresses of their
own.
"""

from __future__ import annotations

import json
import threading

import msgpack
from openpi_support import (
    MIB,
    ServerProcess,
    assert_closed,
    droid_frames,
    droid_request,
    loopback_address,
    msgpack_bomb,
    open_client,
)
import pytest

from dreamzero_ros.openpi import msgpack_numpy

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

#: The default payload cap, less room for the frame header.
BOMB_BYTES = 16 * MIB - 64


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    process = ServerProcess(tmp_path_factory.mktemp('server') / 'server.log')
    yield process
    process.stop()


@pytest.fixture(scope='module')
def request_bytes():
    return msgpack_numpy.packb(droid_request(droid_frames(1), 0, 'bystander'))


def _round_trip(server: ServerProcess, payload: bytes) -> bytes | str:
    ws = open_client(server.url, loopback_address())
    try:
        ws.send(payload)
        return ws.recv(timeout=120)
    finally:
        ws.close()


def _error(reply: bytes | str) -> dict:
    assert isinstance(reply, str), 'expected an error reply'
    return json.loads(reply)


@pytest.mark.parametrize('clients', [1, 3])
def test_msgpack_bombs_cost_a_few_times_their_size_at_most(server, request_bytes, clients):
    assert isinstance(_round_trip(server, request_bytes), bytes)  # warm: weights paged in
    baseline = server.reset_peak_rss()
    payload = msgpack_bomb(BOMB_BYTES)
    replies = [None] * clients

    def send(index: int) -> None:
        replies[index] = _round_trip(server, payload)

    threads = [threading.Thread(target=send, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    growth = server.peak_rss() - baseline
    for reply in replies:
        body = _error(reply)
        assert body['error'] == 'MalformedRequest'
        assert body['message'] == 'more than 10000 msgpack objects'
    # Unbounded, one such frame took about 70 times its size (1.1 GiB).
    assert growth < 3 * clients * BOMB_BYTES, f'peak RSS grew {growth / MIB:.0f} MiB'
    assert isinstance(_round_trip(server, request_bytes), bytes)


@pytest.mark.parametrize(
    ('field', 'value', 'kind', 'needle'),
    [
        ('endpoint', 'x' * (15 * MIB), 'MalformedRequest', 'a string of 15728640 bytes'),
        ('endpoint', 'y' * 10_000, 'ObservationError', 'unknown endpoint'),
        ('prompt', 'z' * (15 * MIB), 'MalformedRequest', 'a string of 15728640 bytes'),
        ('prompt', 'w' * 5000, 'ObservationError', '5000 characters, more than the 4096'),
        ('session_id', 'v' * 9000, 'ObservationError', 'longer than 256'),
    ],
    ids=['endpoint-15MiB', 'endpoint-10k', 'prompt-15MiB', 'prompt-5000', 'session-9000'],
)
def test_error_replies_and_logs_never_echo_large_input(
    server, request_bytes, field, value, kind, needle
):
    request = msgpack.unpackb(request_bytes)
    request[field] = value
    log_before = server.log_size()
    reply = _round_trip(server, msgpack.packb(request))
    body = _error(reply)
    assert body['error'] == kind and needle in body['message'], body
    assert len(reply) < 1024
    assert value[:100] not in reply
    assert server.log_size() - log_before < 4096


def test_an_array_shape_of_millions_of_zeros_is_refused_briefly(server):
    array = {b'__ndarray__': True, b'data': b'', b'dtype': '<f4', b'shape': [0] * (15 * MIB)}
    reply = _round_trip(server, msgpack.packb({'observation/joint_position': array}))
    assert _error(reply)['message'] == 'more than 10000 msgpack objects' and len(reply) < 1024


def test_a_zero_size_dtype_is_refused_and_the_connection_kept(server, request_bytes):
    request = msgpack.unpackb(request_bytes)
    request['observation/joint_position'] = {
        b'__ndarray__': True,
        b'data': b'',
        b'dtype': '|S0',
        b'shape': [2**20, 2**20],
    }
    ws = open_client(server.url, loopback_address())
    try:
        ws.send(msgpack.packb(request))
        body = _error(ws.recv(timeout=60))
        assert body['error'] == 'MalformedRequest' and 'size zero' in body['message']
        ws.send(request_bytes)
        assert isinstance(ws.recv(timeout=120), bytes)
    finally:
        ws.close()


def test_a_frame_that_is_not_a_msgpack_map_is_refused_on_its_first_byte(server, request_bytes):
    for payload in (b'\xdd' + (2**24).to_bytes(4, 'big') + b'\x80' * (15 * MIB), b'', b'\x01'):
        body = _error(_round_trip(server, payload))
        assert body == {**body, 'error': 'MalformedRequest'}
        assert 'malformed msgpack' in body['message'] and 'must be a map' in body['message']


def test_a_connection_refused_again_and_again_is_throttled_then_closed(server, request_bytes):
    """Defaults: 4 refusals at once, then 2 per second; closed after 16 in a row (1008)."""
    import time

    bad = msgpack.packb({'endpoint': 'nonsense'})
    ws = open_client(server.url, loopback_address())
    good = open_client(server.url, loopback_address())
    try:
        times = []
        start = time.monotonic()
        for _ in range(16):
            ws.send(bad)
            assert _error(ws.recv(timeout=60))['error'] == 'ObservationError'
            times.append(time.monotonic() - start)
        assert times[3] < 1.0, times  # the burst
        assert times[15] > (16 - 4) / 2.0 - 0.5, times  # then 2 per second
        good.send(request_bytes)  # another connection is served meanwhile
        assert isinstance(good.recv(timeout=120), bytes)
        assert_closed(ws, 1008, '16 requests in a row refused')
    finally:
        ws.close()
        good.close()
