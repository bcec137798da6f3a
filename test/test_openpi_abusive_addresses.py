# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Abusive client addresses are limited as addresses, and cost good clients nothing.

Refusals, and the bytes they made the server read, are counted per client address across all
its connections: a reconnect buys no fresh burst, an address refused again and again is shut
out (HTTP 429) until it has rested, a large frame from an address in deficit is refused from
its header before its payload is read, abusive addresses that fill the server make room for a
newcomer, and the memory their frames took goes back to the system once they stop. Abusers are
raw WebSocket clients from loopback addresses of their own; good clients and newcomers are the
reference openpi-client (``.venv-openpi``) in processes of their own, from 127.0.0.1.
"""

from __future__ import annotations

import json
import struct
import threading
import time

from machine_load import load_factor
import numpy as np
from openpi_support import (
    LOOP,
    MIB,
    ServerProcess,
    assert_closed,
    droid_frames,
    droid_request,
    loopback_address,
    msgpack_bomb,
    open_client,
    run_openpi,
)
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from dreamzero_ros.openpi import OpenPIServer, ServerConfig, msgpack_numpy
from dreamzero_ros.policy_types import ActionChunk

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

BAD = msgpack_numpy.packb({'endpoint': 'nonsense'})  # refused: ObservationError


class ConstantPolicy:
    """A constant (24, 8) chunk at once."""

    metadata = {'image_resolution': (180, 320), 'n_external_cameras': 2}

    def infer(self, observation):
        return ActionChunk(actions=np.zeros((24, 8), np.float32), stamp=observation.stamp)

    def reset(self, session_id='default'):
        pass


def _refuse(ws, payload: bytes = BAD) -> dict:
    ws.send(payload)
    reply = ws.recv(timeout=60 * load_factor())
    assert isinstance(reply, str), 'expected an error reply'
    return json.loads(reply)


def _good_client(port: int, steps: int = 16) -> dict:
    """The reference client's DROID loop (its own process, from 127.0.0.1): its summary."""
    return run_openpi([LOOP, '--port', str(port), '--steps', str(steps), '--hz', '30'])


@pytest.fixture
def server():
    handle = OpenPIServer(ConstantPolicy(), ServerConfig(port=0)).start()
    yield handle
    handle.stop()


def test_a_reconnect_gets_no_fresh_burst_and_a_refused_address_is_shut_out(server):
    """Defaults: 4 refusals at once, then 2 per second, per address; 16 in a row shut it out."""
    address = loopback_address()
    first = open_client(server.url, address)
    start = time.monotonic()
    for _ in range(4):  # the address's burst
        assert _refuse(first)['error'] == 'ObservationError'
    first.close()
    second = open_client(server.url, address)  # a new connection, the same address
    for _ in range(4):
        assert _refuse(second)['error'] == 'ObservationError'
    # per connection (as before) these four came at once; per address they come at 2 per s
    assert time.monotonic() - start >= 4 / 2.0 - 0.25
    for _ in range(8):
        _refuse(second)
    assert_closed(second, 1008)
    with pytest.raises(InvalidStatus) as shut_out:
        open_client(server.url, address)
    assert shut_out.value.response.status_code == 429
    assert b'16 requests in a row from ' in shut_out.value.response.body
    other = open_client(server.url, loopback_address())  # another address is not concerned
    assert _refuse(other)['error'] == 'ObservationError'
    other.close()
    summary = _good_client(server.port)  # nor is a good client
    assert len(summary['chunk_ids']) == 2


def _send_header_only(ws, size: int) -> None:
    """Send a binary frame header declaring ``size`` bytes, and 1 KiB of payload, on ``ws``.

    The server must close the connection (1009) with the rest of the payload unsent.
    """
    mask = b'\x00\x00\x00\x00'  # a client's frames are masked; a zero mask keeps bytes as they are
    header = struct.pack('!BBQ', 0x82, 0x80 | 127, size) + mask
    sock = ws.socket
    sock.sendall(header + b'\x81' + bytes(1023))
    assert_closed(ws, 1009, timeout=30 * load_factor())


