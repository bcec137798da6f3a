# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An episode's video: the rendered cameras beside the model's predicted video, at the same times.

Left, the rendered cameras in DreamZero's DROID layout (the wrist view twice as wide on top, the
two exterior views below); right, the predicted frame that stands for the same moment (the
newest predicted frame stamped at or before it: the node stamps predicted frame ``j`` of a chunk
with the time it stands for), resized to the same height; a grey panel where the policy predicts
no video (a scripted or remote policy). H.264 in an mp4 file.
"""

from __future__ import annotations

import bisect
from fractions import Fraction
from pathlib import Path

import numpy as np

#: Grey of the panel where no predicted frame exists yet.
NO_PREDICTION = 48


def droid_layout(views: list[np.ndarray]) -> np.ndarray:
    """Wrist view (first) twice as wide on top, the two exterior views side by side below."""
    wrist, first, second = views
    return np.concatenate([np.repeat(wrist, 2, axis=1), np.concatenate([first, second], 1)], 0)


def _resize_nearest(image: np.ndarray, height: int, width: int) -> np.ndarray:
    rows = np.arange(height) * image.shape[0] // height
    cols = np.arange(width) * image.shape[1] // width
    return image[rows][:, cols]


class EpisodeVideo:
    """Collects rendered frames and predicted frames by time; :meth:`write` the mp4."""

    def __init__(self, fps: float = 15.0, every: int = 1) -> None:
        self.fps = fps / every
        self.every = every
        self._rendered: list[tuple[float, np.ndarray]] = []
        self._predicted: list[tuple[float, np.ndarray]] = []
        self._seen = 0

    def add_rendered(self, time: float, views: list[np.ndarray]) -> None:
        """The cameras rendered at ``time`` (every ``every``-th call is kept)."""
        self._seen += 1
        if (self._seen - 1) % self.every == 0:
            self._rendered.append((time, droid_layout(views)))

    def add_predicted(self, time: float, frame: np.ndarray) -> None:
        """A predicted frame standing for ``time``."""
        bisect.insort(self._predicted, (time, frame), key=lambda item: item[0])

    @property
    def predicted_frames(self) -> int:
        """Predicted frames collected."""
        return len(self._predicted)

    def frames(self) -> list[np.ndarray]:
        """The side-by-side frames, in time order."""
        times = [time for time, _ in self._predicted]
        out = []
        for time, rendered in self._rendered:
            height, width = rendered.shape[:2]
            index = bisect.bisect_right(times, time) - 1
            if index < 0:
                predicted = np.full_like(rendered, NO_PREDICTION)
            else:
                predicted = _resize_nearest(self._predicted[index][1], height, width)
            pair = np.concatenate([rendered, predicted], axis=1)
            out.append(pair[: height // 2 * 2, : pair.shape[1] // 2 * 2])
        return out

    def write(self, path: str | Path) -> Path | None:
        """Write the mp4; None when nothing was rendered."""
        frames = self.frames()
        if not frames:
            return None
        import av

        path = Path(path)
        with av.open(str(path), 'w') as container:
            stream = container.add_stream('libx264', rate=Fraction(self.fps).limit_denominator(100))
            stream.height, stream.width = frames[0].shape[:2]
            stream.pix_fmt = 'yuv420p'
            for frame in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
        return path
