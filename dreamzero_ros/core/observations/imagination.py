# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the model saw and imagined, as stamped images, prepared off the command path (ROS-free).

:class:`ViewSettings` are the node's ``views.*`` parameters. :func:`predicted_frame_times`
stamps a chunk's predicted frames at the times they stand for; :func:`encode_frame` turns a
frame into a JPEG or a raw ``rgb8`` payload; :class:`ViewWorker` runs the decoding in a thread
of its own with a bounded queue (at a lower scheduling priority where asked), so that a slow
decode or a slow subscriber never holds up the thread that publishes commands;
:class:`FramePacer` publishes each predicted frame when the time it stands for comes, so that
an image panel plays the prediction as a video; :class:`ViewCounters` are what the diagnostics
report.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
import inspect
import os
import re
import threading
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.image_codec import RawImage, encode_compressed, encode_raw
from dreamzero_ros.parameter_schema import parameter

#: Image payloads the view topics carry: JPEG in sensor_msgs/CompressedImage, or raw rgb8.
VIEW_ENCODINGS = ('jpeg', 'raw')


def view_topics(camera_keys: tuple[str, ...], encoding: str) -> dict[str, str]:
    """View -> its topic name (``~/`` relative), for each view of the node.

    The views: ``model_input``, ``predicted_video`` and ``predicted_video/<camera>``. As
    image_transport names them: raw images on the base name, JPEG on ``<base>/compressed``
    (so that RViz's image displays and ``image_transport`` subscribers find them).
    """
    suffix = '/compressed' if encoding == 'jpeg' else ''
    topics = {view: f'~/{view}{suffix}' for view in ('model_input', 'predicted_video')}
    for key in camera_keys:
        topic = f'~/predicted_video/{topic_token(key)}{suffix}'
        if topic in topics.values():
            raise ValueError(f'camera keys {camera_keys} give two views the topic {topic}')
        topics[f'predicted_video/{key}'] = topic
    return topics


def topic_token(name: str) -> str:
    """``name`` as one ROS topic name token: letters, digits and ``_``, not starting with a digit.

    Checkpoints' camera keys need not be (YAM's ``top_camera-images-rgb``).
    """
    token = re.sub(r'[^A-Za-z0-9_]', '_', name)
    return f'camera_{token}' if not token or token[0].isdigit() else token


@dataclass(frozen=True)
class ViewSettings:
    """The model's input and predicted video as images (``views.*``)."""

    enabled: bool = parameter(
        True,
        'Publish ~/model_input (the stitched frame the model saw) and ~/predicted_video (its '
        'decoded predicted frames, stitched and per camera) while someone subscribes; nothing '
        'is kept or decoded otherwise, and never on the command path.',
    )
    encoding: str = parameter(
        'jpeg',
        'jpeg: sensor_msgs/CompressedImage; raw: sensor_msgs/Image (rgb8).',
        choices=VIEW_ENCODINGS,
    )
    max_pending: int = parameter(
        1,
        'Chunks waiting to be decoded; a newer chunk replaces the oldest waiting one '
        '(counted as views_chunks_dropped).',
        range=(1, 16),
    )
    yield_to_engine: bool = parameter(
        True,
        'Decode the predicted video at a lower scheduling priority and only while no '
        'inference is in flight: a decode that would overlap one is given up between latent '
        'frames (counted as views_chunks_skipped), so watching never slows the commands; on '
        'a machine whose engine is always busy the predicted video then shows only in its '
        'pauses. false: decode every chunk at normal priority, beside the inference.',
    )


def predicted_frame_times(stamp: float, horizon_s: float, count: int) -> np.ndarray:
    """Stamps of ``count`` predicted frames spread evenly over a chunk's horizon.

    Frame ``j`` stands for ``stamp + (j + 1) * horizon_s / count``: the last frame is the end
    of the chunk, as the replay's video comparison places them.
    """
    if count < 1 or horizon_s <= 0:
        raise ValueError(f'need count >= 1 and horizon_s > 0, got {count}, {horizon_s}')
    return stamp + (np.arange(count) + 1) * (horizon_s / count)


def encode_frame(rgb: np.ndarray, encoding: str) -> bytes | RawImage:
    """One ``(H, W, 3)`` uint8 frame as JPEG bytes or a raw ``rgb8`` image."""
    if encoding not in VIEW_ENCODINGS:
        raise ValueError(f'encoding {encoding!r} is not one of {VIEW_ENCODINGS}')
    rgb = np.ascontiguousarray(rgb)
    return encode_compressed(rgb, 'jpeg') if encoding == 'jpeg' else encode_raw(rgb, 'rgb8')


def policy_keeps_views(policy: Any) -> bool:
    """Whether ``policy`` (or the policy a SerializedPolicy wraps) can keep a chunk's views."""
    inner = getattr(policy, 'policy', policy)
    try:
        parameters = inspect.signature(inner.infer).parameters
    except (TypeError, ValueError):
        return False
    return 'predicted_video' in parameters and 'model_input' in parameters


