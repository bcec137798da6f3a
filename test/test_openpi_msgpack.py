# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""msgpack-numpy: byte-for-byte agreement with openpi-client, and refusal of unsafe payloads."""

from __future__ import annotations

import subprocess

import msgpack
import numpy as np
from openpi_support import openpi_python
import pytest

from dreamzero_ros.errors import MsgpackNumpyError
from dreamzero_ros.openpi import msgpack_numpy

# Executed in both interpreters (ours: numpy 2; the reference client's: numpy 1.x).
RECIPE = """
import numpy as np
rng = np.random.default_rng(7)
samples = [
    {'actions': rng.standard_normal((24, 8)).astype(np.float32),
     'server_timing': {'infer_ms': 12.5, 'prev_total_ms': 30.25}},
    {'observation/exterior_image_1_left': rng.integers(0, 256, (180, 320, 3), dtype=np.uint8),
     'observation/joint_position': rng.standard_normal(7),
     'observation/gripper_position': np.array([0.25]),
     'prompt': 'pick up the cup', 'session_id': 'episode-3', 'endpoint': 'infer'},
    {'transposed': np.arange(12, dtype='>i4').reshape(3, 4).T, 'flags': np.array([True, False]),
     'empty': np.zeros((0, 8), np.float32), 'i8': np.int64(-5), 'f4': np.float32(1.5),
     'u2': np.uint16(7), 'b': np.bool_(True), 'nested': [1, 2.0, None, b'raw', (3, 4)]},
    np.arange(6, dtype=np.float64).reshape(2, 3),
]
"""


def _reference(code: str, stdin: bytes = b'') -> bytes:
    """Run ``code`` with the reference client's interpreter; return its stdout."""
    result = subprocess.run(
        [openpi_python(), '-c', code],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={'PYTHONPATH': ''},
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def _samples() -> list:
    namespace: dict = {}
    exec(RECIPE, namespace)
    return namespace['samples']


def test_packing_is_byte_identical_to_openpi_client():
    reference = _reference(
        RECIPE
        + 'import sys\nfrom openpi_client import msgpack_numpy\n'
        + 'sys.stdout.buffer.write(msgpack_numpy.packb(samples))'
    )
    assert msgpack_numpy.packb(_samples()) == reference


def test_openpi_client_decodes_what_we_pack():
    ours = msgpack_numpy.packb(_samples())
    repacked = _reference(
        'import sys\nfrom openpi_client import msgpack_numpy\n'
        'data = sys.stdin.buffer.read()\n'
        'sys.stdout.buffer.write(msgpack_numpy.packb(msgpack_numpy.unpackb(data)))',
        stdin=ours,
    )
    assert repacked == ours


def test_round_trip_preserves_arrays_and_scalars():
    decoded = msgpack_numpy.unpackb(msgpack_numpy.packb(_samples()))
    original = _samples()
    np.testing.assert_array_equal(decoded[0]['actions'], original[0]['actions'])
    assert decoded[0]['actions'].dtype == np.float32
    transposed = decoded[2]['transposed']
    assert transposed.dtype == np.dtype('>i4') and transposed.shape == (4, 3)
    np.testing.assert_array_equal(transposed, original[2]['transposed'])
    assert decoded[2]['empty'].shape == (0, 8)
    assert type(decoded[2]['i8']) is np.int64 and decoded[2]['i8'] == -5
    assert type(decoded[2]['b']) is np.bool_
    assert decoded[2]['nested'] == [1, 2.0, None, b'raw', [3, 4]]
    assert not decoded[3].flags.writeable


@pytest.mark.parametrize(
    'value',
    [
        np.array([object()], dtype=object),
        np.zeros(2, dtype=np.complex64),
        np.zeros(2, dtype=[('a', '<f4')]),
        np.complex128(1j),
        np.zeros(2, dtype='datetime64[s]'),
    ],
)
def test_packing_refuses_unsafe_dtypes(value):
    with pytest.raises(MsgpackNumpyError, match='unsupported dtype'):
        msgpack_numpy.packb({'x': value})


def _array_map(dtype: str, shape: list, data: bytes) -> bytes:
    return msgpack.packb({b'__ndarray__': True, b'data': data, b'dtype': dtype, b'shape': shape})


@pytest.mark.parametrize(
    ('payload', 'message'),
    [
        (_array_map('|O', [1], b'\0' * 8), 'unsupported dtype'),
        (_array_map('<c8', [1], b'\0' * 8), 'unsupported dtype'),
        (_array_map('|V8', [1], b'\0' * 8), 'unsupported dtype'),
        (_array_map('not-a-dtype', [1], b'\0'), 'invalid dtype'),
        (_array_map('<f4', [2, 2], b'\0' * 12), 'needs 16 bytes, got 12'),
        (_array_map('<f4', [-1], b''), 'invalid array shape'),
        (_array_map('<f4', [2**40, 2**40], b''), 'needs'),
        (
            msgpack.packb({b'__npgeneric__': True, b'data': 1, b'dtype': '|O'}),
            'unsupported dtype',
        ),
        (_array_map('|S0', [2**20, 2**20], b''), 'of size zero'),
        (_array_map('<U0', [2**40], b''), 'of size zero'),
        (_array_map('<f4', [1] * 9, b'\0' * 4), 'at most 8'),
        (b'\xc1', 'malformed msgpack'),
        (b'\x92\x01', 'malformed msgpack'),
        (msgpack.packb([1]) + b'\x01', 'malformed msgpack'),
        (b'\xdd\x7f\xff\xff\xff', 'longer than the message'),
        (b'\xc6\x00\x00\x10\x00ab', 'truncated'),
        (msgpack.packb(msgpack.ExtType(1, b'x')), 'ext types'),
    ],
)
def test_unpacking_refuses_malformed_payloads(payload, message):
    with pytest.raises(MsgpackNumpyError, match=message):
        msgpack_numpy.unpackb(payload)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ('payload', 'message'),
    [
        (b'\xdd' + (2**20).to_bytes(4, 'big') + b'\x80' * 2**20, 'more than 1000 msgpack objects'),
        (msgpack.packb(list(range(1000))), 'more than 1000 msgpack objects'),
        (msgpack.packb({str(i): i for i in range(501)}), 'more than 1000 msgpack objects'),
        (msgpack.packb(_nested(5)), 'nested deeper than 4'),
        (msgpack.packb('x' * 65), 'a string of 65 bytes; at most 64'),
    ],
    ids=['bomb', 'array', 'map', 'depth', 'string'],
)
def test_limits_are_enforced_before_anything_is_unpacked(payload, message, monkeypatch):
    def unpack_never(*args, **kwargs):
        raise AssertionError('msgpack.unpackb ran on a payload over the limits')

    monkeypatch.setattr(msgpack_numpy.msgpack, 'unpackb', unpack_never)
    limits = msgpack_numpy.DecodeLimits(max_objects=1000, max_depth=4, max_str_bytes=64)
    with pytest.raises(MsgpackNumpyError, match=message):
        msgpack_numpy.unpackb(payload, limits)


def test_payloads_within_the_limits_decode():
    limits = msgpack_numpy.DecodeLimits(max_objects=1000, max_depth=4, max_str_bytes=64)
    for payload in (list(range(999)), _nested(4), 'x' * 64, {'a': b'\0' * 2**20}):
        assert msgpack_numpy.unpackb(msgpack.packb(payload), limits) == payload
