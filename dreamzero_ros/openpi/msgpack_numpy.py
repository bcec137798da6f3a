# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""msgpack with NumPy arrays, byte-compatible with ``openpi_client.msgpack_numpy``.

An array travels as a map with bin keys ``__ndarray__`` (True), ``data`` (raw C-order bytes),
``dtype`` (``dtype.str``) and ``shape``; a NumPy scalar as ``__npgeneric__``, ``data`` (the
Python value) and ``dtype``. Object, void and complex dtypes (and any other kind that could
carry pickled objects or cannot be rebuilt from raw bytes) are refused in both directions, and so
are dtypes of size zero (an array of them can declare any number of elements in no bytes).

Decoding is bounded before any Python object is built: :func:`scan` walks the message's headers
and refuses it if it holds more objects, deeper nesting or longer strings than allowed, so a
16 MiB frame of one-byte maps costs a scan of its first few thousand headers, not a million dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from dreamzero_ros.errors import MsgpackNumpyError

#: dtype kinds that may cross the wire: bool, signed/unsigned int, float, bytes, unicode.
ALLOWED_KINDS = frozenset('biufSU')

#: Most dimensions of an array accepted from the wire.
MAX_NDIM = 8

_NDARRAY = b'__ndarray__'
_NPGENERIC = b'__npgeneric__'


@dataclass(frozen=True)
class DecodeLimits:
    """What one message may hold; checked by :func:`scan` before anything is unpacked.

    Attributes:
        max_objects: msgpack objects in all (every map, array, key, value and scalar counts; an
            OpenPI request holds about a hundred).
        max_depth: nesting of maps and arrays (a request's arrays sit at depth 2).
        max_str_bytes: longest string (UTF-8 bytes).

    """

    max_objects: int = 10_000
    max_depth: int = 16
    max_str_bytes: int = 64 * 1024


# Lengths of the fixed-size msgpack types (the format's first byte -> bytes that follow it).
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED |= {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
# Types whose length follows in 1, 2 or 4 bytes: bin, str, array, map.
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}
_STR = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_ARRAY = {0xDC: 2, 0xDD: 4}
_MAP = {0xDE: 2, 0xDF: 4}


def scan(data: bytes, limits: DecodeLimits) -> None:
    """Check one msgpack message against ``limits`` without building any object.

    Raises:
        MsgpackNumpyError: too many objects, too deep, a string too long, an ext type, a
            container declaring more items than bytes remain, or a truncated message.

    """
    view = memoryview(data)
    size = len(view)
    pos = 0
    pending = [1]  # items still expected at each open nesting level; the root holds one
    objects = 0

    def length(start: int, width: int) -> int:
        if start + width > size:
            raise MsgpackNumpyError('malformed msgpack: truncated message')
        return int.from_bytes(view[start : start + width], 'big')

    while pending:
        if pending[-1] == 0:
            pending.pop()
            continue
        pending[-1] -= 1
        objects += 1
        if objects > limits.max_objects:
            raise MsgpackNumpyError(f'more than {limits.max_objects} msgpack objects')
        if pos >= size:
            raise MsgpackNumpyError('malformed msgpack: truncated message')
        kind = view[pos]
        pos += 1
        items = -1
        skip = 0
        if kind <= 0x7F or kind >= 0xE0:
            continue
        if 0x80 <= kind <= 0x8F:
            items = 2 * (kind & 0x0F)
        elif 0x90 <= kind <= 0x9F:
            items = kind & 0x0F
        elif 0xA0 <= kind <= 0xBF:
            skip = kind & 0x1F
        elif kind in _FIXED:
            skip = _FIXED[kind]
        elif kind in _BIN:
            skip = length(pos, _BIN[kind])
            pos += _BIN[kind]
        elif kind in _STR:
            skip = length(pos, _STR[kind])
            pos += _STR[kind]
            if skip > limits.max_str_bytes:
                raise MsgpackNumpyError(
                    f'a string of {skip} bytes; at most {limits.max_str_bytes} are accepted'
                )
        elif kind in _ARRAY:
            items = length(pos, _ARRAY[kind])
            pos += _ARRAY[kind]
        elif kind in _MAP:
            items = 2 * length(pos, _MAP[kind])
            pos += _MAP[kind]
        elif 0xC7 <= kind <= 0xC9 or 0xD4 <= kind <= 0xD8:
            raise MsgpackNumpyError('msgpack ext types are not accepted')
        else:
            raise MsgpackNumpyError(f'malformed msgpack: invalid type byte 0x{kind:02x}')
        if items >= 0:
            if items > size - pos:  # every item takes at least one byte
                raise MsgpackNumpyError('malformed msgpack: a container longer than the message')
            pending.append(items)
            if len(pending) - 1 > limits.max_depth:
                raise MsgpackNumpyError(f'msgpack nested deeper than {limits.max_depth}')
        elif pos + skip > size:
            raise MsgpackNumpyError('malformed msgpack: truncated message')
        else:
            pos += skip
    if pos != size:
        raise MsgpackNumpyError('malformed msgpack: extra data after the message')


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.kind not in ALLOWED_KINDS:
        raise MsgpackNumpyError(f'unsupported dtype {dtype.str!r} (kind {dtype.kind!r})')
    if dtype.itemsize == 0:
        raise MsgpackNumpyError(f'unsupported dtype {dtype.str!r} of size zero')


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        return {
            _NDARRAY: True,
            b'data': obj.tobytes(),
            b'dtype': obj.dtype.str,
            b'shape': obj.shape,
        }
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {_NPGENERIC: True, b'data': obj.item(), b'dtype': obj.dtype.str}
    raise TypeError(f'cannot serialize {type(obj).__name__!r}')


