# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A policy shared by several threads (node worker, OpenPI bridge) that runs one call at a time."""

from __future__ import annotations

from collections.abc import Callable, Mapping
import threading
from typing import Any

from dreamzero_ros.policy_types import ActionChunk, Observation, Policy


class SerializedPolicy:
    """Wraps a :class:`Policy` so that ``infer`` and ``reset`` never run concurrently.

    The engine keeps per-session caches and (with CFG parallel) runs collective operations that
    every rank must enter in the same order; both need calls one at a time.
    """

    def __init__(self, policy: Policy, on_close: Callable[[], None] | None = None) -> None:
        self.policy = policy
        self._on_close = on_close
        self._lock = threading.Lock()

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The wrapped policy's metadata."""
        return self.policy.metadata

    def infer(self, observation: Observation, **options: Any) -> ActionChunk:
        """Run the wrapped policy's ``infer`` (with ``options``) once no other call is running."""
        with self._lock:
            return self.policy.infer(observation, **options)

    def reset(self, session_id: str = 'default') -> None:
        """Run the wrapped policy's ``reset`` once no other call is running."""
        with self._lock:
            self.policy.reset(session_id)

    def close(self) -> None:
        """Close the wrapped policy (a connection) and run ``on_close`` (a process group)."""
        with self._lock:
            close = getattr(self.policy, 'close', None)
            if callable(close):
                close()
            if self._on_close is not None:
                self._on_close()
                self._on_close = None
