# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Convert ``sensor_msgs`` image payloads to and from RGB ``uint8`` numpy arrays, without ROS.

The functions read plain fields (``encoding``, ``height``, ``width``, ``step``, ``data``,
``is_bigendian`` of ``sensor_msgs/Image``; ``format`` and ``data`` of
``sensor_msgs/CompressedImage``), so they work on rclpy messages, on messages deserialised by the
``rosbags`` library, and on plain values alike. ``data`` may be ``bytes``, ``array.array('B')``
or a ``uint8`` numpy array.

Supported raw encodings: ``rgb8``, ``bgr8``, ``mono8``, ``rgba8``, ``bgra8`` (alpha dropped).
Supported compressed formats: JPEG and PNG (decoded with PyAV), recognised from the ``format``
string (``jpeg``, ``rgb8; jpeg compressed bgr8``, ``png`` ...) or, failing that, from the magic
bytes. Anything else raises :class:`ImageDecodeError` naming what was wrong.

:func:`message_image_size` checks a message's header fields without touching its pixels;
:func:`letterbox` fits a decoded frame into the policy's input size the way OpenPI clients do.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.image_resize import resize_with_pad
from dreamzero_ros.errors import ImageDecodeError

#: Raw encoding -> (channels, channel order to RGB; None for mono).
_RAW_LAYOUTS: dict[str, tuple[int, tuple[int, int, int] | None]] = {
    'rgb8': (3, (0, 1, 2)),
    'bgr8': (3, (2, 1, 0)),
    'mono8': (1, None),
    'rgba8': (4, (0, 1, 2)),
    'bgra8': (4, (2, 1, 0)),
}
#: Raw encodings :func:`decode_raw` accepts.
SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(_RAW_LAYOUTS)
#: Compressed formats :func:`decode_compressed` accepts.
SUPPORTED_FORMATS: tuple[str, ...] = ('jpeg', 'png')

_MAGIC = {b'\xff\xd8\xff': 'jpeg', b'\x89PNG': 'png'}
_AV_CODECS = {'jpeg': 'mjpeg', 'png': 'png'}


@dataclass(frozen=True)
class RawImage:
    """The fields of a ``sensor_msgs/Image`` (without header), ready to copy into a message."""

    encoding: str
    height: int
    width: int
    step: int
    data: bytes
    is_bigendian: int = 0


def _as_bytes_view(data: Any) -> np.ndarray:
    """View ``bytes``, ``array.array`` or a numpy array as a flat ``uint8`` array (no copy)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(memoryview(data).cast('B'), dtype=np.uint8)
    except TypeError as error:
        kind = type(data).__name__
        raise ImageDecodeError(f'image data of type {kind} is not a byte buffer') from error


def decode_raw(
    encoding: str,
    height: int,
    width: int,
    step: int,
    data: Any,
    is_bigendian: int | bool = 0,
) -> np.ndarray:
    """Decode the fields of a ``sensor_msgs/Image`` into a new ``(height, width, 3)`` RGB array.

    ``is_bigendian`` is accepted for completeness; every supported encoding has 8-bit channels,
    so byte order does not matter.

    Raises:
        ImageDecodeError: unsupported encoding, empty image, or a ``step``/``data`` size that
            does not match ``height`` x ``width``.

    """
    del is_bigendian  # 8-bit channels only
    layout = _RAW_LAYOUTS.get(str(encoding).lower())
    if layout is None:
        raise ImageDecodeError(
            f'unsupported image encoding {encoding!r}; supported: {", ".join(SUPPORTED_ENCODINGS)}'
        )
    channels, order = layout
    height, width, step = int(height), int(width), int(step)
    if height <= 0 or width <= 0:
        raise ImageDecodeError(f'empty image: {height}x{width}')
    row_bytes = width * channels
    if step < row_bytes:
        raise ImageDecodeError(
            f'step {step} is smaller than width {width} x {channels} channels ({encoding})'
        )
    flat = _as_bytes_view(data)
    if flat.size < step * (height - 1) + row_bytes:
        raise ImageDecodeError(
            f'image data has {flat.size} bytes; {encoding} {height}x{width} with step {step} '
            f'needs {step * height}'
        )
    rows = np.lib.stride_tricks.as_strided(
        flat, shape=(height, row_bytes), strides=(step, 1), writeable=False
    )
    pixels = rows.reshape(height, width, channels)
    if order is None:
        return np.repeat(pixels, 3, axis=2)
    return np.ascontiguousarray(pixels[:, :, list(order)])


def _compressed_kind(format_string: str, data: np.ndarray) -> str:
    """Return ``'jpeg'`` or ``'png'`` from the ``format`` field, else from the magic bytes."""
    text = str(format_string).lower()
    # ROS image_transport writes e.g. 'rgb8; jpeg compressed bgr8': the codec is after ';'.
    codec_part = text.split(';', 1)[-1]
    for kind in SUPPORTED_FORMATS:
        if kind in codec_part or (kind == 'jpeg' and 'jpg' in codec_part):
            return kind
    head = data[:4].tobytes()
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    raise ImageDecodeError(
        f'unsupported compressed image format {format_string!r}; '
        f'supported: {", ".join(SUPPORTED_FORMATS)}'
    )


def decode_compressed(format_string: str, data: Any) -> np.ndarray:
    """Decode the fields of a ``sensor_msgs/CompressedImage`` into an ``(H, W, 3)`` RGB array.

    Raises:
        ImageDecodeError: unsupported format, or bytes that do not decode to an image.

    """
    flat = _as_bytes_view(data)
    if flat.size == 0:
        raise ImageDecodeError('compressed image has no data')
    kind = _compressed_kind(format_string, flat)
    import av  # imported here: raw images need no PyAV

    try:
        decoder = av.CodecContext.create(_AV_CODECS[kind], 'r')
        frames = decoder.decode(av.packet.Packet(flat.tobytes()))
    except (av.error.FFmpegError, ValueError) as error:
        raise ImageDecodeError(f'cannot decode {kind} image: {error}') from error
    if not frames:
        raise ImageDecodeError(f'{kind} data of {flat.size} bytes decoded to no image')
    return frames[0].to_ndarray(format='rgb24')


def message_image_size(msg: Any) -> tuple[int, int] | None:
    """``(height, width)`` a ``sensor_msgs/Image``-like message declares, checked against its data.

    Costs a few field reads, no pixel work. ``None`` for a ``CompressedImage`` (its size is
    known once decoded). Encodings this codec does not know (left to cv_bridge where present)
    are checked for ``height x step`` bytes only.

    Raises:
        ImageDecodeError: empty image, a ``step`` shorter than a row, or data shorter than the
            sizes say.

    """
    if hasattr(msg, 'format'):
        return None
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise ImageDecodeError(f'empty image: {height}x{width}')
    layout = _RAW_LAYOUTS.get(str(msg.encoding).lower())
    row_bytes = width * layout[0] if layout is not None else step
    if step < row_bytes or step <= 0:
        raise ImageDecodeError(
            f'step {step} is smaller than a row of {width} pixels ({msg.encoding})'
        )
    size = len(msg.data)
    if size < step * (height - 1) + row_bytes:
        raise ImageDecodeError(
            f'image data has {size} bytes; {msg.encoding} {height}x{width} with step {step} '
            f'needs {step * height}'
        )
    return height, width


def letterbox(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Fit an ``(H, W, 3)`` frame into ``size`` = ``(height, width)``: aspect kept, black bands.

    openpi-client's ``image_tools.resize_with_pad`` (antialiased bilinear resize, content centred
    on a zero canvas), the convention of OpenPI clients and of the engine's input path; a frame
    of that size already comes back unchanged.
    """
    return resize_with_pad(rgb, int(size[0]), int(size[1]))


