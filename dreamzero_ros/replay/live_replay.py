# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Live replay: play a bag onto ROS topics with /clock, and record the policy node's outputs.

The player publishes every message of the chosen topics as recorded (serialised CDR, unchanged)
at its log time, scaled by ``rate``, and drives ``/clock`` with the log times, so that a policy
node started with ``use_sim_time:=true`` sees the recorded stamps and clock as on the robot. The
recorder subscribes to the node's trajectory, preview and chunk topics and writes what arrives
into a new bag, at the simulated time of arrival.

Chunks are recorded as ``dreamzero_ros/msg/ActionChunk``, the type rosbags registers
from ``msg/ActionChunk.msg``: the node's own chunk messages where that interface is built, else
chunks rebuilt from the preview trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import importlib
from pathlib import Path
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock

from dreamzero_ros.core.config.node_config import NODE_NAME
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.observations.imagination import view_topics
from dreamzero_ros.core.observations.messages import (
    ACTION_CHUNK_TYPE,
    NS_PER_S,
    TASK_EVENT_TYPE,
    is_hold,
    stamp_to_ns,
)
from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagReader, BagWriter
from dreamzero_ros.replay.topics import (
    COMPRESSED_IMAGE_TYPE,
    IMAGE_TYPE,
    JOINT_STATE_TYPE,
    TRAJECTORY_TYPE,
)
from dreamzero_ros.replay.typestore import BAG_MESSAGES, replay_typestore

CLOCK_TOPIC = '/clock'
#: The node's task events (dreamzero_ros/msg/TaskEvent, ros/task_server.py).
TASK_EVENTS_TOPIC = '~/task_events'


def message_class(msgtype: str) -> type:
    """The rclpy class of ``pkg/msg/Type``.

    Raises:
        BagError: where the interface package is not importable in this Python.

    """
    package, _, name = msgtype.split('/')
    try:
        return getattr(importlib.import_module(f'{package}.msg'), name)
    except (ImportError, AttributeError) as error:
        raise BagError(f'message type {msgtype} is not available to rclpy here: {error}') from error


def node_topic(name: str, node_name: str = NODE_NAME, namespace: str = '/') -> str:
    """Resolve a topic name of the node (``~/x`` is ``/<node>/x``; relative names in namespace)."""
    base = namespace.rstrip('/')
    if name.startswith('~'):
        return f'{base}/{node_name}{name[1:]}'
    if name.startswith('/'):
        return name
    return f'{base}/{name}'


@dataclass(frozen=True)
class LiveReplayConfig:
    """What to play and record.

    Attributes:
        topics: bag topics to play (``None``: all but ``/clock`` and the recorded topics, less
            those whose message type is not available to rclpy here, skipped with a warning;
            a topic named here whose type is not available is an error).
        remap: bag topic -> topic to publish it on.
        record: topic -> message type to record from the node.
        chunk_topic: where chunks go in the recording (and where the node publishes them).
        preview_topic: trajectories every chunk produces, also in dry run.
        rate: playback speed factor (1.0: real time).
        clock_period_s: simulated seconds between /clock messages.
        wait_for_subscribers_s: before playing, wait this long at most for every played topic
            to have a subscriber (0: don't wait).
        linger_s: after the last message, keep the clock running and recording this long
            (simulated seconds, at ``rate``), so that chunks still being computed arrive.
        until_chunks: end the linger early once this many chunks have been recorded.
        allow_partial: play the intact parts of a damaged bag (skipping damaged chunks and
            undecodable messages, counted in the result) instead of refusing it.
        node_name: the policy node's name (for the reason when nothing was recorded).

    """

    topics: list[str] | None = None
    remap: dict[str, str] = field(default_factory=dict)
    record: dict[str, str] = field(default_factory=dict)
    chunk_topic: str = node_topic('~/action_chunk')
    preview_topic: str = node_topic('~/preview_trajectory')
    rate: float = 1.0
    clock_period_s: float = 0.01
    wait_for_subscribers_s: float = 10.0
    linger_s: float = 2.0
    until_chunks: int | None = None
    allow_partial: bool = False
    node_name: str = NODE_NAME

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.clock_period_s <= 0:
            raise ValueError(f'rate and clock_period_s must be > 0: {self.rate}, '
                             f'{self.clock_period_s}')  # fmt: skip


