# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's view topics: what the model saw and what it imagines, only while watched.

Topics (``views.encoding``: sensor_msgs/CompressedImage JPEG on ``<name>/compressed``, or
sensor_msgs/Image rgb8 on ``<name>``, as image_transport names them):

- ``~/model_input``: the stitched frame the model was given (after crop, resize, letterbox and
  stitching), stamped with the observation's stamp;
- ``~/predicted_video``: the decoded predicted frames of each chunk, stitched as the model's
  input, each stamped at the time it stands for
  (:func:`~dreamzero_ros.core.observations.imagination.predicted_frame_times`) and published when
  that time comes, so that an image panel plays the prediction as a video; a newer chunk's frames
  replace those of an older one still to come;
- ``~/predicted_video/<camera_key>``: the same frames cut into each camera's view.

Before each query :meth:`ImaginationViews.request` asks the policy to keep the latents and the
input only for topics that have subscribers (``get_subscription_count``); with none, nothing is
kept or decoded (``views_queries_unobserved`` counts those queries). After the node has
published a chunk's trajectory, :meth:`ImaginationViews.on_chunk` hands the chunk to a worker
thread (:class:`~dreamzero_ros.core.observations.imagination.ViewWorker`) that decodes and encodes,
and a pacer thread publishes: a slow decode or a slow subscriber never holds up a command. With
``views.yield_to_engine`` the worker runs at a lower priority and decodes only while no
inference is in flight (``engine_busy``), giving up between latent frames when one starts
(``views_chunks_skipped``).
"""

from __future__ import annotations

from collections.abc import Callable
import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image

from dreamzero_ros.core.observations.image_codec import RawImage
from dreamzero_ros.core.observations.imagination import (
    FramePacer,
    ViewCounters,
    ViewSettings,
    ViewWorker,
    encode_frame,
    predicted_frame_times,
    view_topics,
)
from dreamzero_ros.policy_types import ActionChunk
from dreamzero_ros.ros.conversions import to_time

#: How much the views' worker thread lowers its scheduling priority with yield_to_engine: far
#: enough to give way to the engine, not so far that, starved, it holds Python's GIL long.
VIEW_NICE = 10

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
        engine_busy: Callable[[], bool] = lambda: False,
    ) -> None:
        """Create the publishers, the worker and the pacer.

        ``step_duration``: seconds per action row the node plays (0: the chunk's own);
        ``engine_busy``: whether an inference is in flight (asked from the worker thread).
        """
        self._node = node
        self._settings = settings
        self._step_duration = step_duration
        self._engine_busy = engine_busy if settings.yield_to_engine else None
        self.counters = ViewCounters()
        msg_type = CompressedImage if settings.encoding == 'jpeg' else Image
        topics = view_topics(camera_keys, settings.encoding)
        self._input = node.create_publisher(msg_type, topics['model_input'], VIEW_QOS)
        self._video = node.create_publisher(msg_type, topics['predicted_video'], VIEW_QOS)
        self._cameras = {
            key: node.create_publisher(msg_type, topics[f'predicted_video/{key}'], VIEW_QOS)
            for key in camera_keys
        }
        nice = VIEW_NICE if settings.yield_to_engine else 0
        self._worker = ViewWorker(self._publish, settings.max_pending, self._on_error, nice=nice)
        self._pacer = FramePacer(self._send_paced, self._now, self._on_error)

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
        """Stop the worker and the pacer and destroy the publishers."""
        self._worker.close()
        self._pacer.close()
        for publisher in (self._input, self._video, *self._cameras.values()):
            self._node.destroy_publisher(publisher)

    # ------------------------------------------------------------------ worker thread

    def _now(self) -> float:
        return self._node.get_clock().now().nanoseconds * 1e-9

    def _publish(self, chunk: ActionChunk) -> None:
        started = time.perf_counter()
        views = chunk.views
        if views.has_model_input and self._input.get_subscription_count() > 0:
            self._send_paced((self._input, self._message(views.model_input_frame(), chunk.stamp)))
        if not views.has_predicted_video:
            return
        busy = self._engine_busy
        frames = None if busy is not None and busy() else views.decode_predicted(stop=busy)
        if frames is None:  # an inference is in flight: it has the cores (or the GPU)
            self.counters.chunks_skipped += 1
            return
        step = self._step_duration or chunk.step_duration
        times = predicted_frame_times(chunk.stamp, step * chunk.horizon, len(frames))
        scheduled = []
        if self._video.get_subscription_count() > 0:
            for frame, stamp in zip(frames, times, strict=True):
                scheduled.append((stamp, (self._video, self._message(frame, stamp))))
        watched = [k for k, p in self._cameras.items() if p.get_subscription_count() > 0]
        if watched:
            per_camera = views.per_camera(frames)
            for key in watched:
                for frame, stamp in zip(per_camera[key], times, strict=True):
                    message = self._message(frame, stamp, key)
                    scheduled.append((stamp, (self._cameras[key], message)))
        self._pacer.replace(scheduled)
        self.counters.chunks_decoded += 1
        self.counters.last_decode_ms = (time.perf_counter() - started) * 1e3

    def _send_paced(self, entry: tuple[Any, Any]) -> None:
        publisher, message = entry
        publisher.publish(message)
        self.counters.frames_published += 1

    def _message(self, frame: Any, stamp: float, frame_id: str = '') -> Any:
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
        return msg

    def _on_error(self, error: BaseException) -> None:
        self.counters.errors += 1
        self._node.get_logger().error(
            f'view publishing failed: {type(error).__name__}: {error}', throttle_duration_sec=5.0
        )