def image_msg_to_rgb(msg: Any) -> np.ndarray:
    """Decode a ``sensor_msgs/Image``-like object (rclpy, rosbags, or any with its fields)."""
    return decode_raw(msg.encoding, msg.height, msg.width, msg.step, msg.data, msg.is_bigendian)


def compressed_msg_to_rgb(msg: Any) -> np.ndarray:
    """Decode a ``sensor_msgs/CompressedImage``-like object."""
    return decode_compressed(msg.format, msg.data)


def msg_to_rgb(msg: Any) -> np.ndarray:
    """Decode either image message kind: one with a ``format`` field is a ``CompressedImage``."""
    if hasattr(msg, 'format'):
        return compressed_msg_to_rgb(msg)
    return image_msg_to_rgb(msg)


def encode_raw(rgb: np.ndarray, encoding: str = 'rgb8') -> RawImage:
    """Encode an ``(H, W, 3)`` RGB ``uint8`` array as ``sensor_msgs/Image`` fields.

    ``mono8`` takes the channel mean; alpha channels are set to 255.
    """
    rgb = _check_rgb(rgb)
    layout = _RAW_LAYOUTS.get(encoding)
    if layout is None:
        raise ImageDecodeError(
            f'cannot encode {encoding!r}; supported: {", ".join(SUPPORTED_ENCODINGS)}'
        )
    channels, order = layout
    height, width = rgb.shape[:2]
    if order is None:
        pixels = rgb.mean(axis=2).round().astype(np.uint8)
    else:
        pixels = np.empty((height, width, channels), dtype=np.uint8)
        pixels[:, :, list(order)] = rgb
        if channels == 4:
            pixels[:, :, 3] = 255
    return RawImage(encoding, height, width, width * channels, pixels.tobytes())


def encode_compressed(rgb: np.ndarray, kind: str = 'jpeg') -> bytes:
    """Encode an ``(H, W, 3)`` RGB ``uint8`` array as JPEG (FFmpeg default quality) or PNG."""
    rgb = _check_rgb(rgb)
    if kind not in _AV_CODECS:
        raise ImageDecodeError(f'cannot encode {kind!r}; supported: {", ".join(SUPPORTED_FORMATS)}')
    import av

    pix_fmt = 'yuvj444p' if kind == 'jpeg' else 'rgb24'
    encoder = av.CodecContext.create(_AV_CODECS[kind], 'w')
    encoder.width, encoder.height = rgb.shape[1], rgb.shape[0]
    encoder.pix_fmt = pix_fmt
    encoder.time_base = Fraction(1, 30)
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format='rgb24')
    packets = encoder.encode(frame.reformat(format=pix_fmt)) + encoder.encode(None)
    return b''.join(bytes(packet) for packet in packets)


def _check_rgb(rgb: np.ndarray) -> np.ndarray:
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3:
        raise ImageDecodeError('expected an (H, W, 3) uint8 RGB array')
    if rgb.shape[2] != 3 or min(rgb.shape[:2]) < 1:
        raise ImageDecodeError(f'expected an (H, W, 3) uint8 RGB array, got {rgb.shape}')
    return rgb