def recorded_outputs(settings: NodeSettings, node_name: str = NODE_NAME) -> dict[str, str]:
    """Topic -> type of the node's outputs worth recording: trajectories, chunks, views, tasks.

    ``~/task_events`` keeps each ``~/run_task`` goal a client sends during the replay (its
    instruction, span and outcome: ``dreamzero-export --episodes task``).

    The views (``~/model_input``, ``~/predicted_video`` and its per-camera topics) are
    recorded where ``views.enabled``; the recorder's subscription makes the node decode them.
    """
    outputs = {
        node_topic(settings.trajectory_topic, node_name): TRAJECTORY_TYPE,
        node_topic(settings.preview_topic, node_name): TRAJECTORY_TYPE,
        node_topic(settings.chunk_topic, node_name): ACTION_CHUNK_TYPE,
        node_topic(TASK_EVENTS_TOPIC, node_name): TASK_EVENT_TYPE,
    }
    if settings.views.enabled:
        image = COMPRESSED_IMAGE_TYPE if settings.views.encoding == 'jpeg' else IMAGE_TYPE
        views = view_topics(settings.camera_keys, settings.views.encoding)
        outputs.update({node_topic(view, node_name): image for view in views.values()})
    return outputs


class _Recorder:
    """Writes what the node publishes; called on the executor thread only."""

    def __init__(self, writer: BagWriter | None, config: LiveReplayConfig) -> None:
        self.writer = writer
        self.config = config
        self.sim_ns = 0
        self.counts: dict[str, int] = {}
        self.rebuild_chunks = False
        self._chunk_id = 0

    @property
    def chunks(self) -> int:
        """Chunks recorded so far (the node's own or rebuilt)."""
        return self.counts.get(self.config.chunk_topic, 0) + self.counts.get('rebuilt_chunks', 0)

    def on_message(self, topic: str, data: bytes) -> None:
        self.counts[topic] = self.counts.get(topic, 0) + 1
        if self.writer is None:
            return
        self.writer.write_raw(topic, self.sim_ns, data)
        if self.rebuild_chunks and topic == self.config.preview_topic:
            self._write_rebuilt_chunk(data)

    def _write_rebuilt_chunk(self, data: bytes) -> None:
        """An ActionChunk from a preview trajectory (where the node cannot publish chunks)."""
        store = replay_typestore()
        trajectory = store.deserialize_cdr(data, TRAJECTORY_TYPE)
        stamp_ns = stamp_to_ns(trajectory.header.stamp)
        if is_hold(trajectory) or len(trajectory.points) < 2:
            return  # a hold command, not a chunk
        times = [stamp_to_ns(point.time_from_start) for point in trajectory.points]
        message = BAG_MESSAGES.action_chunk(
            stamp_ns + times[0],
            trajectory.joint_names,
            np.array([point.positions for point in trajectory.points]),
            times[1] - times[0],
            self._chunk_id,
            (self.sim_ns - stamp_ns) / NS_PER_S,
            '',
        )
        self._chunk_id += 1
        self.writer.write(self.config.chunk_topic, self.sim_ns, message)
        self.counts['rebuilt_chunks'] = self.counts.get('rebuilt_chunks', 0) + 1


