# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An episode's parquet columns, from its sampled states and actions.

``observation.state`` and ``action`` follow the layout (DROID's vectors through
:class:`.droid_columns.DroidColumns`, any other embodiment's keys in its order). ``timestamp`` is
``frame_index / fps``, the time of the frame in the episode's videos; ``index`` continues the
dataset's global frame count. The language columns and ``task_index`` hold the task index of
each frame's instruction. DROID's RLDS columns follow ``convert_droid.py``: ``is_first`` on the
first frame, ``next.done`` on the last, ``next.reward`` 1 on the last frame of a successful
episode (0 elsewhere), ``is_terminal`` on that frame too, ``discount`` 1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dreamzero_ros.engine.embodiment import Embodiment
from dreamzero_ros.export.droid_columns import DroidColumns
from dreamzero_ros.export.layout import ACTION, STATE, DatasetLayout
from dreamzero_ros.export.sampling import SampledEpisode

__all__ = ['episode_columns']


def _embodiment_rows(
    embodiment: Embodiment, episode: SampledEpisode
) -> tuple[np.ndarray, np.ndarray]:
    """State rows (the embodiment's state keys) and action rows (its action keys)."""
    state = np.array(
        [embodiment.state_vector(a, g) for a, g in zip(episode.arm, episode.grippers, strict=True)]
    ).reshape(len(episode.times), embodiment.state_dim)
    action = np.zeros((len(episode.times), embodiment.action_dim))
    action[:, list(embodiment.arm_columns)] = episode.target_arm
    action[:, list(embodiment.gripper_columns)] = episode.target_grippers
    return state, action


def episode_columns(
    layout: DatasetLayout,
    embodiment: Embodiment,
    droid: DroidColumns | None,
    episode: SampledEpisode,
    episode_index: int,
    first_index: int,
    task_index: Callable[[str], int],
) -> dict[str, np.ndarray]:
    """Every parquet column of ``episode`` (``layout.columns()`` order), one row per frame.

    ``first_index``: the dataset's frame count before this episode; ``task_index``: the
    index of an instruction in ``tasks.jsonl``.
    """
    frames = len(episode.times)
    if layout.droid:
        assert droid is not None, 'the DROID layout needs its columns'
        state, action = droid.rows(
            episode.arm, episode.grippers[:, 0], episode.target_arm, episode.target_grippers[:, 0]
        )
    else:
        state, action = _embodiment_rows(embodiment, episode)
    last = np.arange(frames) == frames - 1
    success_end = last & (episode.span.success is True)
    tasks = np.array([task_index(text) for text in episode.instructions], dtype=np.int64)
    frame_index = np.arange(frames, dtype=np.int64)
    values: dict[str, np.ndarray] = {
        STATE: state,
        ACTION: action,
        'next.reward': success_end.astype(np.float64),
        'next.done': last,
        'is_terminal': success_end,
        'is_first': frame_index == 0,
        'discount': np.ones(frames),
        'timestamp': frame_index / layout.fps,
        'episode_index': np.full(frames, episode_index, dtype=np.int64),
        'frame_index': frame_index,
        'index': first_index + frame_index,
        'task_index': tasks,
        **{column: tasks for column in layout.language_columns},
    }
    return {name: values[name] for name, _, _ in layout.columns()}
