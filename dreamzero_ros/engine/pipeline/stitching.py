# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Camera views stitched into the model's frame, in each of upstream's layouts.

The views arrive prepared (cropped and resized to one size) and in the model's order; see
:data:`.embodiment.LAYOUTS` for where each layout puts them.  Black is zero, as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dreamzero_ros.engine.embodiment import LAYOUTS, stitched_size

__all__ = ['stitch']


def stitch(views: Sequence[torch.Tensor], layout: str) -> torch.Tensor:
    """Stitch uint8 ``(T, h, w, 3)`` views into one ``(T, H, W, 3)`` frame on their device."""
    if layout not in LAYOUTS:
        raise ValueError(f'unknown layout {layout!r}; choose from {list(LAYOUTS)}')
    low, high = LAYOUTS[layout]
    if not low <= len(views) <= high:
        raise ValueError(f'layout {layout!r} takes {low}..{high} views, got {len(views)}')
    shapes = {tuple(view.shape) for view in views}
    if len(shapes) != 1:
        raise ValueError(f'views must share one shape, got {sorted(shapes)}')
    first = views[0]
    if layout == 'single':
        return first
    frames, height, width, channels = first.shape
    out = first.new_zeros((frames, *stitched_size((height, width), layout), channels))
    if layout == 'droid':
        out[:, :height] = views[2].repeat_interleave(2, dim=2)
        out[:, height:, :width] = views[0]
        out[:, height:, width:] = views[1]
        return out
    corners = ((slice(None, height), slice(None, width)), (slice(height, None), slice(None, width)))
    corners += ((slice(None, height), slice(width, None)),)
    for view, (rows, columns) in zip(views, corners, strict=False):
        out[:, rows, columns] = view
    return out
