# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's view topics: what the model saw and what it imagines, only while watched.

Topics (``views.encoding``: sensor_msgs/CompressedImage JPEG on ``<name>/compressed``, or
sensor_msgs/Image rgb8 on ``<name>``, as image_transport names them):

- ``~/model_input``: the stitched frame the model was given (after crop, resize, letterbox and
  stitching), stamped with the observation's stamp;
- ``~/predicted_video``: the decoded predicted frames of each chunk, stitched as the model's
  input, each stamped at the time it stands for
  (:func:`~dreamzero_ros.core.imagination.predicted_frame_times`);
- ``~/predicted_video/<camera_key>``: the same frames cut into each camera's view.

Before each query :meth:`ImaginationViews.request` asks the policy to keep the latents and the
input only for topics that have subscribers (``get_subscription_count``); with none, nothing is
kept or decoded (``views_queries_unobserved`` counts those queries). After the node has
published a chunk's trajectory, :meth:`ImaginationViews.on_chunk` hands the chunk to a worker
thread (:class:`~dreamzero_ros.core.imagination.ViewWorker`) that decodes, encodes and
publishes: a slow decode or a slow subscriber never holds up a command.
"""

from __future__ import annotations

import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image

from dreamzero_ros.core.image_codec import RawImage
from dreamzero_ros.core.imagination import (
    ViewCounters,
    ViewSettings,
    ViewWorker,
    encode_frame,
    predicted_frame_times,
    view_topics,
)
from dreamzero_ros.policy_types import ActionChunk
from dreamzero_ros.ros.conversions import to_time

#: Reliable, keep-last: a burst of one chunk's frames fits, and a slow reader loses old frames
#: instead of holding up the writer.
VIEW_QOS = QoSProfile(
    depth=16, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE
)


class ImaginationViews:
    """The view publishers of one configured node, and the thread that feeds them."""

    def __init__(
        self,
        node: Node,
        settings: ViewSettings,
        camera_keys: tuple[str, ...],
        step_duration: float,
    ) -> None:
        """Create the publishers and the worker.

        ``step_duration``: seconds per action row the node plays (0: the chunk's own).
        """
        self._node = node
        self._settings = settings
        self._step_duration = step_duration
        self.counters = ViewCounters()
        msg_type = CompressedImage if settings.encoding == 'jpeg' else Image
        topics = view_topics(camera_keys, settings.encoding)
        self._input = node.create_publisher(msg_type, topics['model_input'], VIEW_QOS)
        self._video = node.create_publisher(msg_type, topics['predicted_video'], VIEW_QOS)
        self._cameras = {
            key: node.create_publisher(msg_type, topics[f'predicted_video/{key}'], VIEW_QOS)
            for key in camera_keys
        }
        self._worker = ViewWorker(self._publish, settings.max_pending, self._on_error)

    def request(self) -> dict[str, bool]:
        """The ``infer`` options that keep what subscribers will read ({} with none)."""
        video = self._video.get_subscription_count() > 0 or any(
            publisher.get_subscription_count() > 0 for publisher in self._cameras.values()
        )
        model_input = self._input.get_subscription_count() > 0
        if not (video or model_input):
            self.counters.queries_unobserved += 1
            return {}
        return {'predicted_video': video, 'model_input': model_input}

    def on_chunk(self, chunk: ActionChunk) -> None:
        """Hand a published chunk's views to the worker (returns at once)."""
        if chunk.views is None:
            return
        if not self._worker.submit(chunk):
            self.counters.chunks_dropped += 1

    def idle(self) -> bool:
        """True when no chunk is waiting or being decoded."""
        return self._worker.idle()

    def destroy(self) -> None:
        """Stop the worker and destroy the publishers."""
        self._worker.close()
        for publisher in (self._input, self._video, *self._cameras.values()):
            self._node.destroy_publisher(publisher)

    # ------------------------------------------------------------------ worker thread

    def _publish(self, chunk: ActionChunk) -> None:
        started = time.perf_counter()
        views = chunk.views
        published = 0
        if views.has_model_input and self._input.get_subscription_count() > 0:
            published += self._send(self._input, views.model_input_frame(), chunk.stamp, '')
        if views.has_predicted_video:
            frames = views.decode_predicted()
            step = self._step_duration or chunk.step_duration
            times = predicted_frame_times(chunk.stamp, step * chunk.horizon, len(frames))
            if self._video.get_subscription_count() > 0:
                for frame, stamp in zip(frames, times, strict=True):
                    published += self._send(self._video, frame, stamp, '')
            watched = [k for k, p in self._cameras.items() if p.get_subscription_count() > 0]
            if watched:
                per_camera = views.per_camera(frames)
                for key in watched:
                    for frame, stamp in zip(per_camera[key], times, strict=True):
                        published += self._send(self._cameras[key], frame, stamp, key)
        self.counters.frames_published += published
        self.counters.chunks_decoded += 1
        self.counters.last_decode_ms = (time.perf_counter() - started) * 1e3

    def _send(self, publisher: Any, frame: Any, stamp: float, frame_id: str) -> int:
        payload = encode_frame(frame, self._settings.encoding)
        if isinstance(payload, RawImage):
            msg = Image(
                encoding=payload.encoding,
                height=payload.height,
                width=payload.width,
                step=payload.step,
                data=payload.data,
                is_bigendian=payload.is_bigendian,
            )
        else:
            msg = CompressedImage(format='jpeg', data=payload)
        msg.header.stamp = to_time(stamp)
        msg.header.frame_id = frame_id
        publisher.publish(msg)
        return 1

    def _on_error(self, error: BaseException) -> None:
        self.counters.errors += 1
        self._node.get_logger().error(
            f'view publishing failed: {type(error).__name__}: {error}', throttle_duration_sec=5.0
        )
