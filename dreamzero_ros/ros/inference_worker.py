# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's inference thread: one query at a time, off the executor.

The executor thread hands each query's observation to :meth:`InferenceWorker.submit`; the policy
runs on a thread of its own (a local engine, or a remote server's round trip), so that the
control ticks go on meanwhile. A finished query is put on a queue and a guard condition wakes
the executor, which takes it with :meth:`InferenceWorker.finished` (rclpy calls into the node
from its own thread only). Each answer carries the node's own timing (:class:`Answer`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
import queue
import time
from typing import Any

from rclpy.node import Node

from dreamzero_ros.core.control.control_loop import Query
from dreamzero_ros.core.policy.serialized_policy import SerializedPolicy
from dreamzero_ros.policy_types import ActionChunk


@dataclass(frozen=True)
class Answer:
    """A chunk from the worker thread, with the node's own timing (``perf_counter`` seconds).

    Attributes:
        chunk: the policy's answer.
        query_delay: from the start of the input read that built the observation to the start
            of ``policy.infer`` (decode, resize, checks, hand-over to the worker).
        finished: when ``policy.infer`` returned.

    """

    chunk: ActionChunk
    query_delay: float
    finished: float


class InferenceWorker:
    """Runs the policy's queries on one thread; wakes ``node``'s executor with each result."""

    def __init__(self, node: Node, on_finished: Callable[[], None]) -> None:
        """``on_finished`` runs on the executor thread after queries finished."""
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._ready = node.create_guard_condition(on_finished)
        self._pool: ThreadPoolExecutor | None = None
        self._policy: SerializedPolicy | None = None

    def start(self, policy: SerializedPolicy) -> None:
        """Start the thread that runs ``policy``."""
        self._policy = policy
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix='dreamzero-infer')

    def submit(self, query: Query, read_at: float, options: dict[str, bool]) -> None:
        """Run ``query`` (``options``: what the policy keeps for the views).

        ``read_at``: ``perf_counter`` at the start of the input read that built it.
        """
        future = self._pool.submit(self._infer, query.observation, read_at, options)
        future.add_done_callback(lambda done: self._on_done(query, done))

    def reset(self, session_id: str) -> None:
        """Reset the policy's session ``session_id``, after the queries before it."""
        if self._pool is not None:
            self._pool.submit(self._policy.reset, session_id)

    def finished(self) -> Iterator[tuple[Query, Future]]:
        """Each query finished since the last call, with its future (of an :class:`Answer`)."""
        while True:
            try:
                yield self._results.get_nowait()
            except queue.Empty:
                return

    def stop(self) -> None:
        """Cancel the queries not started; wait for the one running."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._policy = None

    def _infer(self, observation: Any, read_at: float, options: dict[str, bool]) -> Answer:
        """Worker thread: one inference, timed."""
        started = time.perf_counter()
        chunk = self._policy.infer(observation, **options)
        return Answer(chunk, started - read_at, time.perf_counter())

    def _on_done(self, query: Query, future: Future) -> None:
        """Worker thread: hand the result to the executor thread."""
        self._results.put((query, future))
        self._ready.trigger()
