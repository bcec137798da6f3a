# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of the ROS-free image codec."""

import array

import numpy as np
import pytest

from dreamzero_ros.core.observations.image_codec import (
    SUPPORTED_ENCODINGS,
    decode_compressed,
    decode_raw,
    encode_compressed,
    encode_raw,
    msg_to_rgb,
)
from dreamzero_ros.errors import ImageDecodeError


@pytest.fixture
def rgb():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(6, 10, 3), dtype=np.uint8)


@pytest.mark.parametrize('encoding', ['rgb8', 'bgr8', 'rgba8', 'bgra8'])
def test_colour_encodings_round_trip(rgb, encoding):
    raw = encode_raw(rgb, encoding)
    assert raw.step == rgb.shape[1] * (4 if 'a' in encoding[3:] else 3)
    np.testing.assert_array_equal(
        decode_raw(raw.encoding, raw.height, raw.width, raw.step, raw.data), rgb
    )


def test_bgr8_swaps_channels():
    pixel = np.array([[[10, 20, 30]]], dtype=np.uint8)
    assert bytes(encode_raw(pixel, 'bgr8').data) == bytes([30, 20, 10])
    out = decode_raw('bgr8', 1, 1, 3, bytes([30, 20, 10]))
    np.testing.assert_array_equal(out, pixel)


def test_mono8_repeats_into_three_channels():
    data = bytes(range(6))
    out = decode_raw('mono8', 2, 3, 3, data)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out[..., 0], out[..., 2])
    np.testing.assert_array_equal(out[..., 1].ravel(), np.arange(6))


def test_row_padding_is_skipped(rgb):
    padded = np.zeros((rgb.shape[0], rgb.shape[1] * 3 + 4), dtype=np.uint8)
    padded[:, : rgb.shape[1] * 3] = rgb.reshape(rgb.shape[0], -1)
    out = decode_raw('rgb8', rgb.shape[0], rgb.shape[1], padded.shape[1], padded.tobytes())
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize('container', [bytes, lambda b: array.array('B', b), np.frombuffer])
def test_data_buffer_types(rgb, container):
    data = (
        container(rgb.tobytes())
        if container is not np.frombuffer
        else np.frombuffer(rgb.tobytes(), dtype=np.uint8)
    )
    np.testing.assert_array_equal(decode_raw('rgb8', 6, 10, 30, data), rgb)


def test_decoded_array_is_independent_of_the_buffer(rgb):
    buffer = bytearray(rgb.tobytes())
    out = decode_raw('rgb8', 6, 10, 30, buffer)
    buffer[0] = (buffer[0] + 1) % 256
    assert out[0, 0, 0] == rgb[0, 0, 0]


@pytest.mark.parametrize(
    ('encoding', 'height', 'width', 'step', 'size', 'message'),
    [
        ('16UC1', 2, 2, 4, 8, 'unsupported image encoding'),
        ('mono16', 2, 2, 4, 8, 'unsupported image encoding'),
        ('rgb8', 0, 2, 6, 0, 'empty image'),
        ('rgb8', 2, 2, 5, 12, 'step 5 is smaller'),
        ('rgb8', 2, 2, 6, 11, 'needs 12'),
    ],
)
def test_bad_raw_images_are_refused(encoding, height, width, step, size, message):
    with pytest.raises(ImageDecodeError, match=message):
        decode_raw(encoding, height, width, step, bytes(size))


def test_supported_encodings_listed_in_error():
    with pytest.raises(ImageDecodeError) as error:
        decode_raw('yuv422', 1, 1, 2, bytes(2))
    for encoding in SUPPORTED_ENCODINGS:
        assert encoding in str(error.value)


def test_png_is_lossless(rgb):
    data = encode_compressed(rgb, 'png')
    assert data.startswith(b'\x89PNG')
    np.testing.assert_array_equal(decode_compressed('png', data), rgb)


@pytest.mark.parametrize('format_string', ['jpeg', 'rgb8; jpeg compressed bgr8', 'JPG', ''])
def test_jpeg_decodes_by_format_or_magic(format_string):
    smooth = np.zeros((16, 24, 3), dtype=np.uint8)
    smooth[..., 0] = np.linspace(0, 255, 24, dtype=np.uint8)
    smooth[..., 1] = 128
    out = decode_compressed(format_string, encode_compressed(smooth, 'jpeg'))
    assert out.shape == smooth.shape and out.dtype == np.uint8
    assert np.abs(out.astype(int) - smooth).mean() < 6


@pytest.mark.parametrize(
    ('format_string', 'data', 'message'),
    [
        ('jpeg', b'', 'no data'),
        ('jpeg', b'\xff\xd8\xff\x00 not really a jpeg', 'cannot decode jpeg'),
        ('tiff', b'II*\x00', 'unsupported compressed image format'),
    ],
)
def test_bad_compressed_images_are_refused(format_string, data, message):
    with pytest.raises(ImageDecodeError, match=message):
        decode_compressed(format_string, data)


def test_msg_to_rgb_dispatches_on_fields(rgb):
    class RawMsg:
        encoding, height, width, step, is_bigendian = 'rgb8', 6, 10, 30, 0
        data = rgb.tobytes()

    class CompressedMsg:
        format = 'png'
        data = np.frombuffer(encode_compressed(rgb, 'png'), dtype=np.uint8)

    np.testing.assert_array_equal(msg_to_rgb(RawMsg()), rgb)
    np.testing.assert_array_equal(msg_to_rgb(CompressedMsg()), rgb)


def test_rclpy_messages_decode(rgb):
    sensor_msgs = pytest.importorskip('sensor_msgs.msg', reason='rclpy message wheels absent')
    raw = encode_raw(rgb, 'bgr8')
    msg = sensor_msgs.Image(
        encoding=raw.encoding, height=raw.height, width=raw.width, step=raw.step, data=raw.data
    )
    np.testing.assert_array_equal(msg_to_rgb(msg), rgb)
    compressed = sensor_msgs.CompressedImage(format='png', data=encode_compressed(rgb, 'png'))
    np.testing.assert_array_equal(msg_to_rgb(compressed), rgb)


def test_encode_refuses_non_rgb():
    with pytest.raises(ImageDecodeError):
        encode_raw(np.zeros((2, 2), dtype=np.uint8))
    with pytest.raises(ImageDecodeError):
        encode_compressed(np.zeros((2, 2, 3), dtype=np.float32))