class BagPlayerNode(Node):
    """Publishes a bag's messages and /clock; records the node's outputs."""

    def __init__(self, reader: BagReader, config: LiveReplayConfig, recorder: _Recorder) -> None:
        super().__init__('dreamzero_bag_player')
        self.config = config
        self.recorder = recorder
        recorded = set(config.record)
        bag_topics = reader.topics
        chosen = config.topics or [t for t in bag_topics if t != CLOCK_TOPIC and t not in recorded]
        for topic in chosen:
            if topic not in bag_topics:
                raise BagError(f'topic {topic!r} is not in bag {reader.path}')
        self.publishers_by_topic = {}
        #: Topics of the bag left unplayed -> why (their type is not available to rclpy here).
        self.skipped_topics: dict[str, str] = {}
        for topic in chosen:
            msgtype = bag_topics[topic]
            try:
                kind = message_class(msgtype)
            except BagError as error:
                if config.topics:  # asked for by name: it must be played
                    raise
                self.skipped_topics[topic] = str(error)
                self.get_logger().warning(f'not playing {topic}: {error}')
                continue
            # joint states best effort as a broadcaster's; everything else (images included)
            # reliable, which a reliable or a best-effort reader matches (the node's camera_qos)
            qos = qos_profile_sensor_data if msgtype == JOINT_STATE_TYPE else 10
            target = config.remap.get(topic, topic)
            self.publishers_by_topic[topic] = self.create_publisher(kind, target, qos)
        self.clock = self.create_publisher(Clock, CLOCK_TOPIC, 10)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        for topic, msgtype in config.record.items():
            try:
                kind = message_class(msgtype)
            except BagError as error:
                if msgtype == TASK_EVENT_TYPE:  # the package messages are not built here
                    self.get_logger().warning(f'not recording {topic}: {error}')
                    continue
                if msgtype != ACTION_CHUNK_TYPE:
                    raise
                recorder.rebuild_chunks = True
                self.get_logger().warning(
                    f'{msgtype} is not built here: recording chunks rebuilt from '
                    f'{config.preview_topic}'
                )
                continue
            self.create_subscription(
                kind, topic, lambda data, topic=topic: recorder.on_message(topic, data), reliable,
                raw=True,
            )  # fmt: skip

    def publish_clock(self, stamp_ns: int) -> None:
        """Publish /clock = ``stamp_ns`` and make it the recorder's time."""
        message = Clock()
        message.clock.sec, message.clock.nanosec = divmod(int(stamp_ns), NS_PER_S)
        self.recorder.sim_ns = int(stamp_ns)
        self.clock.publish(message)

    def wait_for_subscribers(self, timeout_s: float) -> list[str]:
        """Wait until every played topic has a subscriber; return those still without one."""
        deadline = time.monotonic() + timeout_s
        while True:
            missing = [
                self.config.remap.get(t, t)
                for t, publisher in self.publishers_by_topic.items()
                if publisher.get_subscription_count() == 0
            ]
            if not missing or time.monotonic() >= deadline:
                return missing
            time.sleep(0.05)


@dataclass
class LiveReplayResult:
    """What a live replay did."""

    published: dict[str, int]
    recorded: dict[str, int]
    bag_span_s: float
    wall_s: float
    without_subscribers: list[str]
    skipped_topics: dict[str, str]
    integrity: dict[str, object]
    #: Chunks recorded (the node's own or rebuilt from its previews).
    chunks_recorded: int = 0
    #: Where a recording was asked for and no chunk came: why (no node, or what differs).
    why_nothing_recorded: str = ''


def play(
    bag: str | Path,
    config: LiveReplayConfig,
    record_to: str | Path | None = None,
    storage: str = 'mcap',
    stop: threading.Event | None = None,
) -> LiveReplayResult:
    """Play ``bag`` in real time (times ``config.rate``) and record into ``record_to``.

    rclpy must be initialised. ``stop`` ends the playback early when set.
    """
    stop = stop or threading.Event()
    with BagReader(bag, config.allow_partial) as reader:
        recorder = _Recorder(None, config)
        node = BagPlayerNode(reader, config, recorder)
        try:
            integrity = reader.verify(list(node.publishers_by_topic))
        except BagError:
            node.destroy_node()
            raise
        writer = BagWriter(record_to, storage) if record_to is not None else None
        recorder.writer = writer
        if writer is not None:
            for topic, msgtype in config.record.items():
                writer.add_topic(topic, msgtype)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        try:
            missing = node.wait_for_subscribers(config.wait_for_subscribers_s)
            if missing:
                node.get_logger().warning(f'playing without subscribers on {missing}')
            published, span, wall = _play_messages(reader, node, config, stop)
            why = ''
            if writer is not None and not recorder.chunks:  # holds alone answer no bag
                why = _why_nothing(node, reader, config, missing)
        finally:
            executor.shutdown(timeout_sec=2.0)
            spinner.join(timeout=5.0)
            node.destroy_node()
            if writer is not None:
                writer.close()
    return LiveReplayResult(
        published,
        dict(recorder.counts),
        span,
        wall,
        missing,
        node.skipped_topics,
        integrity.to_json(),
        recorder.chunks,
        why,
    )


