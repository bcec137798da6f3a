# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Encode one camera of an episode as upstream's DROID converter does, and keep its statistics.

H.264 (libx264) ``yuv420p`` with ``convert_droid.py``'s options (``ultrafast``, ``zerolatency``:
no B-frames, CRF 23, one thread), frame ``k`` at ``k / fps`` seconds. LeRobot v2.1's per-episode
image statistics (per channel min, max, mean, std in [0, 1]) are accumulated over every frame,
downsampled as LeRobot does (every ``n``-th pixel where the larger side is 300 or more).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

__all__ = ['EncoderSettings', 'VideoEncoder']

#: convert_droid.py's encoder options.
X264_OPTIONS = {
    'threads': '1',
    'thread_type': 'slice',
    'preset': 'ultrafast',
    'tune': 'zerolatency',
    'crf': '23',
}
#: LeRobot's ``auto_downsample_height_width``: sides from which frames are downsampled, target.
_DOWNSAMPLE_FROM = 300
_DOWNSAMPLE_TARGET = 150


class EncoderSettings:
    """Frame rate and x264 options (``crf`` overrides convert_droid.py's 23)."""

    def __init__(self, fps: float, crf: int | None = None) -> None:
        self.rate = Fraction(fps).limit_denominator(1000)
        self.options = dict(X264_OPTIONS)
        if crf is not None:
            self.options['crf'] = str(int(crf))


class VideoEncoder:
    """One ``(height, width)`` RGB camera written to ``path`` frame by frame."""

    def __init__(self, path: Path, height: int, width: int, settings: EncoderSettings) -> None:
        import av

        self.path = path
        self._container = av.open(str(path), 'w')
        self._stream = self._container.add_stream('h264', rate=settings.rate)
        self._stream.options = settings.options
        self._stream.width, self._stream.height = width, height
        self._stream.pix_fmt = 'yuv420p'
        self._time_base = 1 / settings.rate
        self._frame_class = av.VideoFrame
        self.frames = 0
        larger = max(height, width)
        self._step = larger // _DOWNSAMPLE_TARGET if larger >= _DOWNSAMPLE_FROM else 1
        self._sum = np.zeros(3)
        self._squares = np.zeros(3)
        self._min = np.full(3, np.inf)
        self._max = np.full(3, -np.inf)
        self._pixels = 0

    def add(self, rgb: np.ndarray) -> None:
        """Encode the next frame, ``(height, width, 3)`` uint8."""
        frame = self._frame_class.from_ndarray(np.ascontiguousarray(rgb), format='rgb24')
        frame.pts = self.frames
        frame.time_base = self._time_base
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.frames += 1
        sample = rgb[:: self._step, :: self._step].reshape(-1, 3).astype(np.float64) / 255.0
        self._sum += sample.sum(axis=0)
        self._squares += (sample**2).sum(axis=0)
        self._min = np.minimum(self._min, sample.min(axis=0))
        self._max = np.maximum(self._max, sample.max(axis=0))
        self._pixels += len(sample)

    def close(self) -> dict[str, list]:
        """Flush and close the file; LeRobot's image statistics of the frames, ``(3, 1, 1)``."""
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        mean = self._sum / max(self._pixels, 1)
        std = np.sqrt(np.maximum(self._squares / max(self._pixels, 1) - mean**2, 0.0))
        values = {'min': self._min, 'max': self._max, 'mean': mean, 'std': std}
        stats: dict[str, list] = {k: v.reshape(3, 1, 1).tolist() for k, v in values.items()}
        stats['count'] = [self.frames]
        return stats

    def abort(self) -> None:
        """Close without finishing (the file is to be removed)."""
        try:
            self._container.close()
        except Exception:  # noqa: BLE001 - an unfinished stream may fail to close; it is discarded
            pass
