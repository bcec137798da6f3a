# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A LeRobot v2.1 dataset with GEAR metadata on disk: its files, its tasks and episodes.

``data/chunk-XXX/episode_XXXXXX.parquet``, ``videos/chunk-XXX/observation.images.<camera>/
episode_XXXXXX.mp4`` and ``meta/``: ``info.json``, ``episodes.jsonl``, ``tasks.jsonl``,
``episodes_stats.jsonl`` (LeRobot), ``modality.json``, ``embodiment.json``, ``stats.json``,
``relative_stats_dreamzero.json`` (GEAR). :meth:`DatasetFolder.open` reads an existing dataset
to append to, refusing one of another layout (features, fps, modality, embodiment): new episodes
continue its episode and frame indices and its tasks; every statistic is recomputed over all
episodes when the metadata is written.
"""

from __future__ import annotations

from collections.abc import Mapping
import json
from pathlib import Path
from typing import Any

import numpy as np

from dreamzero_ros.errors import DatasetError
from dreamzero_ros.export.layout import (
    ACTION,
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    STATE,
    VIDEO_PATH,
    DatasetLayout,
    rate_number,
)
from dreamzero_ros.export.stats import dataset_statistics, read_columns, relative_statistics

__all__ = ['META_FILES', 'DatasetFolder']

META_FILES = (
    'info.json',
    'episodes.jsonl',
    'tasks.jsonl',
    'episodes_stats.jsonl',
    'modality.json',
    'embodiment.json',
    'stats.json',
    'relative_stats_dreamzero.json',
)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise DatasetError(f'{path} is unreadable: {error}') from None


def _read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as error:
        raise DatasetError(f'{path} is unreadable: {error}') from None


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=4) + '\n')


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))


class DatasetFolder:
    """The dataset at ``root`` in ``layout``: its tasks, episodes and their statistics."""

    def __init__(self, root: Path, layout: DatasetLayout) -> None:
        self.root = root
        self.layout = layout
        self.tasks: dict[str, int] = {}
        self.episodes: list[dict[str, Any]] = []
        self.episodes_stats: list[dict[str, Any]] = []
        self.total_frames = 0

    @classmethod
    def open(cls, root: Path, layout: DatasetLayout) -> DatasetFolder:
        """The existing dataset at ``root``, to append episodes of ``layout`` to.

        Raises:
            DatasetError: it is not such a dataset, or one of another layout (named).

        """
        meta = root / 'meta'
        if not (meta / 'info.json').is_file():
            raise DatasetError(f'cannot append to {root}: it has no meta/info.json (no dataset)')
        info = _read_json(meta / 'info.json')
        folder = cls(root, layout)
        expected = folder.info()
        for key in ('codebase_version', 'robot_type', 'fps', 'features', 'data_path', 'video_path'):
            if info.get(key) != expected[key]:
                raise DatasetError(
                    f'cannot append to {root}: its info.json {key} differs from this export '
                    f'({_short(info.get(key))} vs {_short(expected[key])})'
                )
        for name, value in (
            ('modality.json', layout.modality()),
            ('embodiment.json', layout.embodiment_json()),
        ):
            if _read_json(meta / name) != value:
                raise DatasetError(f'cannot append to {root}: its {name} differs from this export')
        tasks = _read_jsonl(meta / 'tasks.jsonl')
        folder.tasks = {row['task']: int(row['task_index']) for row in tasks}
        folder.episodes = _read_jsonl(meta / 'episodes.jsonl')
        folder.episodes_stats = _read_jsonl(meta / 'episodes_stats.jsonl')
        indices = [int(row['episode_index']) for row in folder.episodes]
        if indices != list(range(len(indices))) or len(folder.episodes_stats) != len(indices):
            raise DatasetError(
                f'cannot append to {root}: its episodes.jsonl does not list episodes 0..N-1 '
                'once each in order with their episodes_stats.jsonl'
            )
        folder.total_frames = sum(int(row['length']) for row in folder.episodes)
        if folder.total_frames != info.get('total_frames'):
            raise DatasetError(f'cannot append to {root}: total_frames disagrees with its episodes')
        return folder

    # ------------------------------------------------------------------ files
    def parquet_path(self, episode_index: int) -> Path:
        """Where episode ``episode_index``'s parquet file goes."""
        chunk = episode_index // CHUNKS_SIZE
        return self.root / DATA_PATH.format(episode_chunk=chunk, episode_index=episode_index)

    def video_path(self, episode_index: int, video_key: str) -> Path:
        """Where episode ``episode_index``'s video of ``video_key`` goes."""
        chunk = episode_index // CHUNKS_SIZE
        return self.root / VIDEO_PATH.format(
            episode_chunk=chunk, video_key=video_key, episode_index=episode_index
        )

    def task_index(self, text: str) -> int:
        """The index of ``text`` in ``tasks.jsonl`` (a new task is added)."""
        if text not in self.tasks:
            self.tasks[text] = len(self.tasks)
        return self.tasks[text]

    def write_parquet(self, episode_index: int, columns: Mapping[str, np.ndarray]) -> Path:
        """Write the episode's parquet file (columns in the layout's order and dtypes)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays, names = [], []
        for name, dtype, width in self.layout.columns():
            values = np.asarray(columns[name], dtype=dtype)
            if name in (STATE, ACTION):
                flat = pa.array(values.reshape(-1), type=pa.float64())
                arrays.append(pa.FixedSizeListArray.from_arrays(flat, width))
            else:
                arrays.append(pa.array(values))
            names.append(name)
        path = self.parquet_path(episode_index)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_arrays(arrays, names=names), path)
        return path

    def add_episode(self, entry: dict[str, Any], stats: dict[str, Any]) -> None:
        """Record an episode whose files are written (its index: the next one)."""
        if entry['episode_index'] != len(self.episodes):
            raise DatasetError(f'episode {entry["episode_index"]} is not the next one')
        self.episodes.append(entry)
        self.episodes_stats.append({'episode_index': entry['episode_index'], 'stats': stats})
        self.total_frames += int(entry['length'])

    # ------------------------------------------------------------------ metadata
    def info(self) -> dict[str, Any]:
        """``info.json``."""
        layout = self.layout
        episodes = len(self.episodes)
        return {
            'codebase_version': CODEBASE_VERSION,
            'robot_type': layout.tag,
            'total_episodes': episodes,
            'total_frames': self.total_frames,
            'total_tasks': len(self.tasks),
            'total_videos': episodes * len(layout.cameras),
            'total_chunks': -(-episodes // CHUNKS_SIZE),
            'chunks_size': CHUNKS_SIZE,
            'fps': rate_number(layout.fps),
            'splits': {'train': f'0:{episodes}'},
            'data_path': DATA_PATH,
            'video_path': VIDEO_PATH,
            'features': layout.features(),
        }

    def write_meta(self) -> None:
        """Write every file of ``meta/`` and compute the statistics over all episodes."""
        meta = self.root / 'meta'
        meta.mkdir(parents=True, exist_ok=True)
        layout = self.layout
        info = self.info()
        _write_json(meta / 'info.json', info)
        _write_jsonl(meta / 'episodes.jsonl', self.episodes)
        tasks = sorted(self.tasks.items(), key=lambda item: item[1])
        _write_jsonl(meta / 'tasks.jsonl', [{'task_index': i, 'task': t} for t, i in tasks])
        _write_jsonl(meta / 'episodes_stats.jsonl', self.episodes_stats)
        modality = layout.modality()
        _write_json(meta / 'modality.json', modality)
        _write_json(meta / 'embodiment.json', layout.embodiment_json())
        paths = [self.parquet_path(int(row['episode_index'])) for row in self.episodes]
        _write_json(meta / 'stats.json', dataset_statistics(paths, info['features']))
        relative = relative_statistics(
            [(int(row['episode_index']), int(row['length'])) for row in self.episodes],
            lambda index: read_columns(self.parquet_path(index), (STATE, ACTION)),
            modality,
            layout.relative_keys,
            layout.action_horizon,
        )
        if relative:
            _write_json(meta / 'relative_stats_dreamzero.json', relative)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + '...'
