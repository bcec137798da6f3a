# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Antialiased resize and ``resize_with_pad``, as OpenPI clients shrink camera frames.

``openpi_client.image_tools.resize_with_pad`` keeps the aspect ratio, scales to fit and centres
the result on a black canvas.  The node letterboxes its camera frames this way
(:func:`~dreamzero_ros.core.observations.image_codec.letterbox`) and the OpenPI bridge shrinks and
un-pads requests with it (:mod:`dreamzero_ros.openpi.images`).  NumPy only, so that remote clients
need no torch.
"""

from __future__ import annotations

import numpy as np


def _filter_taps(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Source indices and weights, both ``(size_out, taps)``, of a triangle filter.

    The filter widens with the downscale factor (antialiasing), as PIL's bilinear resize does;
    taps beyond the image edge get zero weight.
    """
    scale = size_in / size_out
    support = max(scale, 1.0)
    centres = (np.arange(size_out) + 0.5) * scale - 0.5
    first = np.floor(centres - support).astype(np.int64) + 1
    taps = int(np.ceil(2 * support)) + 1
    indices = first[:, None] + np.arange(taps)[None, :]
    weights = np.clip(1.0 - np.abs(indices - centres[:, None]) / support, 0.0, None)
    weights[(indices < 0) | (indices >= size_in)] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    return np.clip(indices, 0, size_in - 1), weights.astype(np.float32)


def _resize_axis(array: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Filter float ``array`` to ``size`` samples along ``axis``."""
    indices, weights = _filter_taps(array.shape[axis], size)
    shape = [1] * array.ndim
    shape[axis] = size
    out = np.zeros(array.shape[:axis] + (size,) + array.shape[axis + 1 :], dtype=np.float32)
    for tap in range(indices.shape[1]):
        out += np.take(array, indices[:, tap], axis=axis) * weights[:, tap].reshape(shape)
    return out


def resize(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize uint8 images ``(..., H, W, C)`` to ``(..., height, width, C)``, antialiased."""
    in_h, in_w = images.shape[-3:-1]
    if (in_h, in_w) == (height, width):
        return images
    out = _resize_axis(images.astype(np.float32), height, images.ndim - 3)
    out = _resize_axis(out, width, images.ndim - 2)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def pad_geometry(in_h: int, in_w: int, height: int, width: int) -> tuple[int, int, int, int]:
    """Content ``(top, left, content_h, content_w)`` of ``resize_with_pad`` to height x width."""
    ratio = max(in_w / width, in_h / height)
    content_h = int(in_h / ratio)
    content_w = int(in_w / ratio)
    top = max(0, int((height - content_h) / 2))
    left = max(0, int((width - content_w) / 2))
    return top, left, content_h, content_w


def resize_with_pad(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """Fit uint8 images ``(..., H, W, C)`` into height x width, keeping aspect, black padding."""
    in_h, in_w = images.shape[-3:-1]
    if (in_h, in_w) == (height, width):
        return images
    top, left, content_h, content_w = pad_geometry(in_h, in_w, height, width)
    canvas = np.zeros((*images.shape[:-3], height, width, images.shape[-1]), dtype=np.uint8)
    content = resize(images, content_h, content_w)
    canvas[..., top : top + content_h, left : left + content_w, :] = content
    return canvas
