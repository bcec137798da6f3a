# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Record chosen topics into one rosbag2 per episode, as ``ros2 bag record`` would.

Each topic is subscribed once, raw (serialised CDR, written unchanged with the package's bag
writer, :class:`~dreamzero_ros.replay.bag_io.BagWriter`, at the simulated time of arrival);
messages arriving between episodes are dropped. Transient-local topics (``robot_description``,
``/tf_static``, the task) are subscribed transient local, and their last message is written
again at the start of each bag, so that every episode's bag is complete on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
import threading
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.live_replay import message_class


class EpisodeRecorder:
    """Subscribes ``topics`` (name -> ``pkg/msg/Type``) on ``node``; a bag per :meth:`start`.

    ``clock`` gives the log time in seconds (the simulated time). ``latched`` names the
    transient-local topics.
    """

    def __init__(
        self,
        node: Node,
        topics: Mapping[str, str],
        clock: Callable[[], float],
        latched: tuple[str, ...] = (),
        storage: str = 'mcap',
    ) -> None:
        self.topics = dict(topics)
        self.clock = clock
        self.storage = storage
        self.counts: dict[str, int] = {}
        self._writer: BagWriter | None = None
        self._lock = threading.Lock()
        self._latched: dict[str, bytes] = {}
        for topic, msgtype in self.topics.items():
            if topic in latched:
                qos: Any = QoSProfile(
                    depth=1,
                    reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.TRANSIENT_LOCAL,
                )
            else:
                qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
            node.create_subscription(
                message_class(msgtype),
                topic,
                lambda data, topic=topic: self._on_message(topic, data, topic in latched),
                qos,
                raw=True,
            )

    def _on_message(self, topic: str, data: bytes, latched: bool) -> None:
        with self._lock:
            if latched:
                self._latched[topic] = data
            if self._writer is not None:
                self._writer.write_raw(topic, int(self.clock() * 1e9), data)
                self.counts[topic] = self.counts.get(topic, 0) + 1

    def start(self, path: str | Path) -> None:
        """Record into the new bag ``path`` from now on."""
        writer = BagWriter(path, self.storage)
        for topic, msgtype in self.topics.items():
            writer.add_topic(topic, msgtype)
        with self._lock:
            self.counts = {}
            log_ns = int(self.clock() * 1e9)
            for topic, data in self._latched.items():
                writer.write_raw(topic, log_ns, data)
                self.counts[topic] = 1
            self._writer = writer

    def stop(self) -> dict[str, int]:
        """Close the bag; the messages written per topic."""
        with self._lock:
            writer, self._writer = self._writer, None
            counts = dict(self.counts)
        if writer is not None:
            writer.close()
        return counts