def _parse_dtype(value: Any) -> np.dtype:
    if not isinstance(value, str):
        raise MsgpackNumpyError(f'dtype must be a str, got {type(value).__name__}')
    try:
        dtype = np.dtype(value)
    except TypeError as error:
        raise MsgpackNumpyError(f'invalid dtype {value[:32]!r}') from error
    _check_dtype(dtype)
    return dtype


def _decode(obj: dict) -> Any:
    if _NDARRAY in obj:
        dtype = _parse_dtype(obj.get(b'dtype'))
        shape = obj.get(b'shape')
        data = obj.get(b'data')
        if (
            not isinstance(shape, list | tuple)
            or len(shape) > MAX_NDIM
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        ):
            raise MsgpackNumpyError(
                f'invalid array shape (at most {MAX_NDIM} non-negative int dimensions)'
            )
        if not isinstance(data, bytes):
            raise MsgpackNumpyError('array data must be bin')
        expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if len(data) != expected:
            raise MsgpackNumpyError(
                f'array of shape {tuple(shape)} and dtype {dtype.str} needs {expected} bytes, '
                f'got {len(data)}'
            )
        return np.ndarray(buffer=data, dtype=dtype, shape=tuple(shape))
    if _NPGENERIC in obj:
        dtype = _parse_dtype(obj.get(b'dtype'))
        try:
            return dtype.type(obj.get(b'data'))
        except (TypeError, ValueError, OverflowError) as error:
            raise MsgpackNumpyError(f'invalid {dtype.str} scalar') from error
    return obj


def packb(obj: Any) -> bytes:
    """Serialize ``obj`` (maps, lists, scalars, str, bytes, ndarrays, NumPy scalars)."""
    try:
        return msgpack.packb(obj, default=_encode)
    except TypeError as error:
        raise MsgpackNumpyError(str(error)) from error


def unpackb(data: bytes, limits: DecodeLimits | None = None) -> Any:
    """Deserialize one msgpack-numpy message; arrays come back read-only.

    Args:
        data: the message.
        limits: checked by :func:`scan` first; the defaults of :class:`DecodeLimits` if None.

    Raises:
        MsgpackNumpyError: on anything that is not a well-formed msgpack-numpy message within
            ``limits``.

    """
    scan(data, limits or DecodeLimits())
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except MsgpackNumpyError:
        raise
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError) as error:
        raise MsgpackNumpyError(f'malformed msgpack: {error}') from error
