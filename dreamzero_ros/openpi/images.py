# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Images of OpenPI clients: pixel format, and undoing ``resize_with_pad``.

Real OpenPI clients (the DROID main loop, sim-evals, RoboArena) shrink camera frames with
``openpi_client.image_tools.resize_with_pad`` (:mod:`dreamzero_ros.core.observations.image_resize`):
keep the aspect ratio, scale to fit, and centre the result on a black canvas (224x224 or 180x320).
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


#: Camera aspects (width / height) whose ``resize_with_pad`` bands padding detection looks for:
#: the common landscape sensors (16:9, 4:3, 3:2, 16:10, 5:4, 21:9), square, and the portrait ones.
DETECTABLE_ASPECTS = (16 / 9, 4 / 3, 3 / 2, 16 / 10, 5 / 4, 21 / 9, 1.0, 9 / 16, 3 / 4, 2 / 3)


def remove_padding(images: np.ndarray, source_aspect: float | None = None) -> np.ndarray:
    """Crop the black bands that ``resize_with_pad`` added, where there are any.

    Bands are only ever where ``resize_with_pad`` puts them for a camera of ``source_aspect``
    (width / height before the client resized it): centred, ``int((span - content) / 2)`` lines
    first and the rest last, the content ``int(size / ratio)`` lines. They are cropped only if
    every pixel of them is exactly 0 in every channel and every frame, the canvas value it
    writes; the content is never looked at, so a scene with dark edges keeps them. Without
    ``source_aspect`` each of :data:`DETECTABLE_ASPECTS` is tried and the widest bands that are
    exactly 0 win (a camera whose aspect is not in the list needs ``source_aspect``). Images
    without such bands (already the camera's aspect, stretched rather than padded, or black
    throughout) come back unchanged.

    Args:
        images: uint8 ``(H, W, C)`` or ``(T, H, W, C)``.
        source_aspect: aspect ratio of the camera, or None to try the detectable aspects.

    """
    height, width = images.shape[-3:-1]
    frames = images.reshape(-1, height, width, images.shape[-1])
    filled = frames.any(axis=(0, 3))  # (H, W): True where any frame or channel is not 0
    if not filled.any():
        return images
    aspects = DETECTABLE_ASPECTS if source_aspect is None else (source_aspect,)
    found = [bands for a in aspects if (bands := _expected_bands(filled, a)) is not None]
    if not found:
        return images
    top, bottom, left, right = max(found, key=sum)
    return images[..., top : height - bottom, left : width - right, :]


def _expected_bands(filled: np.ndarray, source_aspect: float) -> tuple[int, int, int, int] | None:
    """``resize_with_pad``'s bands for a camera of ``source_aspect``, if they are exactly 0.

    The content size is tried as computed and one line either side of it: the camera's own
    integer size, which the request does not carry, decides the rounding.
    """
    height, width = filled.shape
    rows_padded = source_aspect > width / height
    span = height if rows_padded else width
    nominal = int(width / source_aspect) if rows_padded else int(height * source_aspect)
    lines = filled.any(axis=1) if rows_padded else filled.any(axis=0)
    for content in (nominal, nominal - 1, nominal + 1):
        if not 1 <= content < span:
            continue
        first = int((span - content) / 2)
        last = span - content - first
        if first >= 1 and not lines[:first].any() and not lines[span - last :].any():
            return (first, last, 0, 0) if rows_padded else (0, 0, first, last)
    return None
