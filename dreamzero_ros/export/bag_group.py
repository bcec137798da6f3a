# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Several rosbags read as one recording: their topics together, messages in log-time order.

A live-replay recording holds only the node's outputs (trajectories, chunks); read with the bag
it played (cameras, joint states, on the same clock), it is one recording of inputs and
commands. A topic may be in one of the bags only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
import contextlib
import heapq
from pathlib import Path
from typing import Any

from dreamzero_ros.closing import Closing
from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagReader

__all__ = ['BagGroup']


class BagGroup(Closing):
    """Read-only view of ``paths`` as one bag (the subset of :class:`BagReader` export uses)."""

    def __init__(self, paths: Sequence[Path], allow_partial: bool = False) -> None:
        if not paths:
            raise BagError('no bag given')
        self.path = Path(','.join(str(path) for path in paths))
        self._stack = contextlib.ExitStack()
        try:
            self._readers = [
                self._stack.enter_context(BagReader(path, allow_partial)) for path in paths
            ]
        except BaseException:
            self._stack.close()
            raise
        #: Log time of the first message of any bag, and just past the last one, ns.
        self.start_ns: int = min(reader.start_ns for reader in self._readers)
        self.end_ns: int = max(reader.end_ns for reader in self._readers)
        self._owner: dict[str, BagReader] = {}
        for reader in self._readers:
            for topic in reader.topics:
                if topic in self._owner:
                    self._stack.close()
                    raise BagError(
                        f'topic {topic!r} is in both {self._owner[topic].path} and {reader.path}'
                    )
                self._owner[topic] = reader

    def close(self) -> None:
        """Close every bag."""
        self._stack.close()

    @property
    def topics(self) -> dict[str, str]:
        """Topic -> message type of every bag."""
        return {topic: self._owner[topic].topics[topic] for topic in self._owner}

    def message_count(self, topic: str) -> int:
        """Messages the bags' indexes list on ``topic``."""
        return self._owner[topic].message_count(topic) if topic in self._owner else 0

    def require(self, topic: str, msgtypes: Sequence[str], role: str) -> str:
        """See :meth:`BagReader.require` (in the bag holding the topic, or the first)."""
        return self._owner.get(topic, self._readers[0]).require(topic, msgtypes, role)

    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        """``(topic, log_time_ns, message)`` of every bag, merged in log-time order."""
        streams = []
        for reader in self._readers:
            mine = [topic for topic in topics if self._owner.get(topic) is reader]
            if mine:
                streams.append(reader.messages(mine, start_ns, stop_ns))
        return heapq.merge(*streams, key=lambda message: message[1])
