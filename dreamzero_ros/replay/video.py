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

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from dreamzero_ros.core.observations.image_codec import (
    decode_compressed,
    encode_compressed,
    msg_to_rgb,
)
from dreamzero_ros.core.observations.messages import stamp_seconds
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

    from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment
    from dreamzero_ros.engine.pipeline.model_inputs import ViewGeometry, prepare_view
    from dreamzero_ros.engine.pipeline.stitching import stitch

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
        """Keep ``chunk.video`` or its kept views' frames (if any) with the times they stand for."""
        if self._chunks >= self.max_chunks:
            return
        if chunk.video is not None:
            video = np.asarray(chunk.video)
        elif chunk.views is not None and chunk.views.has_predicted_video:
            video = chunk.views.decode_predicted()
        else:
            return
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
        self,
        bag: str | Path,
        topics: ReplayTopics,
        path: str | Path,
        allow_partial: bool = False,
        progress: Callable[[float, float], None] | None = None,
    ) -> Path | None:
        """Write the side-by-side mp4 (H.264); None where no chunk carried a video.

        ``allow_partial``: read the intact parts of a damaged bag (see ``BagReader``).
        ``progress(done, total)``: called per frame written.
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
            for index, frame in enumerate(self._frames):
                if progress is not None:
                    progress(index, len(self._frames))
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
        if progress is not None:
            progress(len(self._frames), len(self._frames))
        return path


def _recorded_frames(
    bag: str | Path, topics: ReplayTopics, times: list[float], allow_partial: bool
) -> dict[float, dict[str, object]]:
    """For each of ``times`` (ascending), the newest image message per camera stamped by then.

    Times after a camera's last frame, or before its first, get no entry.
    """
    picked = _newest_messages(bag, topics, times, allow_partial)
    result = {}
    for time in times:
        if all(time in picked[camera] for camera in topics.cameras):
            result[time] = {camera: picked[camera][time] for camera in topics.cameras}
    return result


def _newest_messages(
    bag: str | Path, topics: ReplayTopics, times: list[float], allow_partial: bool
) -> dict[str, dict[float, object]]:
    """Camera -> time -> the newest image message stamped at or before it (none after the last)."""
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
    return picked


@dataclass(frozen=True)
class PredictedChunk:
    """One chunk's predicted frames per camera (JPEG), with the times they stand for."""

    stamp: float
    times: tuple[float, ...]
    cameras: dict[str, list[bytes]]


def predicted_chunk(stamp: float, horizon_s: float, chunk: ActionChunk) -> PredictedChunk | None:
    """The per-camera predicted frames of ``chunk``, from its kept views or its ``video``.

    ``video`` (``return_video``) is cut as DROID's stitched frame; its first frame, where it
    decodes the conditioning latent (``1 + 4k`` frames), is left out.
    """
    from dreamzero_ros.core.observations.imagination import predicted_frame_times
    from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment
    from dreamzero_ros.engine.pipeline.predicted_video import unstitch

    if chunk.views is not None and chunk.views.has_predicted_video:
        frames = chunk.views.decode_predicted()
        per_camera = chunk.views.per_camera(frames)
    elif chunk.video is not None:
        frames = np.asarray(chunk.video)
        if len(frames) % 4 == 1 and len(frames) > 1:
            frames = frames[1:]
        droid = droid_embodiment()
        per_camera = dict(zip(droid.camera_keys, unstitch(frames, droid.layout, 3), strict=True))
    else:
        return None
    times = predicted_frame_times(stamp, horizon_s, len(frames))
    return PredictedChunk(
        stamp,
        tuple(float(t) for t in times),
        {
            key: [encode_compressed(np.ascontiguousarray(f)) for f in view]
            for key, view in per_camera.items()
        },
    )


def recorded_predictions(
    recording: str | Path, node_name: str, cameras: list[str], allow_partial: bool = False
) -> list[PredictedChunk]:
    """The chunks' predicted frames in a recording of ``<node>/predicted_video/<camera>``.

    The per-camera topics are read raw or ``/compressed``, whichever the recording holds.

    Each chunk's frames are stamped at evenly spaced future times and published when the
    node's clock reaches them, a newer chunk's replacing those still to come (so a chunk may be
    recorded in part); a frame that is not later than the previous one by the same spacing
    starts the next chunk.
    """
    per_camera: dict[str, list[list[tuple[float, bytes]]]] = {camera: [] for camera in cameras}
    topics = {
        f'/{node_name}/predicted_video/{camera}{suffix}': camera
        for camera in cameras
        for suffix in ('', '/compressed')
    }
    with BagReader(recording, allow_partial) as reader:
        present = [topic for topic in topics if topic in reader.topics]
        for topic, _, message in reader.messages(present):
            groups = per_camera[topics[topic]]
            stamp = stamp_seconds(message.header.stamp)
            jpeg = (
                bytes(message.data)
                if hasattr(message, 'format')
                else encode_compressed(msg_to_rgb(message))
            )
            group = groups[-1] if groups else None
            if group and _continues(group, stamp):
                group.append((stamp, jpeg))
            else:
                groups.append([(stamp, jpeg)])
    chunks = []
    count = min((len(groups) for groups in per_camera.values()), default=0)
    for index in range(count):
        first = per_camera[cameras[0]][index]
        times = tuple(stamp for stamp, _ in first)
        spacing = times[1] - times[0] if len(times) > 1 else 0.0
        chunks.append(
            PredictedChunk(
                times[0] - spacing,
                times,
                {c: [jpeg for _, jpeg in per_camera[c][index]] for c in cameras},
            )
        )
    return chunks


