# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A video of the policy's predicted future frames beside the recorded ones at the same times.

Predicted frames of a chunk are spread evenly over its horizon: frame ``j`` of ``T`` is placed at
``stamp + (j + 1) * horizon_s / T``. The recorded side is the newest camera frame stamped at or
before that time in each view, stitched the way the engine stitches DROID views (wrist on top,
exteriors below), so both sides show the same layout. Predicted frames are kept JPEG-compressed
until the bag's second pass fetches the recorded frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from dreamzero_ros.core.image_codec import decode_compressed, encode_compressed, msg_to_rgb
from dreamzero_ros.core.messages import stamp_seconds
from dreamzero_ros.policy_types import ActionChunk
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.evaluation import ChunkRecord
from dreamzero_ros.replay.observations import camera_topics
from dreamzero_ros.replay.topics import ReplayTopics


@dataclass(frozen=True)
class _Frame:
    time: float
    jpeg: bytes


def _resize_nearest(image: np.ndarray, height: int, width: int) -> np.ndarray:
    rows = np.arange(height) * image.shape[0] // height
    cols = np.arange(width) * image.shape[1] // width
    return image[rows][:, cols]


def _stitch(messages: dict[str, object]) -> np.ndarray:
    """Decode one image message per view and stitch them as the engine stitches DROID views."""
    import torch

    from dreamzero_ros.engine.model_inputs import ViewGeometry, prepare_view
    from dreamzero_ros.engine.stitching import stitch
    from dreamzero_ros.engine.synthetic_droid import droid_embodiment

    droid = droid_embodiment()
    views = [
        torch.from_numpy(prepare_view(msg_to_rgb(messages[c.key])[None], ViewGeometry.of(droid, c)))
        for c in droid.cameras
    ]
    return stitch(views, droid.layout).numpy()[0]


class VideoComparison:
    """Collect predicted frames during evaluation (:meth:`add_chunk`), then :meth:`write`."""

    def __init__(self, max_chunks: int = 50) -> None:
        self.max_chunks = max_chunks
        self._frames: list[_Frame] = []
        self._chunks = 0
        self.fps = 0.0

    def add_chunk(self, record: ChunkRecord, chunk: ActionChunk) -> None:
        """Keep ``chunk.video`` (if any) with the times its frames stand for."""
        if chunk.video is None or self._chunks >= self.max_chunks:
            return
        video = np.asarray(chunk.video)
        horizon_s = record.step_duration * len(record.actions)
        self.fps = self.fps or len(video) / horizon_s
        self._chunks += 1
        for index, frame in enumerate(video):
            time = record.stamp + (index + 1) * horizon_s / len(video)
            self._frames.append(_Frame(time, encode_compressed(np.ascontiguousarray(frame))))

    @property
    def frame_count(self) -> int:
        """Predicted frames collected so far."""
        return len(self._frames)

    def write(
        self, bag: str | Path, topics: ReplayTopics, path: str | Path, allow_partial: bool = False
    ) -> Path | None:
        """Write the side-by-side mp4 (H.264); None where no chunk carried a video.

        ``allow_partial``: read the intact parts of a damaged bag (see ``BagReader``).
        """
        if not self._frames:
            return None
        times = sorted({f.time for f in self._frames})
        recorded = _recorded_frames(bag, topics, times, allow_partial)
        import av

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with av.open(str(path), 'w') as container:
            stream = None
            for frame in self._frames:
                predicted = decode_compressed('jpeg', frame.jpeg)
                height, width = predicted.shape[:2]
                real = recorded.get(frame.time)
                real = (
                    np.zeros_like(predicted)
                    if real is None
                    else _resize_nearest(_stitch(real), height, width)
                )
                pair = np.concatenate([predicted, real], axis=1)
                pair = pair[: pair.shape[0] // 2 * 2, : pair.shape[1] // 2 * 2]
                if stream is None:
                    stream = container.add_stream(
                        'libx264', rate=Fraction(self.fps).limit_denominator(1000)
                    )
                    stream.width, stream.height = pair.shape[1], pair.shape[0]
                    stream.pix_fmt = 'yuv420p'
                for packet in stream.encode(av.VideoFrame.from_ndarray(pair, format='rgb24')):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
        return path


def _recorded_frames(
    bag: str | Path, topics: ReplayTopics, times: list[float], allow_partial: bool
) -> dict[float, dict[str, object]]:
    """For each of ``times`` (ascending), the newest image message per camera stamped by then.

    Times after a camera's last frame, or before its first, get no entry.
    """
    picked: dict[str, dict[float, object]] = {camera: {} for camera in topics.cameras}
    cursor = dict.fromkeys(topics.cameras, 0)
    previous: dict[str, object] = {}
    with BagReader(bag, allow_partial) as reader:
        camera_of = {topic: camera for camera, topic in camera_topics(reader, topics).items()}
        for topic, _, message in reader.messages(list(camera_of)):
            camera = camera_of[topic]
            stamp = stamp_seconds(message.header.stamp)
            while cursor[camera] < len(times) and stamp > times[cursor[camera]]:
                if camera in previous:
                    picked[camera][times[cursor[camera]]] = previous[camera]
                cursor[camera] += 1
            previous[camera] = message
    result = {}
    for time in times:
        if all(time in picked[camera] for camera in topics.cameras):
            result[time] = {camera: picked[camera][time] for camera in topics.cameras}
    return result
