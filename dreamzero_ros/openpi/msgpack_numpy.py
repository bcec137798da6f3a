# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""msgpack with NumPy arrays, byte-compatible with ``openpi_client.msgpack_numpy``.

An array travels as a map with bin keys ``__ndarray__`` (True), ``data`` (raw C-order bytes),
``dtype`` (``dtype.str``) and ``shape``; a NumPy scalar as ``__npgeneric__``, ``data`` (the
Python value) and ``dtype``. Object, void and complex dtypes (and any other kind that could
carry pickled objects or cannot be rebuilt from raw bytes) are refused in both directions.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from dreamzero_ros.errors import MsgpackNumpyError

#: dtype kinds that may cross the wire: bool, signed/unsigned int, float, bytes, unicode.
ALLOWED_KINDS = frozenset('biufSU')

_NDARRAY = b'__ndarray__'
_NPGENERIC = b'__npgeneric__'


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.kind not in ALLOWED_KINDS:
        raise MsgpackNumpyError(f'unsupported dtype {dtype.str!r} (kind {dtype.kind!r})')


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
        raise MsgpackNumpyError(f'invalid dtype {value!r}') from error
    _check_dtype(dtype)
    return dtype


def _decode(obj: dict) -> Any:
    if _NDARRAY in obj:
        dtype = _parse_dtype(obj.get(b'dtype'))
        shape = obj.get(b'shape')
        data = obj.get(b'data')
        if not isinstance(shape, list | tuple) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
        ):
            raise MsgpackNumpyError(f'invalid array shape {shape!r}')
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


def unpackb(data: bytes) -> Any:
    """Deserialize one msgpack-numpy message; arrays come back read-only.

    Raises:
        MsgpackNumpyError: on anything that is not a well-formed msgpack-numpy message.

    """
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except MsgpackNumpyError:
        raise
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError) as error:
        raise MsgpackNumpyError(f'malformed msgpack: {error}') from error
