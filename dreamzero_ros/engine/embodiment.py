# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Embodiments: the robot a checkpoint was trained for, as the model sees it.

An :class:`Embodiment` says

* which cameras the model sees: the checkpoint's video keys in the order the training run
  concatenated them, each camera's dataset resolution, the centre crop and resize applied to
  every view and how the views are stitched into one frame (:data:`LAYOUTS`);
* which state keys it reads and which action keys it predicts: their order, widths,
  normalisation and statistics, whether an action key is relative to the state of the same key,
  and which keys are grippers;
* how an instruction becomes the model's prompt (a template per embodiment);
* the control rate its actions are meant for (one action row per step).

Embodiments come from a checkpoint's ``experiment_cfg/`` or from an embodiment file (YAML) that
a user writes for a checkpoint that has none (both read by :mod:`.experiment_cfg`):
:meth:`from_mapping` reads that file's schema and :meth:`to_mapping` writes it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dreamzero_ros.errors import EmbodimentError

__all__ = [
    'EMBODIMENTS_DIR',
    'INSTRUCTION',
    'LAYOUTS',
    'NORMALIZATIONS',
    'Camera',
    'Embodiment',
    'KeyStatistics',
    'ModalityKey',
    'stitched_size',
]

#: Embodiment files shipped with the package (``oxe_droid.yaml``: DROID).
EMBODIMENTS_DIR = Path(__file__).resolve().parents[1] / 'embodiments'

#: Placeholder of the instruction in a prompt template.
INSTRUCTION = '{instruction}'

#: How views are stitched into the model's frame (upstream's ``DreamTransform``), with the
#: number of cameras each takes.  ``droid``: the third view on top with every column doubled,
#: the first and second bottom-left and bottom-right (2h x 2w); ``grid``: a 2x2 grid, first
#: view top-left, second bottom-left, third top-right, the rest black (2h x 2w); ``single``:
#: one view as it is (h x w).
LAYOUTS: dict[str, tuple[int, int]] = {'droid': (3, 3), 'grid': (2, 3), 'single': (1, 1)}

#: Sane ranges of what an embodiment file or a checkpoint's ``experiment_cfg/`` may say, checked
#: at load (a camera 10^12 pixels high would otherwise load and make every inference fail to
#: allocate). A camera's dataset resolution (8K at most), the model's view size (DROID:
#: 176x320), the width of one state or action key and the number of keys (the model pads the
#: state to 64 values, the actions to 32), the control rate.
MAX_CAMERA_SIDE = 8192
MAX_VIEW_SIDE = 2048
MAX_KEY_DIM = 64
MAX_KEYS = 64
MAX_CONTROL_HZ = 1000.0

#: Normalisation modes of upstream's ``StateActionTransform`` this engine applies, with the
#: statistics each needs; ``none`` leaves a key as it is (upstream: a key without a mode).
NORMALIZATIONS: dict[str, tuple[str, ...]] = {
    'q99': ('q01', 'q99'),
    'min_max': ('min', 'max'),
    'mean_std': ('mean', 'std'),
    'binary': (),
    'none': (),
}


