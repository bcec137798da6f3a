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


def upstream_stats(root: Path, info: dict) -> dict:
    """upstream's ``calculate_dataset_statistics`` over ``data/*/*.parquet``, float features."""
    paths = sorted(root.glob('data/*/*.parquet'))
    data = pd.concat([pd.read_parquet(path) for path in paths], axis=0)
    features = [name for name, spec in info['features'].items() if 'float' in spec['dtype']]
    stats = {}
    for name in features:
        values = np.vstack([np.asarray(x, dtype=np.float32) for x in data[name]])
        stats[name] = {
            'mean': np.mean(values, axis=0).tolist(),
            'std': np.std(values, axis=0).tolist(),
            'min': np.min(values, axis=0).tolist(),
            'max': np.max(values, axis=0).tolist(),
            'q01': np.quantile(values, 0.01, axis=0).tolist(),
            'q99': np.quantile(values, 0.99, axis=0).tolist(),
        }
    return stats


def upstream_relative_stats(root: Path, meta: dict, key: str, horizon: int) -> dict:
    """upstream's ``_calculate_relative_stats_for_key`` (state delta [0], actions 0..horizon-1)."""
    deltas = list(range(horizon))
    pooled = []
    for row in meta['episodes']:
        frame = episode_frame(root, meta, row['episode_index'])
        state = key_values(frame, meta, 'state', key)
        action = key_values(frame, meta, 'action', key)
        for i in range(len(frame) - max(deltas)):
            pooled.extend(action[[d + i for d in deltas]] - state[i])
    pooled = np.array(pooled)
    return {
        'max': np.max(pooled, axis=0).tolist(),
        'min': np.min(pooled, axis=0).tolist(),
        'mean': np.mean(pooled, axis=0).tolist(),
        'std': np.std(pooled, axis=0).tolist(),
        'q01': np.quantile(pooled, 0.01, axis=0).tolist(),
        'q99': np.quantile(pooled, 0.99, axis=0).tolist(),
    }


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
    """The last message logged at or before ``time_s``."""
    chosen = None
    for log_ns, message in messages:
        if log_ns > time_s * 1e9:
            break
        chosen = message
    return chosen