def test_a_large_frame_from_an_address_in_deficit_is_refused_from_its_header(server):
    address = loopback_address()
    ws = open_client(server.url, address)
    for _ in range(2):  # 30 MiB refused of the address's 32 MiB: 8 MiB frames at most now
        assert 'msgpack objects' in _refuse(ws, msgpack_bomb(15 * MIB))['message']
    # A 12 MiB frame (under the 16 MiB cap) is refused as soon as its header arrives: the test
    # sends 1 KiB of its payload only, so a server that waited for the rest would time out.
    _send_header_only(ws, 12 * MIB)
    # A fresh address may send such a frame.
    fresh = open_client(server.url, loopback_address())
    assert 'msgpack objects' in _refuse(fresh, msgpack_bomb(12 * MIB))['message']
    fresh.close()


def test_abusive_addresses_that_fill_the_server_make_room_for_a_newcomer():
    config = ServerConfig(port=0, max_connections=8, max_connections_per_client=4)
    handle = OpenPIServer(ConstantPolicy(), config).start()
    abusers = []
    try:
        for _ in range(2):  # 2 addresses x 4 connections: every slot, none idle for 60 s
            address = loopback_address()
            for _ in range(4):
                ws = open_client(handle.url, address)
                abusers.append(ws)
        for ws in abusers:  # each address: 8 refused in a row (abusive), connections kept
            _refuse(ws)
            _refuse(ws)
        summary = _good_client(handle.port)  # the reference client from 127.0.0.1
        assert len(summary['chunk_ids']) == 2
        evicted = 0
        for ws in abusers:
            try:
                ws.recv(timeout=1)
            except ConnectionClosed as error:
                evicted += error.rcvd is not None and error.rcvd.code == 1013
            except TimeoutError:
                pass
        assert evicted == 1
    finally:
        for ws in abusers:
            ws.close()
        handle.stop()


def test_memory_of_refused_frames_goes_back_once_the_abusers_stop(tmp_path):
    server = ServerProcess(tmp_path / 'server.log')
    try:
        request = msgpack_numpy.packb(droid_request(droid_frames(1), 0, 'warm'))
        warm = open_client(server.url, loopback_address())
        warm.send(request)
        assert isinstance(warm.recv(timeout=120), bytes)
        warm.close()
        baseline = server.reset_peak_rss()
        stop = time.monotonic() + 8.0
        frame = np.full((720, 1280, 3), 300, np.int16)  # decoded, then refused: out of range
        pixels = {f'observation/{camera}': frame for camera in droid_frames(1)}
        payloads = [msgpack_bomb(15 * MIB), b'\xdd' + bytes(15 * MIB), msgpack_numpy.packb(pixels)]

        def abuse(address: str) -> None:
            index = 0
            while time.monotonic() < stop:
                try:
                    ws = open_client(server.url, address)
                    while time.monotonic() < stop:
                        ws.send(payloads[index % len(payloads)])
                        index += 1
                        ws.recv(timeout=30)
                except (ConnectionClosed, InvalidStatus, TimeoutError, OSError):
                    time.sleep(0.05)

        # 4 addresses x 8 connections (every slot): before, the server kept 0.9 GiB after this
        threads = [
            threading.Thread(target=abuse, args=(address,))
            for address in [loopback_address() for _ in range(4)] for _ in range(8)
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        peak = server.peak_rss() - baseline
        assert peak > 30 * MIB, f'the abuse took only {peak / MIB:.0f} MiB: the test shows nothing'
        deadline = time.monotonic() + 30 * load_factor()
        while server.rss() - baseline > 48 * MIB and time.monotonic() < deadline:
            time.sleep(0.5)
        left = server.rss() - baseline
        assert left <= 48 * MIB, f'{left / MIB:.0f} MiB kept of a {peak / MIB:.0f} MiB peak'
    finally:
        server.stop()
