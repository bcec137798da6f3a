# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the export tests: read a dataset back as upstream DreamZero's training does.

Written from upstream's ``groot/vla/data/dataset/lerobot.py`` (``LeRobotSingleDataset``:
meta files, ``pd.read_parquet``, ``np.stack`` of a column sliced through ``modality.json``,
``calculate_dataset_statistics``, ``_calculate_relative_stats_for_key``) and its
``get_frames_by_timestamps`` (decord: the frame whose start time is nearest each timestamp),
independently of the exporter's code.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from rosbags.rosbag2 import Reader

from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.replay.typestore import replay_typestore


def read_meta(root: Path) -> dict:
    """info, modality (upstream's defaults filled in), episodes, tasks of a dataset."""
    meta = root / 'meta'
    modality = json.loads((meta / 'modality.json').read_text())
    for group, default in (('state', 'observation.state'), ('action', 'action')):
        for entry in modality[group].values():
            entry.setdefault('original_key', default)
    for key, entry in modality['video'].items():
        entry.setdefault('original_key', f'observation.images.{key}')
    for key, entry in (modality.get('annotation') or {}).items():
        if entry.get('original_key') is None:
            entry['original_key'] = f'annotation.{key}'
    lines = lambda name: [json.loads(x) for x in (meta / name).read_text().splitlines()]  # noqa: E731
    return {
        'info': json.loads((meta / 'info.json').read_text()),
        'modality': modality,
        'episodes': lines('episodes.jsonl'),
        'tasks': {row['task_index']: row['task'] for row in lines('tasks.jsonl')},
    }


def episode_frame(root: Path, meta: dict, episode: int) -> pd.DataFrame:
    """The episode's parquet file as upstream reads it."""
    info = meta['info']
    chunk = episode // info['chunks_size']
    path = root / info['data_path'].format(episode_chunk=chunk, episode_index=episode)
    return pd.read_parquet(path)


def key_values(frame: pd.DataFrame, meta: dict, group: str, key: str) -> np.ndarray:
    """``state.<key>`` or ``action.<key>`` of every row, ``(N, D)``."""
    entry = meta['modality'][group][key]
    data = np.stack(frame[entry['original_key']])
    return data[:, entry['start'] : entry['end']]


def video_frames(root: Path, meta: dict, episode: int, key: str, times: np.ndarray) -> np.ndarray:
    """Frames of camera ``key`` nearest ``times`` (decord's rule), ``(T, H, W, 3)``."""
    import av

    info = meta['info']
    original = meta['modality']['video'][key]['original_key']
    chunk = episode // info['chunks_size']
    path = root / info['video_path'].format(
        episode_chunk=chunk, video_key=original, episode_index=episode
    )
    with av.open(str(path)) as container:
        decoded = [(f.time, f.to_ndarray(format='rgb24')) for f in container.decode(video=0)]
    starts = np.array([time for time, _ in decoded])
    indices = np.abs(starts[:, None] - np.asarray(times)[None, :]).argmin(axis=0)
    return np.stack([decoded[i][1] for i in indices])


#: Upstream's statistics of a feature: name -> its reduction over the rows (axis 0).
_UPSTREAM_REDUCTIONS = {
    'mean': np.mean,
    'std': np.std,
    'min': np.min,
    'max': np.max,
    'q01': lambda values, axis: np.quantile(values, 0.01, axis=axis),
    'q99': lambda values, axis: np.quantile(values, 0.99, axis=axis),
}


def _upstream_summary(values: np.ndarray) -> dict[str, list]:
    return {name: reduce(values, axis=0).tolist() for name, reduce in _UPSTREAM_REDUCTIONS.items()}


def upstream_stats(root: Path, info: dict) -> dict:
    """Upstream's ``calculate_dataset_statistics`` over ``data/*/*.parquet``, float features."""
    paths = sorted(root.glob('data/*/*.parquet'))
    data = pd.concat([pd.read_parquet(path) for path in paths], axis=0)
    features = [name for name, spec in info['features'].items() if 'float' in spec['dtype']]
    stats = {}
    for name in features:
        values = np.vstack([np.asarray(x, dtype=np.float32) for x in data[name]])
        stats[name] = _upstream_summary(values)
    return stats


def upstream_relative_stats(root: Path, meta: dict, key: str, horizon: int) -> dict:
    """Upstream's ``_calculate_relative_stats_for_key`` (state delta [0], actions 0..horizon-1)."""
    deltas = list(range(horizon))
    pooled = []
    for row in meta['episodes']:
        frame = episode_frame(root, meta, row['episode_index'])
        state = key_values(frame, meta, 'state', key)
        action = key_values(frame, meta, 'action', key)
        for i in range(len(frame) - max(deltas)):
            pooled.extend(action[[d + i for d in deltas]] - state[i])
    pooled = np.array(pooled)
    return _upstream_summary(pooled)


