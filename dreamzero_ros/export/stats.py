# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Dataset statistics computed the way upstream DreamZero and LeRobot v2.1 compute them.

* ``meta/stats.json``: upstream's ``calculate_dataset_statistics`` (the one its training runs
  where the file is missing): every feature whose ``info.json`` dtype is a float, over every
  parquet file (sorted paths, rows concatenated), as float32: mean, std, min, max, q01, q99.
* ``meta/relative_stats_dreamzero.json``: upstream's ``_calculate_relative_stats_for_key``: for
  each relative action key, ``action[i + d] - state[i]`` for ``d`` in the action horizon and every
  ``i`` below ``length - (horizon - 1)``, pooled over the episodes (a seeded sample of 10000 when
  there are more), as float64.
* ``meta/episodes_stats.jsonl``: LeRobot v2.1's per-episode ``min, max, mean, std, count`` of
  every parquet column (videos: per channel, from :class:`.video_encoder.VideoEncoder`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ['dataset_statistics', 'episode_statistics', 'read_columns', 'relative_statistics']

#: Upstream's cap on the episodes read for relative statistics, and its sampling seed.
MAX_RELATIVE_EPISODES = 10000
RELATIVE_SEED = 42


def read_columns(path: Path, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Columns of one parquet file: vectors as ``(N, D)``, scalars as ``(N,)`` float64 arrays."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(columns))
    result = {}
    for name in columns:
        column = table.column(name).combine_chunks()
        if hasattr(column, 'flatten') and hasattr(column.type, 'value_type'):
            flat = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
            result[name] = flat.reshape(len(column), -1)
        else:
            result[name] = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    return result


def _summary(data: np.ndarray) -> dict[str, list]:
    return {
        'mean': np.mean(data, axis=0).tolist(),
        'std': np.std(data, axis=0).tolist(),
        'min': np.min(data, axis=0).tolist(),
        'max': np.max(data, axis=0).tolist(),
        'q01': np.quantile(data, 0.01, axis=0).tolist(),
        'q99': np.quantile(data, 0.99, axis=0).tolist(),
    }


def dataset_statistics(
    parquet_paths: Sequence[Path], features: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, list]]:
    """``stats.json``: every float feature over every file, float32, as upstream's training."""
    names = [name for name, spec in features.items() if 'float' in str(spec['dtype'])]
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for path in sorted(parquet_paths):
        for name, values in read_columns(path, names).items():
            parts[name].append(values.reshape(len(values), -1).astype(np.float32))
    return {name: _summary(np.concatenate(parts[name], axis=0)) for name in names if parts[name]}


def relative_statistics(
    episodes: Sequence[tuple[int, int]],
    load: Callable[[int], Mapping[str, np.ndarray]],
    modality: Mapping[str, Any],
    keys: Sequence[str],
    horizon: int,
) -> dict[str, dict[str, list]]:
    """``relative_stats_dreamzero.json`` for ``keys`` (action keys with a state of the same name).

    ``episodes``: ``(episode_index, length)`` in ``episodes.jsonl`` order; ``load(index)``: the
    episode's ``observation.state`` and ``action`` as ``(N, D)`` arrays.
    """
    chosen = np.array([index for index, _ in episodes])
    if len(chosen) > MAX_RELATIVE_EPISODES:
        rng = np.random.default_rng(seed=RELATIVE_SEED)
        chosen = chosen[rng.choice(len(chosen), size=MAX_RELATIVE_EPISODES, replace=False)]
    deltas = np.arange(horizon)
    pooled: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    for index in chosen:
        columns = load(int(index))
        for key in keys:
            state_meta, action_meta = modality['state'][key], modality['action'][key]
            state = columns['observation.state'][:, state_meta['start'] : state_meta['end']]
            action = columns['action'][:, action_meta['start'] : action_meta['end']]
            usable = len(action) - int(deltas.max())
            if usable <= 0:
                continue
            steps = np.arange(usable)[:, None] + deltas[None, :]  # (usable, horizon)
            relative = action[steps] - state[np.arange(usable)][:, None, :]
            pooled[key].append(relative.reshape(-1, action.shape[1]))
    return {key: _summary(np.concatenate(parts, axis=0)) for key, parts in pooled.items() if parts}


def episode_statistics(
    columns: Mapping[str, np.ndarray], videos: Mapping[str, Mapping[str, list]]
) -> dict[str, dict[str, Any]]:
    """LeRobot v2.1's statistics of one episode: each column (per dimension) and each video."""
    stats: dict[str, dict[str, Any]] = dict(videos)
    for name, values in columns.items():
        array = np.asarray(values)
        keep = array.ndim == 1
        stats[name] = {
            'min': np.min(array, axis=0, keepdims=keep).tolist(),
            'max': np.max(array, axis=0, keepdims=keep).tolist(),
            'mean': np.mean(array, axis=0, keepdims=keep).tolist(),
            'std': np.std(array, axis=0, keepdims=keep).tolist(),
            'count': [len(array)],
        }
    return stats
