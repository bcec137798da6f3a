# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Turn a bag's camera and joint messages into policy observations at query times.

Frames and joint states go through the node's own :class:`ObservationCache`, in log-time order,
and each query builds an observation at ``now`` = its log time: what the node, driven by this bag
with ``/clock`` from the log times, would have seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dreamzero_ros.core.observations.messages import NS_PER_S, to_ns
from dreamzero_ros.core.observations.observation_cache import CacheConfig, ObservationCache, Refusal
from dreamzero_ros.policy_types import Observation
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.topics import IMAGE_TYPES, JOINT_STATE_TYPE, ReplayTopics


@dataclass(frozen=True)
class Query:
    """One query instant: the observation built then, or why none could be."""

    time: float
    result: Observation | Refusal


def query_times(start_s: float, stop_s: float, period_s: float) -> list[float]:
    """``start_s, start_s + period_s, ...`` up to and including ``stop_s``."""
    if period_s <= 0:
        raise ValueError(f'query period must be > 0, got {period_s}')
    count = int((stop_s - start_s) / period_s + 1e-9) + 1 if stop_s >= start_s else 0
    return [start_s + index * period_s for index in range(count)]


def camera_topics(reader: BagReader, topics: ReplayTopics) -> dict[str, str]:
    """Camera -> the bag topic its images are on, following ``topics.image_transport``.

    Raises:
        BagError: a camera's topic is absent, empty or not an image type.

    """
    resolved = {}
    for camera in topics.cameras:
        raw, compressed = topics.image_topic(camera, False), topics.image_topic(camera, True)
        if topics.image_transport == 'raw':
            candidates = [raw]
        elif topics.image_transport == 'compressed':
            candidates = [compressed]
        else:
            candidates = [raw, compressed]
        topic = next((t for t in candidates if t in reader.topics), candidates[0])
        reader.require(topic, IMAGE_TYPES, f'camera {camera!r}')
        resolved[camera] = topic
    return resolved


def check_topics(reader: BagReader, topics: ReplayTopics) -> dict[str, str]:
    """Check every camera and the joint-state topic; return the camera topics."""
    cameras = camera_topics(reader, topics)
    reader.require(topics.joint_states, (JOINT_STATE_TYPE,), 'joint state')
    return cameras


def observations(
    reader: BagReader,
    topics: ReplayTopics,
    cache_config: CacheConfig,
    times: list[float],
    prompt: str,
    session_id: str = 'default',
    on_message: Callable[[str, int, Any], None] | None = None,
) -> Iterator[Query]:
    """Yield a :class:`Query` for each of ``times`` (seconds of log time, ascending).

    ``on_message(topic, log_ns, message)`` sees every camera and joint-state message read, just
    before the cache stores it (and after the queries of earlier times are yielded).
    """
    cache = ObservationCache(cache_config)
    camera_of = {topic: camera for camera, topic in check_topics(reader, topics).items()}
    pending = iter(times)
    next_time = next(pending, None)
    if next_time is None:
        return
    # to_ns, as bags are written: a message logged at a query time is the query's, not the next
    stop_ns = to_ns(times[-1]) + 1
    for topic, log_ns, message in reader.messages([*camera_of, topics.joint_states], None, stop_ns):
        while next_time is not None and log_ns > to_ns(next_time):
            yield Query(next_time, cache.build(next_time, prompt, session_id))
            next_time = next(pending, None)
        if next_time is None:
            return
        if on_message is not None:
            on_message(topic, log_ns, message)
        # the log time is the receipt: a message stamped far ahead of it is dropped, as live
        if topic == topics.joint_states:
            cache.add_joint_state_message(message, log_ns / NS_PER_S)
        else:
            cache.add_image_message(camera_of[topic], message, log_ns / NS_PER_S)
    while next_time is not None:
        yield Query(next_time, cache.build(next_time, prompt, session_id))
        next_time = next(pending, None)