@dataclass
class ViewCounters:
    """What the view publisher did (reported in the diagnostics).

    Attributes:
        queries_unobserved: queries sent while nobody subscribed (nothing kept or decoded).
        chunks_decoded: chunks whose views were decoded and published.
        chunks_skipped: chunks whose predicted video was not decoded, or given up, because
            an inference was in flight (``yield_to_engine``).
        chunks_dropped: chunks replaced in the queue by a newer one before being decoded.
        frames_published: image messages published.
        errors: decodes or publishes that failed (logged; the command path never sees them).
        last_decode_ms: decode and encode time of the last chunk, milliseconds.

    """

    queries_unobserved: int = 0
    chunks_decoded: int = 0
    chunks_skipped: int = 0
    chunks_dropped: int = 0
    frames_published: int = 0
    errors: int = 0
    last_decode_ms: float = float('nan')

    def values(self) -> tuple[tuple[str, str], ...]:
        """Diagnostic key/value pairs."""
        return (
            ('views_queries_unobserved', str(self.queries_unobserved)),
            ('views_chunks_decoded', str(self.chunks_decoded)),
            ('views_chunks_skipped', str(self.chunks_skipped)),
            ('views_chunks_dropped', str(self.chunks_dropped)),
            ('views_frames_published', str(self.frames_published)),
            ('views_errors', str(self.errors)),
            ('views_last_decode_ms', f'{self.last_decode_ms:.1f}'),
        )


class _QueueThread:
    """A daemon thread serving a queue under one condition; errors go to ``on_error``.

    Subclasses fill ``_queue`` and start ``_thread`` once set up; :meth:`close` stops it.
    """

    def __init__(self, name: str, on_error: Callable[[BaseException], None] | None) -> None:
        self._on_error = on_error
        self._queue: deque[Any] = deque()
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def close(self, timeout: float = 5.0) -> None:
        """Drop what waits, finish the item in hand (up to ``timeout``) and stop the thread."""
        with self._wake:
            self._stopped = True
            self._queue.clear()
            self._wake.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        raise NotImplementedError

    def _serve(self, call: Callable[[Any], None], item: Any) -> None:
        """``call(item)`` on this thread; an exception goes to ``on_error``, never further."""
        try:
            call(item)
        except Exception as error:  # noqa: BLE001 - reported, never raised into the node
            if self._on_error is not None:
                self._on_error(error)


class ViewWorker(_QueueThread):
    """A daemon thread that runs ``handle(job)`` for submitted jobs, newest kept when full.

    :meth:`submit` never blocks: beyond ``max_pending`` waiting jobs the oldest waiting one is
    dropped. ``on_error`` receives any exception ``handle`` raises; the thread keeps going.
    ``nice`` > 0 lowers the thread's scheduling priority (Linux: per thread; the threads torch
    starts from it for its own parallel work inherit it).
    """

    def __init__(
        self,
        handle: Callable[[Any], None],
        max_pending: int = 1,
        on_error: Callable[[BaseException], None] | None = None,
        name: str = 'dreamzero-views',
        nice: int = 0,
    ) -> None:
        if max_pending < 1:
            raise ValueError(f'max_pending must be >= 1, got {max_pending}')
        super().__init__(name, on_error)
        self._handle = handle
        self._max_pending = max_pending
        self._busy = False
        self._nice = nice
        #: The thread's scheduling priority once it runs (``os.getpriority``), None where unknown.
        self.priority: int | None = None
        self._thread.start()

    def submit(self, job: Any) -> bool:
        """Queue ``job``; False if an older waiting job was dropped for it."""
        with self._wake:
            dropped = len(self._queue) >= self._max_pending
            if dropped:
                self._queue.popleft()
            self._queue.append(job)
            self._wake.notify()
        return not dropped

    def idle(self) -> bool:
        """True when no job is waiting or running."""
        with self._wake:
            return not self._queue and not self._busy

    def _run(self) -> None:
        self.priority = _lower_priority(self._nice)
        while True:
            with self._wake:
                while not self._queue and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                job = self._queue.popleft()
                self._busy = True
            try:
                self._serve(self._handle, job)
            finally:
                with self._wake:
                    self._busy = False


def _lower_priority(nice: int) -> int | None:
    """Add ``nice`` to the calling thread's niceness (Linux: this thread only); the result."""
    if not hasattr(os, 'setpriority'):
        return None
    thread = threading.get_native_id()
    current = os.getpriority(os.PRIO_PROCESS, thread)
    if nice > 0:
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + nice))
    return os.getpriority(os.PRIO_PROCESS, thread)


class FramePacer(_QueueThread):
    """Publishes scheduled items when their time comes, in a thread of its own.

    :meth:`replace` drops what is still scheduled (an older prediction) and schedules the new
    items; each ``(due, item)`` goes to ``publish(item)`` once ``clock()`` reaches ``due``
    (at once if it has passed), in order.

    Args:
        publish: called with each item, on the pacer's thread.
        clock: the time the ``due`` values are in (the node's clock), seconds.
        on_error: receives any exception ``publish`` raises; the thread keeps going.
        poll_s: longest wait between two looks at the clock (it may be simulated).

    """

    def __init__(
        self,
        publish: Callable[[Any], None],
        clock: Callable[[], float],
        on_error: Callable[[BaseException], None] | None = None,
        poll_s: float = 0.02,
        name: str = 'dreamzero-view-pacer',
    ) -> None:
        super().__init__(name, on_error)
        self._publish = publish
        self._clock = clock
        self._poll_s = poll_s
        self._thread.start()

    def replace(self, items: list[tuple[float, Any]]) -> int:
        """Schedule ``items`` (``(due, item)``) instead of what is left; how many were dropped."""
        with self._wake:
            dropped = len(self._queue)
            self._queue = deque(sorted(items, key=lambda entry: entry[0]))
            self._wake.notify()
        return dropped

    def pending(self) -> int:
        """Items still scheduled."""
        with self._wake:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and (not self._queue or self._queue[0][0] > self._clock()):
                    wait = self._poll_s
                    if self._queue:
                        wait = min(wait, max(0.0, self._queue[0][0] - self._clock()))
                    self._wake.wait(wait if self._queue else None)
                if self._stopped:
                    return
                _, item = self._queue.popleft()
            self._serve(self._publish, item)
