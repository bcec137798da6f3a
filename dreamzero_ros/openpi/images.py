# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Images of OpenPI clients: pixel format, and undoing ``resize_with_pad``.

Real OpenPI clients (the DROID main loop, sim-evals, RoboArena) shrink camera frames with
``openpi_client.image_tools.resize_with_pad`` (:mod:`dreamzero_ros.core.image_resize`): keep the
aspect ratio, scale to fit, and centre the result on a black canvas (224x224 or 180x320).
NumPy only, so that remote clients need no torch.
"""

from __future__ import annotations

import numpy as np


def to_uint8_hwc(images: np.ndarray) -> np.ndarray:
    """Images as uint8 ``(H, W, 3)`` or ``(T, H, W, 3)``, converted as openpi's DROID policy does.

    Channels-first frames ``(3, H, W)`` (and stacks ``(T, 3, H, W)``) are moved last; floating
    point images are taken as [0, 1] and scaled by 255 (clipped, where openpi would wrap);
    other integer images must already lie in [0, 255].

    Raises:
        ValueError: on a dtype, shape or value range that is no RGB image.

    """
    if images.ndim == 3 and images.shape[0] == 3 and images.shape[-1] != 3:
        images = images.transpose(1, 2, 0)
    elif images.ndim == 4 and images.shape[1] == 3 and images.shape[-1] != 3:
        images = images.transpose(0, 2, 3, 1)
    if images.ndim not in (3, 4) or images.shape[-1] != 3:
        raise ValueError(f'expected shape (H, W, 3), (3, H, W) or a stack, got {images.shape}')
    if images.dtype == np.uint8:
        return images
    if images.dtype.kind == 'f':
        if not np.all(np.isfinite(images)):
            raise ValueError('float image holds non-finite values')
        return (np.clip(images, 0.0, 1.0) * 255.0).astype(np.uint8)
    if images.dtype.kind in 'iu':
        if images.size and (images.min() < 0 or images.max() > 255):
            raise ValueError(f'{images.dtype} image values outside [0, 255]')
        return images.astype(np.uint8)
    raise ValueError(f'expected uint8, float or integer pixels, got dtype {images.dtype}')


def remove_padding(images: np.ndarray, source_aspect: float | None = None) -> np.ndarray:
    """Crop the black bands that ``resize_with_pad`` added, where there are any.

    With ``source_aspect`` (width / height of the camera before the client resized it) the bands
    are where ``resize_with_pad`` puts them for that aspect, and are cropped only if they are
    black in every frame. Without it, padding is recognised as all-black lines at both ends of
    one axis whose counts differ by at most one, in every frame. Images without such bands
    (already the camera's aspect, or stretched rather than padded) come back unchanged.

    Args:
        images: uint8 ``(H, W, C)`` or ``(T, H, W, C)``.
        source_aspect: aspect ratio of the camera, or None to detect the bands.

    """
    height, width = images.shape[-3:-1]
    frames = images.reshape(-1, height, width, images.shape[-1])
    if source_aspect is None:
        bands = _detected_bands(frames)
    else:
        bands = _expected_bands(frames, source_aspect)
    if bands is None:
        return images
    top, bottom, left, right = bands
    return images[..., top : height - bottom, left : width - right, :]


def _detected_bands(frames: np.ndarray) -> tuple[int, int, int, int] | None:
    for axis in (1, 2):
        others = tuple(a for a in (0, 1, 2, 3) if a != axis)
        empty = ~frames.any(axis=others)
        if empty.all():
            return None
        first = int(np.argmax(~empty))
        last = int(np.argmax(~empty[::-1]))
        if min(first, last) >= 1 and abs(first - last) <= 1:
            return (first, last, 0, 0) if axis == 1 else (0, 0, first, last)
    return None


def _expected_bands(frames: np.ndarray, source_aspect: float) -> tuple[int, int, int, int] | None:
    height, width = frames.shape[1:3]
    rows_padded = source_aspect > width / height
    span = height if rows_padded else width
    nominal = int(width / source_aspect) if rows_padded else int(height * source_aspect)
    for content in (nominal, nominal - 1, nominal + 1):
        if not 1 <= content < span:
            continue
        first = (span - content) // 2
        last = span - content - first
        lines = frames.transpose(1, 0, 2, 3) if rows_padded else frames.transpose(2, 0, 1, 3)
        if first >= 1 and not lines[:first].any() and not lines[span - last :].any():
            return (first, last, 0, 0) if rows_padded else (0, 0, first, last)
    return None