@dataclass(frozen=True, eq=False)
class KeyStatistics:
    """Dataset statistics of one state or action key (``metadata.json``'s ``statistics``).

    Values are rounded to float32 and held as float64: upstream holds them as float32 tensors.
    """

    values: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rounded = {
            str(name): np.asarray(array, dtype=np.float32).astype(np.float64).reshape(-1)
            for name, array in self.values.items()
        }
        object.__setattr__(self, 'values', rounded)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyStatistics):
            return NotImplemented
        return self.values.keys() == other.values.keys() and all(
            np.array_equal(array, other.values[name]) for name, array in self.values.items()
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_mapping(cls, data: Any, dim: int, where: str) -> KeyStatistics:
        """Parse ``{name: [numbers]}``; every list must hold ``dim`` finite numbers."""
        if not isinstance(data, Mapping):
            raise EmbodimentError(f'{where} must be a mapping of statistic name to numbers')
        values = {}
        for name, numbers in data.items():
            try:
                array = np.asarray(numbers, dtype=np.float32).astype(np.float64)
            except (TypeError, ValueError) as error:
                raise EmbodimentError(f'{where}.{name} must be a list of numbers') from error
            if array.shape != (dim,):
                raise EmbodimentError(
                    f'{where}.{name} has shape {array.shape}, the key is {dim} wide'
                )
            if not np.all(np.isfinite(array)):
                raise EmbodimentError(f'{where}.{name} must be finite')
            values[str(name)] = array
        return cls(values)

    def to_mapping(self) -> dict[str, list[float]]:
        """``{name: [numbers]}``."""
        return {name: array.tolist() for name, array in self.values.items()}


@dataclass(frozen=True)
class Camera:
    """One camera the model sees: its checkpoint video key and dataset resolution (h, w)."""

    key: str
    source_size: tuple[int, int]


@dataclass(frozen=True)
class ModalityKey:
    """One state or action key: its name, width, normalisation and statistics.

    Attributes:
        key: the name without the ``state.`` / ``action.`` prefix.
        dim: number of values.
        normalization: one of :data:`NORMALIZATIONS`.
        statistics: what the normalisation needs (it may hold more).
        relative: an action key predicted relative to the current state of the same key.
        gripper: the key holds gripper positions rather than arm joints.
        velocity: the key holds a base velocity (e.g. AgiBot's ``robot_velocity``), neither
            joints nor grippers.

    """

    key: str
    dim: int
    normalization: str = 'q99'
    statistics: KeyStatistics = field(default_factory=KeyStatistics)
    relative: bool = False
    gripper: bool = False
    velocity: bool = False


@dataclass(frozen=True)
class Embodiment:
    """Everything about a robot that the model's inputs and outputs depend on.

    Attributes:
        tag: the embodiment tag (a key of ``metadata.json``).
        cameras: the views in the model's order.
        view_size: ``(height, width)`` of every view after crop and resize.
        crop_scale: centre-crop fraction of each camera's dataset resolution (1: no crop).
        layout: how the views are stitched (:data:`LAYOUTS`).
        state: state keys in the model's order.
        action: action keys in the model's order.
        prompt_template: the model's prompt, with :data:`INSTRUCTION` where the task goes.
        control_hz: control rate, one action row per step.

    """

    tag: str
    cameras: tuple[Camera, ...]
    view_size: tuple[int, int]
    crop_scale: float
    layout: str
    state: tuple[ModalityKey, ...]
    action: tuple[ModalityKey, ...]
    prompt_template: str
    control_hz: float

    def __post_init__(self) -> None:
        if not isinstance(self.tag, str) or not self.tag:
            raise EmbodimentError('embodiment tag must be a non-empty string')
        where = f'embodiment {self.tag!r}'
        if self.layout not in LAYOUTS:
            raise EmbodimentError(f'{where}: layout {self.layout!r} is not one of {list(LAYOUTS)}')
        low, high = LAYOUTS[self.layout]
        if not low <= len(self.cameras) <= high:
            raise EmbodimentError(
                f'{where}: layout {self.layout!r} takes {low}..{high} cameras, '
                f'got {len(self.cameras)}: {list(self.camera_keys)}'
            )
        for label, names in (
            ('camera', list(self.camera_keys)),
            ('state', [k.key for k in self.state]),
            ('action', [k.key for k in self.action]),
        ):
            if len(set(names)) != len(names):
                raise EmbodimentError(f'{where}: duplicated {label} key in {names}')
        sizes = [self.view_size, *(camera.source_size for camera in self.cameras)]
        if any(len(size) != 2 or min(size) < 1 for size in sizes):
            raise EmbodimentError(f'{where}: image sizes must be positive (height, width) pairs')
        if max(self.view_size) > MAX_VIEW_SIDE:
            raise EmbodimentError(
                f'{where}: view size {tuple(self.view_size)} is beyond {MAX_VIEW_SIDE} pixels '
                'a side'
            )
        for camera in self.cameras:
            if max(camera.source_size) > MAX_CAMERA_SIDE:
                raise EmbodimentError(
                    f'{where}: camera {camera.key!r} size {tuple(camera.source_size)} is beyond '
                    f'{MAX_CAMERA_SIDE} pixels a side'
                )
        for label, keys in (('state', self.state), ('action', self.action)):
            if len(keys) > MAX_KEYS:
                raise EmbodimentError(f'{where}: {len(keys)} {label} keys, more than {MAX_KEYS}')
        if not 0 < self.crop_scale <= 1:
            raise EmbodimentError(f'{where}: crop_scale must be in (0, 1], got {self.crop_scale}')
        if not self.action:
            raise EmbodimentError(f'{where}: no action keys')
        if INSTRUCTION not in self.prompt_template:
            raise EmbodimentError(f'{where}: prompt_template must contain {INSTRUCTION}')
        if not 0 < self.control_hz <= MAX_CONTROL_HZ:
            raise EmbodimentError(
                f'{where}: control_hz must be positive and at most {MAX_CONTROL_HZ:g}, got '
                f'{self.control_hz}'
            )
        state = {key.key: key for key in self.state}
        for key in (*self.state, *self.action):
            _check_key(key, where)
            if key.relative and (key.key not in state or state[key.key].dim != key.dim):
                raise EmbodimentError(
                    f'{where}: relative action key {key.key!r} needs a state key of the same '
                    'name and width'
                )

    # ------------------------------------------------------------------ derived
    @property
    def camera_keys(self) -> tuple[str, ...]:
        """Video keys in the model's order."""
        return tuple(camera.key for camera in self.cameras)

    @property
    def state_dim(self) -> int:
        """Width of the concatenated state."""
        return sum(key.dim for key in self.state)

    @property
    def action_dim(self) -> int:
        """Width of one action row."""
        return sum(key.dim for key in self.action)

    @property
    def gripper_columns(self) -> tuple[int, ...]:
        """Columns of an action row that hold gripper positions."""
        return _columns(self.action, gripper=True)

    @property
    def arm_columns(self) -> tuple[int, ...]:
        """Columns of an action row that are neither grippers nor velocities."""
        return _columns(self.action, gripper=False, velocity=False)

    @property
    def velocity_columns(self) -> tuple[int, ...]:
        """Columns of an action row that hold base velocities."""
        return _columns(self.action, gripper=False, velocity=True)

    @property
    def arm_state_dim(self) -> int:
        """Width of the non-gripper state keys together (a robot's arm joints)."""
        return sum(key.dim for key in self.state if not key.gripper)

    @property
    def gripper_state_dim(self) -> int:
        """Width of the gripper state keys together."""
        return sum(key.dim for key in self.state if key.gripper)

    def state_vector(self, arm: np.ndarray, grippers: np.ndarray) -> np.ndarray:
        """The state in the model's key order from the arm joints and the grippers.

        ``arm`` holds the non-gripper state keys one after the other, ``grippers`` the gripper
        keys, each in the embodiment's order; they are interleaved back into key order.
        """
        arm, grippers = np.asarray(arm, np.float64), np.asarray(grippers, np.float64)
        parts, taken = [], {False: 0, True: 0}
        for key in self.state:
            source = grippers if key.gripper else arm
            start = taken[key.gripper]
            parts.append(source[start : start + key.dim])
            taken[key.gripper] = start + key.dim
        return np.concatenate(parts) if parts else np.zeros(0)

    @property
    def stitched_size(self) -> tuple[int, int]:
        """``(height, width)`` of the model's frame."""
        return stitched_size(self.view_size, self.layout)

    def prompt(self, instruction: str) -> str:
        """The model's prompt for a task instruction, built as upstream's collator does.

        An instruction that parses as a Python literal is replaced by its value (the first
        element of a list or tuple); the text is lower-cased and put into the template.
        """
        text = instruction
        try:
            value = ast.literal_eval(instruction)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        else:
            text = str(value[0]) if isinstance(value, list | tuple) and value else str(value)
        return self.prompt_template.replace(INSTRUCTION, text.lower())

    # ------------------------------------------------------------------ file schema
    @classmethod
    def from_mapping(
        cls,
        data: Any,
        where: str = 'embodiment',
        statistics: Mapping[str, Any] | None = None,
    ) -> Embodiment:
        """Parse the embodiment file schema (``docs/embodiments.md``) strictly.

        ``statistics`` (the tag's ``statistics`` in ``metadata.json``) is used when the mapping
        has no ``statistics`` block of its own.
        """
        data = _mapping(data, where)
        _check_keys(data, _FILE_KEYS, where, required=_FILE_REQUIRED)
        view = _mapping(data['view'], f'{where}.view')
        _check_keys(view, _VIEW_KEYS, f'{where}.view', required=('height', 'width'))
        cameras = []
        for i, entry in enumerate(_sequence(data['cameras'], f'{where}.cameras')):
            at = f'{where}.cameras[{i}]'
            entry = _mapping(entry, at)
            _check_keys(entry, _CAMERA_KEYS, at, required=tuple(sorted(_CAMERA_KEYS)))
            size = (_int(entry['height'], f'{at}.height'), _int(entry['width'], f'{at}.width'))
            cameras.append(Camera(_text(entry['key'], f'{at}.key'), size))
        layout = view.get('layout', 'single' if len(cameras) == 1 else 'grid')
        stats = data.get('statistics', statistics)
        if stats is None:
            raise EmbodimentError(
                f'{where}: no statistics: add a "statistics" block (state/action key -> q01, '
                'q99, ...) or use a checkpoint with experiment_cfg/metadata.json'
            )
        stats = _mapping(stats, f'{where}.statistics')
        fields = dict(
            tag=_text(data['tag'], f'{where}.tag'),
            cameras=tuple(cameras),
            view_size=(
                _int(view['height'], f'{where}.view.height'),
                _int(view['width'], f'{where}.view.width'),
            ),
            crop_scale=_number(view.get('crop_scale', 1.0), f'{where}.view.crop_scale'),
            layout=_text(layout, f'{where}.view.layout'),
            state=_keys(data.get('state', []), 'state', stats, where),
            action=_keys(data['action'], 'action', stats, where),
            prompt_template=_text(data['prompt_template'], f'{where}.prompt_template'),
            control_hz=_number(data['control_hz'], f'{where}.control_hz'),
        )
        try:
            return cls(**fields)
        except EmbodimentError as error:
            raise EmbodimentError(f'{where}: {error}') from error

    def to_mapping(self, with_statistics: bool = True) -> dict[str, Any]:
        """The embodiment file content (:meth:`from_mapping` reads it back)."""
        data: dict[str, Any] = {
            'tag': self.tag,
            'control_hz': self.control_hz,
            'cameras': [
                {'key': c.key, 'height': c.source_size[0], 'width': c.source_size[1]}
                for c in self.cameras
            ],
            'view': {
                'height': self.view_size[0],
                'width': self.view_size[1],
                'crop_scale': self.crop_scale,
                'layout': self.layout,
            },
            'state': [_key_mapping(key) for key in self.state],
            'action': [_key_mapping(key) for key in self.action],
            'prompt_template': self.prompt_template,
        }
        if with_statistics:
            data['statistics'] = {
                group: {key.key: key.statistics.to_mapping() for key in keys}
                for group, keys in (('state', self.state), ('action', self.action))
            }
        return data


def stitched_size(view_size: tuple[int, int], layout: str) -> tuple[int, int]:
    """``(height, width)`` of the frame ``layout`` stitches views of ``view_size`` into."""
    height, width = view_size
    return (height, width) if layout == 'single' else (2 * height, 2 * width)


# ---------------------------------------------------------------------- helpers
#: ``groups`` (the robot's controllers of each action key) is read by core/robot/action_groups.py.
_FILE_KEYS = frozenset(
    {
        'tag',
        'control_hz',
        'cameras',
        'view',
        'state',
        'action',
        'prompt_template',
        'statistics',
        'groups',
    }
)
_FILE_REQUIRED = ('tag', 'control_hz', 'cameras', 'view', 'action', 'prompt_template')
_VIEW_KEYS = frozenset({'height', 'width', 'crop_scale', 'layout'})
_CAMERA_KEYS = frozenset({'key', 'height', 'width'})
_KEY_KEYS = frozenset({'key', 'dim', 'normalization', 'relative', 'gripper', 'velocity'})
#: Name parts that make a key a gripper, or a base velocity, unless its entry says otherwise
#: (AgiBot's ``left_effector_position``, ``robot_velocity``).
_GRIPPER_NAMES = ('gripper', 'effector')
_VELOCITY_NAMES = ('velocity',)


def _check_key(key: ModalityKey, where: str) -> None:
    if not 1 <= key.dim <= MAX_KEY_DIM:
        raise EmbodimentError(
            f'{where}: key {key.key!r} must be 1 to {MAX_KEY_DIM} wide, got {key.dim}'
        )
    if key.normalization not in NORMALIZATIONS:
        raise EmbodimentError(
            f'{where}: key {key.key!r}: normalization {key.normalization!r} is not one of '
            f'{list(NORMALIZATIONS)}'
        )
    missing = [s for s in NORMALIZATIONS[key.normalization] if s not in key.statistics.values]
    if missing:
        raise EmbodimentError(
            f'{where}: key {key.key!r} is normalised with {key.normalization} but its '
            f'statistics lack {missing}'
        )


def _columns(
    keys: Sequence[ModalityKey], gripper: bool, velocity: bool | None = None
) -> tuple[int, ...]:
    columns, start = [], 0
    for key in keys:
        if key.gripper == gripper and velocity in (None, key.velocity):
            columns.extend(range(start, start + key.dim))
        start += key.dim
    return tuple(columns)


def _key_mapping(key: ModalityKey) -> dict[str, Any]:
    return {
        'key': key.key,
        'dim': key.dim,
        'normalization': key.normalization,
        'relative': key.relative,
        'gripper': key.gripper,
        'velocity': key.velocity,
    }


def _keys(
    entries: Any, group: str, statistics: Mapping[str, Any], where: str
) -> tuple[ModalityKey, ...]:
    group_stats = statistics.get(group, {})
    if not isinstance(group_stats, Mapping):
        raise EmbodimentError(f'{where}.statistics.{group} must be a mapping')
    keys = []
    for i, entry in enumerate(_sequence(entries, f'{where}.{group}')):
        at = f'{where}.{group}[{i}]'
        entry = _mapping(entry, at)
        _check_keys(entry, _KEY_KEYS, at, required=('key', 'dim'))
        name = _text(entry['key'], f'{at}.key')
        dim = _int(entry['dim'], f'{at}.dim')
        if not 1 <= dim <= MAX_KEY_DIM:
            raise EmbodimentError(f'{at}.dim must be 1 to {MAX_KEY_DIM}, got {dim}')
        normalization = _text(entry.get('normalization', 'q99'), f'{at}.normalization')
        relative = _flag(entry.get('relative', False), f'{at}.relative')
        if relative and group != 'action':
            raise EmbodimentError(f'{at}: only action keys can be relative')
        raw = group_stats.get(name)
        if raw is None and NORMALIZATIONS.get(normalization):
            raise EmbodimentError(
                f'{where}: no statistics for {group} key {name!r} '
                f'(statistics.{group} has: {sorted(group_stats)})'
            )
        stats = KeyStatistics.from_mapping(
            {} if raw is None else _list_entries(raw), dim, f'{where}.statistics.{group}.{name}'
        )
        gripper = _flag(
            entry.get('gripper', any(part in name for part in _GRIPPER_NAMES)), f'{at}.gripper'
        )
        velocity = _flag(
            entry.get('velocity', any(part in name for part in _VELOCITY_NAMES)),
            f'{at}.velocity',
        )
        if gripper and velocity:
            raise EmbodimentError(f'{at}: a key is a gripper or a velocity, not both')
        keys.append(ModalityKey(name, dim, normalization, stats, relative, gripper, velocity))
    return tuple(keys)


def _list_entries(raw: Any) -> Any:
    """The list-valued entries of a key's statistics (other entries are not statistics)."""
    if not isinstance(raw, Mapping):
        return raw
    return {name: value for name, value in raw.items() if isinstance(value, list)}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise EmbodimentError(f'{where} must be a mapping, got {type(value).__name__}')
    return value


def _sequence(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise EmbodimentError(f'{where} must be a list, got {type(value).__name__}')
    return value


def _check_keys(
    mapping: Mapping[str, Any], allowed: frozenset, where: str, required: Sequence[str] = ()
) -> None:
    unknown = sorted(str(key) for key in set(mapping) - allowed)
    if unknown:
        raise EmbodimentError(f'unknown key {where}.{unknown[0]} (allowed: {sorted(allowed)})')
    missing = [key for key in required if key not in mapping]
    if missing:
        raise EmbodimentError(f'{where} lacks {missing}')


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise EmbodimentError(f'{where} must be a non-empty string')
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EmbodimentError(f'{where} must be an integer, got {value!r}')
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EmbodimentError(f'{where} must be a number, got {value!r}')
    return float(value)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise EmbodimentError(f'{where} must be true or false, got {value!r}')
    return value