def bag_messages(bag: Path, topic: str) -> list[tuple[int, object]]:
    """``(log ns, message)`` of one topic, read with rosbags alone."""
    store = replay_typestore()
    with Reader(bag) as reader:
        connections = [c for c in reader.connections if c.topic == topic]
        return [
            (log_ns, store.deserialize_cdr(raw, connection.msgtype))
            for connection, log_ns, raw in reader.messages(connections=connections)
        ]


def latest_at(messages: list[tuple[int, object]], time_s: float) -> object:
    """The last message logged at or before ``time_s`` (in nanoseconds as bags are written)."""
    chosen = None
    for log_ns, message in messages:
        if log_ns > to_ns(time_s):
            break
        chosen = message
    return chosen


ARM = tuple(f'panda_joint{i}' for i in range(1, 8))
NAMES = (*ARM, 'panda_gripper')
CAMERAS = ('wrist_image_left', 'exterior_image_1_left', 'exterior_image_2_left')
START = 1_700_000_000.0


def task_event(
    stamp_s: float, goal: str, event: int, instruction: str, outcome: str = ''
) -> object:
    """A ``dreamzero_ros/msg/TaskEvent`` as the node publishes it."""
    from dreamzero_ros.core.observations.messages import to_ns
    from dreamzero_ros.replay.typestore import BAG_MESSAGES, bag_message_type

    return bag_message_type('dreamzero_ros/msg/TaskEvent')(
        header=BAG_MESSAGES.header(to_ns(stamp_s)),
        goal_id=goal,
        event=event,
        instruction=instruction,
        time_limit=0.0,
        outcome=outcome,
        chunks_executed=3,
        elapsed=0.0,
        message='',
    )


def std_message(kind: str, value: object) -> object:
    """``std_msgs/<kind>`` with ``data``."""
    from dreamzero_ros.replay.typestore import bag_message_type

    return bag_message_type(f'std_msgs/msg/{kind}')(data=value)


def write_bag(
    path: Path,
    seconds: float,
    storage: str = 'mcap',
    extra: dict | None = None,
    drop_frames: tuple[float, float] | None = None,
    joints: callable | None = None,
    stamp_shift: tuple[float, float] | None = None,
    cameras: tuple[str, ...] = CAMERAS,
    image_format: str = 'rgb8',
) -> Path:
    """A DROID bag written with the project's BagWriter.

    Synthetic 180x320 frames at 15 Hz, Franka joint states at 50 Hz (``joints(t)`` overrides
    them), ``extra`` topics
    ``{topic: (msgtype, [(seconds, message), ...])}``; frames of every camera inside
    ``drop_frames`` (seconds) left out; from ``stamp_shift[0]`` on, the stamps of the joint
    states moved by ``stamp_shift[1]`` seconds against their log times.
    """
    from dreamzero_ros import droid_clips
    from dreamzero_ros.core.observations.messages import to_ns
    from dreamzero_ros.replay.bag_io import BagWriter
    from dreamzero_ros.replay.typestore import BAG_MESSAGES

    count = int(round(seconds * 15))
    frames = droid_clips.synthetic_clips(count)
    records = []
    topic_of = {c: f'/{c}/compressed' if image_format == 'jpeg' else f'/{c}' for c in cameras}
    for index in range(count):
        t = index / 15
        if drop_frames and drop_frames[0] <= t < drop_frames[1]:
            continue
        for camera in cameras:
            build = BAG_MESSAGES.compressed_image if image_format == 'jpeg' else BAG_MESSAGES.image
            message = build(to_ns(START + t), frames[camera][index], camera)
            records.append((START + t, topic_of[camera], message))
    for t in np.arange(0.0, seconds, 0.02):
        values = joints(t) if joints else droid_clips_state(t)
        stamp = START + t + (stamp_shift[1] if stamp_shift and t >= stamp_shift[0] else 0.0)
        records.append(
            (START + t, '/joint_states', BAG_MESSAGES.joint_state(to_ns(stamp), NAMES, values))
        )
    types = {
        topic: (
            'sensor_msgs/msg/CompressedImage' if image_format == 'jpeg' else 'sensor_msgs/msg/Image'
        )
        for topic in topic_of.values()
    }
    types['/joint_states'] = 'sensor_msgs/msg/JointState'
    for topic, (msgtype, messages) in (extra or {}).items():
        types[topic] = msgtype
        records += [(START + t, topic, message) for t, message in messages]
    records.sort(key=lambda record: record[0])
    with BagWriter(path, storage) as writer:
        for topic, msgtype in types.items():
            writer.add_topic(topic, msgtype)
        for t, topic, message in records:
            writer.write(topic, to_ns(t), message)
    return path


def droid_clips_state(t: float) -> np.ndarray:
    """The bag maker's joints and gripper at ``t`` seconds."""
    from dreamzero_ros import droid_clips

    return np.concatenate(droid_clips.demo_joint_trajectory(np.array([t])), axis=1)[0]