def _continues(group: list[tuple[float, bytes]], stamp: float) -> bool:
    previous = group[-1][0]
    if stamp <= previous:
        return False
    return len(group) < 2 or abs((stamp - previous) - (previous - group[-2][0])) < 1e-3


class ImaginationStrips:
    """Each chunk's predicted frames above the recorded frames at the same times, per camera.

    Collect chunks with :meth:`add_chunk` (an evaluation's ``on_chunk``) or :meth:`add`
    (:func:`recorded_predictions` of a live recording), then :meth:`render` one PNG per chunk:
    for each camera a row of predicted frames and, below it, the newest camera frame stamped
    at or before each frame's time (black where the bag has none).
    """

    def __init__(self, max_chunks: int = 8) -> None:
        self.max_chunks = max_chunks
        self.chunks: list[PredictedChunk] = []

    def add(self, chunk: PredictedChunk) -> None:
        """Keep a chunk's predicted frames (up to ``max_chunks``)."""
        if len(self.chunks) < self.max_chunks:
            self.chunks.append(chunk)

    def add_chunk(self, record: ChunkRecord, chunk: ActionChunk) -> None:
        """Keep the predicted frames of an evaluated chunk, if it has any."""
        if len(self.chunks) >= self.max_chunks:
            return
        horizon_s = record.step_duration * len(record.actions)
        predicted = predicted_chunk(record.stamp, horizon_s, chunk)
        if predicted is not None:
            self.add(predicted)

    def render(
        self,
        bag: str | Path,
        topics: ReplayTopics,
        allow_partial: bool = False,
        progress: Callable[[float, float], None] | None = None,
    ) -> dict[str, bytes]:
        """``imagination_<k>`` -> PNG of chunk ``k`` against the camera frames of ``bag``.

        ``progress(done, total)``: called per figure drawn.
        """
        if not self.chunks:
            return {}
        times = sorted({t for chunk in self.chunks for t in chunk.times})
        recorded = _recorded_by_camera(bag, topics, times, allow_partial)
        figures = {}
        for index, chunk in enumerate(self.chunks):
            if progress is not None:
                progress(index, len(self.chunks))
            figures[f'imagination_{index}'] = _strip_png(chunk, recorded)
        if progress is not None:
            progress(len(self.chunks), len(self.chunks))
        return figures


def _recorded_by_camera(
    bag: str | Path, topics: ReplayTopics, times: list[float], allow_partial: bool
) -> dict[str, dict[float, np.ndarray]]:
    """Camera -> time -> the newest frame stamped at or before it (none after the last frame)."""
    picked = _newest_messages(bag, topics, times, allow_partial)
    return {
        camera: {time: msg_to_rgb(message) for time, message in messages.items()}
        for camera, messages in picked.items()
    }


def _strip_png(chunk: PredictedChunk, recorded: dict[str, dict[float, np.ndarray]]) -> bytes:
    """A matplotlib figure: per camera, predicted frames over the recorded ones."""
    import io

    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    cameras = list(chunk.cameras)
    columns = len(chunk.times)
    figure, axes = plt.subplots(
        2 * len(cameras), columns, figsize=(1.6 * columns, 2.0 * len(cameras)), squeeze=False
    )
    for row, camera in enumerate(cameras):
        for column, (time, jpeg) in enumerate(zip(chunk.times, chunk.cameras[camera], strict=True)):
            predicted = decode_compressed('jpeg', jpeg)
            real = recorded.get(camera, {}).get(time)
            height, width = predicted.shape[:2]
            real = (
                np.zeros_like(predicted) if real is None else _resize_nearest(real, height, width)
            )
            for offset, image in ((0, predicted), (1, real)):
                axis = axes[2 * row + offset, column]
                axis.imshow(image)
                axis.set_xticks([])
                axis.set_yticks([])
                if column == 0:
                    axis.set_ylabel(f'{camera}\n{"predicted" if offset == 0 else "recorded"}',
                                    fontsize=7)  # fmt: skip
            axes[2 * len(cameras) - 1, column].set_xlabel(
                f'+{time - chunk.stamp:.2f} s', fontsize=7
            )
    figure.suptitle(f'chunk at {chunk.stamp:.2f} s: predicted (upper) and recorded (lower)')
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png', dpi=80)
    plt.close(figure)
    return buffer.getvalue()
