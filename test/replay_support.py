# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the replay tests: small demo bags and a policy with known outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import json
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from dreamzero_ros import droid_clips
from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.policy_types import ActionChunk, Observation
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.bag_maker import BagSpec, make_bag
from dreamzero_ros.replay.topics import IMAGE_TYPE, JOINT_STATE_TYPE, ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES

STEP = 1.0 / 15.0
#: Log time of the first message of :func:`random_robot_bag`, s.
START = 1_700_000_000.0


def demo_bag(folder: Path, name: str = 'bag', **spec: object) -> Path:
    """A small bag of synthetic frames (6 frames per camera unless told) written into folder."""
    spec = {'num_frames': 6, 'source': 'synthetic', **spec}
    path = folder / name
    make_bag(path, BagSpec(**spec))
    return path


def evaluate_two_chunks(bag: Path, checkpoint: Path, on_chunk) -> tuple:
    """Two chunks of the engine on ``bag`` (CPU, bfloat16, with video): engine, topics, evaluation.

    ``on_chunk`` receives each chunk with its predicted frames (a video or strips collector).
    """
    from dreamzero_ros.engine import DreamZeroEngine
    from dreamzero_ros.engine.options import EngineOptions
    from dreamzero_ros.replay.evaluation import EvaluationConfig, evaluate_bag
    from dreamzero_ros.replay.settings import node_settings

    engine = DreamZeroEngine.from_pretrained(
        checkpoint, EngineOptions(device='cpu', dtype='bfloat16')
    )
    settings = node_settings()
    topics = ReplayTopics.from_settings(settings, None, 'auto')
    config = EvaluationConfig(
        topics, settings.cache, 'put the pan on the stove', 0.5, max_chunks=2, request_video=True
    )
    return engine, topics, evaluate_bag(bag, engine, config, on_chunk=on_chunk)


def demo_state(times: np.ndarray) -> np.ndarray:
    """The bag maker's joints and gripper at ``times``, ``(N, 8)``."""
    return np.concatenate(droid_clips.demo_joint_trajectory(np.asarray(times)), axis=1)


def rewrite_bag(source: Path, target: Path, storage: str, extra: list[tuple] = ()) -> Path:
    """Copy a bag with the rosbags writer, adding ``extra`` connections and their messages.

    ``extra`` holds ``(topic, msgtype, msgdef, rihs01, [(log_ns, cdr bytes), ...])``: a
    definition the bag declares as it is, parsable or not.
    """
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    with Reader(source) as reader, Writer(target, version=9, storage_plugin=plugin) as writer:
        added = {
            c.id: writer.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest)
            for c in reader.connections
        }
        for connection, log_ns, data in reader.messages():
            writer.write(added[connection.id], log_ns, data)
        for topic, msgtype, msgdef, rihs01, messages in extra:
            connection = writer.add_connection(topic, msgtype, msgdef=msgdef, rihs01=rihs01)
            for log_ns, data in messages:
                writer.write(connection, log_ns, data)
    return target


class ScriptedPolicy:
    """Answers with the bag's own trajectory at the chunk's step times plus a fixed offset.

    ``offset`` is ``(H, 8)``; ``lead_s`` shifts the trajectory (the command topic leads the
    state). Every observation received is kept.
    """

    def __init__(self, offset: np.ndarray, lead_s: float = 0.0, start_s: float = 0.0) -> None:
        self.offset = np.asarray(offset, dtype=np.float64)
        self.lead_s = lead_s
        self.start_s = start_s
        self.observations: list[Observation] = []
        self.resets: list[str] = []

    metadata = {'action_horizon': 0}

    def reset(self, session_id: str = 'default') -> None:
        self.resets.append(session_id)

    def infer(self, observation: Observation) -> ActionChunk:
        self.observations.append(observation)
        steps = np.arange(self.offset.shape[0]) * STEP
        times = observation.stamp - self.start_s + steps + self.lead_s
        actions = demo_state(times) + self.offset
        return ActionChunk(
            actions.astype(np.float64), observation.stamp, STEP, len(self.observations)
        )


__all__ = ['BagSpec', 'ReplayTopics', 'ScriptedPolicy', 'demo_bag', 'demo_state', 'rewrite_bag']


def random_robot_bag(
    path: Path,
    cameras: Mapping[str, str],
    joints: Sequence[str],
    positions: Callable[[float], Sequence[float]],
    *,
    frames: tuple[int, float, tuple[int, int]] = (60, 15.0, (24, 64)),
    joint_states: tuple[int, float] = (200, 50.0),
    seed: int = 0,
) -> Path:
    """A bag of random frames and joint states from :data:`START`, written in log-time order.

    ``cameras``: camera key -> image topic; ``frames``: how many per camera, at what rate (Hz)
    and of what size (height, width); ``joint_states``: how many of ``joints`` on
    /joint_states at what rate, positions ``positions(t)`` at ``t`` s from the start.
    """
    rng = np.random.default_rng(seed)
    count, rate, size = frames
    records = []
    for index in range(count):
        stamp = to_ns(START + index / rate)
        for key, topic in cameras.items():
            frame = rng.integers(0, 255, (*size, 3), dtype=np.uint8)
            records.append((stamp, topic, BAG_MESSAGES.image(stamp, frame, key)))
    count, rate = joint_states
    for index in range(count):
        stamp = to_ns(START + index / rate)
        state = BAG_MESSAGES.joint_state(stamp, list(joints), np.array(positions(index / rate)))
        records.append((stamp, '/joint_states', state))
    with BagWriter(path) as writer:
        for topic in cameras.values():
            writer.add_topic(topic, IMAGE_TYPE)
        writer.add_topic('/joint_states', JOINT_STATE_TYPE)
        for stamp, topic, message in sorted(records, key=lambda record: record[0]):
            writer.write(topic, stamp, message)
    return path


def replay_arguments(
    bag: Path, checkpoint: Path, out: Path, parameters: dict, *extra: str
) -> list[str]:
    """``dreamzero-replay`` of two chunks on the CPU in fp32; each parameter a ``--param``."""
    overrides = [f'{name}={json.dumps(value)}' for name, value in parameters.items()]
    return [
        str(bag), '--checkpoint', str(checkpoint), '--device', 'cpu', '--dtype', 'float32',
        '--max-chunks', '2', '--out', str(out), '--no-progress', *extra,
        *(item for o in overrides for item in ('--param', o)),
    ]  # fmt: skip


def arm_speed_limits(joints: int, max_acceleration: float, max_jerk: float) -> dict:
    """The safety.* speed limits of ``joints`` arm joints, loose enough for a random policy."""
    return {
        'safety.max_velocity': [3.0] * joints,
        'safety.stop_deceleration': [10.0] * joints,
        'safety.max_acceleration': [max_acceleration] * joints,
        'safety.max_jerk': [max_jerk] * joints,
    }