def _why_nothing(
    node: BagPlayerNode, reader: BagReader, config: LiveReplayConfig, missing: list[str]
) -> str:
    """Why the node recorded nothing (:func:`.live_diagnosis.explain_nothing_recorded`)."""
    from dreamzero_ros.replay.live_diagnosis import explain_nothing_recorded

    source = {config.remap.get(topic, topic): topic for topic in node.publishers_by_topic}
    played = {topic: reader.topics[bag_topic] for topic, bag_topic in source.items()}

    def joint_names(topic: str) -> set[str] | None:
        if played.get(topic) != JOINT_STATE_TYPE:
            return None
        names: set[str] = set()  # a robot may split its joints over several messages
        for index, (_, _, message) in enumerate(reader.messages([source[topic]])):
            names.update(message.name)
            if index >= 50:
                break
        return names

    return explain_nothing_recorded(node, config.node_name, played, joint_names, missing)


def _play_messages(
    reader: BagReader, node: BagPlayerNode, config: LiveReplayConfig, stop: threading.Event
) -> tuple[dict[str, int], float, float]:
    """The playback loop: /clock ticks and messages at their (scaled) wall times."""
    start_ns = reader.start_ns
    started = time.monotonic()
    period_ns = int(config.clock_period_s * NS_PER_S)
    next_tick = start_ns
    published = dict.fromkeys(node.publishers_by_topic, 0)

    def advance_to(target_ns: int, lingering: bool = False) -> bool:
        """Publish clock ticks up to ``target_ns``, sleeping to keep pace; False if stopped."""
        nonlocal next_tick
        while next_tick <= target_ns:
            if lingering and config.until_chunks and node.recorder.chunks >= config.until_chunks:
                return True
            if not _sleep_until(started + (next_tick - start_ns) / NS_PER_S / config.rate, stop):
                return False
            node.publish_clock(next_tick)
            next_tick += period_ns
        return not stop.is_set()

    last_ns = start_ns
    for topic, log_ns, data in reader.raw_messages(list(node.publishers_by_topic)):
        if not advance_to(log_ns):
            break
        if not _sleep_until(started + (log_ns - start_ns) / NS_PER_S / config.rate, stop):
            break
        node.publish_clock(log_ns)
        node.publishers_by_topic[topic].publish(data)
        published[topic] += 1
        last_ns = log_ns
    else:
        advance_to(last_ns + int(config.linger_s * NS_PER_S), lingering=True)
    return published, (last_ns - start_ns) / NS_PER_S, time.monotonic() - started


def _sleep_until(deadline: float, stop: threading.Event) -> bool:
    """Sleep until the monotonic ``deadline``; False if ``stop`` was set meanwhile."""
    remaining = deadline - time.monotonic()
    if remaining > 0:
        return not stop.wait(remaining)
    return not stop.is_set()


def run(
    bag: str | Path,
    config: LiveReplayConfig,
    record_to: str | Path | None = None,
    storage: str = 'mcap',
    ros_args: list[str] | None = None,
) -> LiveReplayResult:
    """Initialise rclpy, :func:`play`, shut down (the recording is closed on Ctrl-C too)."""
    rclpy.init(args=ros_args)
    try:
        return play(bag, config, record_to, storage)
    finally:
        rclpy.try_shutdown()
