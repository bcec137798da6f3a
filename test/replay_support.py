# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the replay tests: small demo bags and a policy with known outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from dreamzero_ros import droid_clips
from dreamzero_ros.policy_types import ActionChunk, Observation
from dreamzero_ros.replay.bag_maker import BagSpec, make_bag
from dreamzero_ros.replay.topics import ReplayTopics

STEP = 1.0 / 15.0


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
