# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What a dataset exported for an embodiment holds: its columns, features and GEAR metadata.

Two layouts, both LeRobot v2.1 with GEAR's ``modality.json``:

* ``oxe_droid``: GEAR-Dreams/DreamZero-DROID-Data as upstream's ``convert_droid.py`` writes it.
  ``observation.state`` is ``cartesian_position (6), gripper_position (1), joint_position (7)``;
  ``action`` is ``cartesian_position (6), cartesian_velocity (6), gripper_position (1),
  gripper_velocity (1), joint_position (7), joint_velocity (7)``; the RLDS columns ``next.reward``,
  ``next.done``, ``is_terminal``, ``is_first``, ``discount``; three language columns
  ``annotation.language.language_instruction[_2|_3]`` holding task indices; sub-keys in
  ``modality.json`` as ``{start, end}`` (float64, ``observation.state`` / ``action``).
* any other embodiment: ``observation.state`` and ``action`` concatenate the embodiment file's
  state and action keys in its order; ``modality.json`` as upstream's
  ``convert_lerobot_to_gear.py`` writes it; one language column (``annotation.task``, or the one
  upstream's training config names for the tag).

Video features are ``observation.images.<camera key>`` at each camera's dataset resolution, H.264
``yuv420p``. Nothing here reads a bag or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamzero_ros.engine.checkpoint.data_files import read_yaml
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR, NORMALIZATIONS, Embodiment
from dreamzero_ros.errors import DatasetError, EmbodimentError

__all__ = [
    'CODEBASE_VERSION',
    'DROID_TAG',
    'DatasetLayout',
    'VectorPart',
    'embodiment_for_export',
    'layout_for',
    'rate_number',
]

#: LeRobot dataset format written.
CODEBASE_VERSION = 'v2.1'
DROID_TAG = 'oxe_droid'
#: LeRobot's default chunk size: episodes per ``chunk-XXX`` folder.
CHUNKS_SIZE = 1000
DATA_PATH = 'data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet'
VIDEO_PATH = 'videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4'
STATE = 'observation.state'
ACTION = 'action'
VIDEO_CODEC = 'h264'
PIX_FMT = 'yuv420p'

#: The language columns upstream's training configs read, by tag (others: ``annotation.task``).
LANGUAGE_COLUMNS: dict[str, tuple[str, ...]] = {
    DROID_TAG: tuple(
        f'annotation.language.{key}'
        for key in ('language_instruction', 'language_instruction_2', 'language_instruction_3')
    ),
    'agibot': ('annotation.language.action_text',),
}
DEFAULT_LANGUAGE_COLUMNS = ('annotation.task',)

#: DROID's state and action vectors (convert_droid.py's key order and widths).
DROID_STATE = (('cartesian_position', 6), ('gripper_position', 1), ('joint_position', 7))
DROID_ACTION = (
    ('cartesian_position', 6),
    ('cartesian_velocity', 6),
    ('gripper_position', 1),
    ('gripper_velocity', 1),
    ('joint_position', 7),
    ('joint_velocity', 7),
)
#: DROID's RLDS columns, after the state and action (convert_droid.py), with their dtypes.
DROID_RLDS_COLUMNS = (
    ('next.reward', 'float64'),
    ('next.done', 'bool'),
    ('is_terminal', 'bool'),
    ('is_first', 'bool'),
    ('discount', 'float64'),
)
#: The index columns of every LeRobot dataset.
INDEX_COLUMNS = (
    ('timestamp', 'float64'),
    ('episode_index', 'int64'),
    ('frame_index', 'int64'),
    ('index', 'int64'),
)


def rate_number(fps: float) -> float | int:
    """A rate as LeRobot writes it in JSON: ``15.0`` -> ``15``."""
    return int(fps) if float(fps).is_integer() else float(fps)


@dataclass(frozen=True)
class VectorPart:
    """A named slice of ``observation.state`` or ``action``: GEAR's sub-key, its width."""

    name: str
    dim: int


@dataclass(frozen=True)
class DatasetLayout:
    """The columns, features and GEAR metadata of a dataset for one embodiment.

    Attributes:
        tag: the embodiment tag (``meta/embodiment.json``, the key of upstream's configs).
        fps: frames per second of the parquet rows and the videos.
        cameras: ``(key, height, width)`` of each video, in the embodiment's order.
        state: the parts of ``observation.state``, in order.
        action: the parts of ``action``, in order.
        language_columns: the ``annotation.*`` columns (task indices of ``tasks.jsonl``).
        relative_keys: action parts whose statistics relative to the state of the same name go
            into ``relative_stats_dreamzero.json``.
        action_horizon: action rows a training sample reads (upstream's action
            ``delta_indices``: 0 .. horizon-1), for the relative statistics.

    """

    tag: str
    fps: float
    cameras: tuple[tuple[str, int, int], ...]
    state: tuple[VectorPart, ...]
    action: tuple[VectorPart, ...]
    language_columns: tuple[str, ...]
    relative_keys: tuple[str, ...]
    action_horizon: int = 24

    @property
    def droid(self) -> bool:
        """Whether this is DROID's layout (its RLDS columns and ``modality.json`` style)."""
        return self.tag == DROID_TAG

    @property
    def state_dim(self) -> int:
        """Width of ``observation.state``."""
        return sum(part.dim for part in self.state)

    @property
    def action_dim(self) -> int:
        """Width of ``action``."""
        return sum(part.dim for part in self.action)

    @property
    def video_keys(self) -> tuple[str, ...]:
        """``observation.images.<camera>`` of every camera, in order."""
        return tuple(f'observation.images.{key}' for key, _, _ in self.cameras)

    def slice_of(self, group: str, name: str) -> slice:
        """Columns of part ``name`` in ``observation.state`` (``state``) or ``action``."""
        start = 0
        for part in self.state if group == 'state' else self.action:
            if part.name == name:
                return slice(start, start + part.dim)
            start += part.dim
        raise KeyError(f'{group} has no part {name!r}')

    def columns(self) -> list[tuple[str, str, int]]:
        """``(name, dtype, width)`` of every parquet column, in the order they are written."""
        vectors = [(STATE, 'float64', self.state_dim), (ACTION, 'float64', self.action_dim)]
        rlds = [(name, dtype, 1) for name, dtype in DROID_RLDS_COLUMNS] if self.droid else []
        index = [(name, dtype, 1) for name, dtype in INDEX_COLUMNS]
        language = [(name, 'int64', 1) for name in self.language_columns]
        return [*vectors, *rlds, *index, *language, ('task_index', 'int64', 1)]

    def features(self) -> dict[str, Any]:
        """``info.json``'s ``features``: the videos, then every parquet column."""
        features: dict[str, Any] = {}
        for (_key, height, width), video_key in zip(self.cameras, self.video_keys, strict=True):
            features[video_key] = {
                'dtype': 'video',
                'shape': [height, width, 3],
                'names': ['height', 'width', 'channels'],
                'info': {
                    'video.height': height,
                    'video.width': width,
                    'video.codec': VIDEO_CODEC,
                    'video.pix_fmt': PIX_FMT,
                    'video.is_depth_map': False,
                    'video.fps': rate_number(self.fps),
                    'video.channels': 3,
                    'has_audio': False,
                },
            }
        names = {STATE: [p.name for p in self.state], ACTION: [p.name for p in self.action]}
        for name, dtype, width in self.columns():
            features[name] = {'dtype': dtype, 'shape': [width], 'names': names.get(name)}
        return features

    def modality(self) -> dict[str, Any]:
        """GEAR's ``meta/modality.json``."""
        modality: dict[str, Any] = {}
        for group, parts, column in (('state', self.state, STATE), ('action', self.action, ACTION)):
            entries, start = {}, 0
            for part in parts:
                if self.droid:  # convert_droid.py: float64 is the default, left out
                    entries[part.name] = {'start': start, 'end': start + part.dim}
                else:  # convert_lerobot_to_gear.py
                    entries[part.name] = {
                        'original_key': column,
                        'start': start,
                        'end': start + part.dim,
                        'rotation_type': None,
                        'absolute': True,
                        'dtype': 'float64',
                        'range': None,
                    }
                start += part.dim
            modality[group] = entries
        modality['video'] = {
            key: {'original_key': video_key}
            for (key, _, _), video_key in zip(self.cameras, self.video_keys, strict=True)
        }
        annotations = [name.removeprefix('annotation.') for name in self.language_columns]
        if self.droid:
            modality['annotation'] = {name: {} for name in annotations}
        else:
            modality['annotation'] = {
                name: {'original_key': column}
                for name, column in zip(annotations, self.language_columns, strict=True)
            }
        return modality

    def embodiment_json(self) -> dict[str, str]:
        """GEAR's ``meta/embodiment.json``."""
        return {'robot_type': self.tag, 'embodiment_tag': self.tag}


def layout_for(
    embodiment: Embodiment, fps: float | None = None, action_horizon: int = 24
) -> DatasetLayout:
    """The dataset layout of ``embodiment`` (DROID's for ``oxe_droid``).

    Raises:
        DatasetError: an embodiment whose actions cannot come from joint states (base
            velocities), or a camera size H.264 ``yuv420p`` cannot hold (odd).

    """
    velocity = [key.key for key in embodiment.action if key.velocity]
    if velocity:
        raise DatasetError(
            f'embodiment {embodiment.tag!r}: velocity action keys {velocity} are not exported '
            '(joint states carry no base velocity)'
        )
    odd = [c.key for c in embodiment.cameras if c.source_size[0] % 2 or c.source_size[1] % 2]
    if odd:
        raise DatasetError(
            f'embodiment {embodiment.tag!r}: cameras {odd} have an odd height or width, which '
            'H.264 yuv420p video cannot hold'
        )
    if action_horizon < 1:
        raise DatasetError(f'action horizon must be >= 1, got {action_horizon}')
    cameras = tuple((c.key, *c.source_size) for c in embodiment.cameras)
    rate = float(fps or embodiment.control_hz)
    if embodiment.tag == DROID_TAG:
        state = tuple(VectorPart(*part) for part in DROID_STATE)
        action = tuple(VectorPart(*part) for part in DROID_ACTION)
    else:
        state = tuple(VectorPart(key.key, key.dim) for key in embodiment.state)
        action = tuple(VectorPart(key.key, key.dim) for key in embodiment.action)
    return DatasetLayout(
        tag=embodiment.tag,
        fps=rate,
        cameras=cameras,
        state=state,
        action=action,
        language_columns=LANGUAGE_COLUMNS.get(embodiment.tag, DEFAULT_LANGUAGE_COLUMNS),
        relative_keys=tuple(key.key for key in embodiment.action if key.relative),
        action_horizon=action_horizon,
    )


def _placeholder_statistics(data: Any) -> dict[str, Any]:
    """Zero statistics for every key of an embodiment file (an export never normalises)."""
    names = sorted({name for names in NORMALIZATIONS.values() for name in names})
    stats: dict[str, Any] = {}
    for group in ('state', 'action'):
        entries = data.get(group, []) if isinstance(data, Mapping) else []
        stats[group] = {
            entry['key']: {name: [0.0] * entry['dim'] for name in names}
            for entry in entries if isinstance(entry, Mapping)
            and isinstance(entry.get('key'), str) and isinstance(entry.get('dim'), int)
            and entry['dim'] > 0
        }  # fmt: skip
    return stats


def embodiment_for_export(source: str) -> Embodiment:
    """The embodiment of a shipped tag (``oxe_droid``) or an embodiment file, statistics or not.

    An export needs its cameras, keys and rate only; a file without statistics is read as if it
    had them.

    Raises:
        EmbodimentError: no such tag or file, or a malformed one (naming the field).

    """
    path = Path(source)
    if not path.suffix and (EMBODIMENTS_DIR / f'{source}.yaml').is_file():
        path = EMBODIMENTS_DIR / f'{source}.yaml'
    if not path.is_file():
        shipped = sorted(p.stem for p in EMBODIMENTS_DIR.glob('*.yaml'))
        raise EmbodimentError(f'no embodiment file {source} (shipped: {", ".join(shipped)})')
    data = read_yaml(path, EmbodimentError)
    statistics = None
    if isinstance(data, Mapping) and 'statistics' not in data:
        statistics = _placeholder_statistics(data)
    return Embodiment.from_mapping(data, str(path), statistics)
