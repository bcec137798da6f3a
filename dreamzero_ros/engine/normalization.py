# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""State and action normalisation with the per-embodiment q01/q99 statistics of a checkpoint.

DreamZero's checkpoints carry ``experiment_cfg/metadata.json``: for every embodiment tag, the
1st and 99th percentiles of each state and action key.  The model sees the state concatenated in
a fixed key order, mapped linearly so that ``[q01, q99] -> [-1, 1]`` (clipped), zero-padded to
``max_state_dim``; it predicts actions the same way, padded to ``max_action_dim``.  For DROID the
joint actions are relative: their statistics are those of ``action - current state``, so after
de-normalising the current joint positions are added back; the gripper is absolute.  A key whose
``q01 == q99`` passes through unscaled (then clipped), as upstream does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dreamzero_ros.errors import MetadataError, ObservationError

from .json_files import read_json

__all__ = [
    'EMBODIMENT_LAYOUTS',
    'EmbodimentLayout',
    'Quantiles',
    'StateActionNormalizer',
    'load_metadata',
]


@dataclass(frozen=True)
class EmbodimentLayout:
    """Which state/action keys an embodiment concatenates, in order, and which are relative."""

    state_keys: tuple[str, ...]
    action_keys: tuple[str, ...]
    relative_action_keys: tuple[str, ...]


#: Layouts of the embodiments this engine serves (upstream's ConcatTransform order and
#: ``relative_action_keys`` of the DROID training run).
EMBODIMENT_LAYOUTS: dict[str, EmbodimentLayout] = {
    'oxe_droid': EmbodimentLayout(
        state_keys=('joint_position', 'gripper_position'),
        action_keys=('joint_position', 'gripper_position'),
        relative_action_keys=('joint_position',),
    ),
}


@dataclass(frozen=True)
class Quantiles:
    """The q01/q99 statistics of one key."""

    q01: np.ndarray
    q99: np.ndarray

    def normalize(self, values: np.ndarray) -> np.ndarray:
        """Map ``[q01, q99]`` to ``[-1, 1]`` and clip; dims with ``q01 == q99`` pass through."""
        span = self.q99 - self.q01
        scaled = np.where(
            span != 0, 2.0 * (values - self.q01) / np.where(span != 0, span, 1) - 1, values
        )
        return np.clip(scaled, -1.0, 1.0)

    def denormalize(self, values: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`normalize` (no clipping)."""
        return (values + 1.0) / 2.0 * (self.q99 - self.q01) + self.q01


def load_metadata(path: str | Path) -> dict[str, Any]:
    """Read ``metadata.json``; a missing or unparsable file is a :class:`MetadataError`."""
    path = Path(path)
    if not path.is_file():
        raise MetadataError(f'missing statistics file {path}')
    metadata = read_json(path, MetadataError)
    if not isinstance(metadata, dict):
        raise MetadataError(f'{path}: expected a JSON object keyed by embodiment tag')
    return metadata


def _quantiles(stats: Mapping[str, Any], group: str, key: str, embodiment: str) -> Quantiles:
    """Read ``statistics[group][key]`` as :class:`Quantiles`, checking lengths and values."""
    entry = stats.get(group, {}).get(key)
    where = f'{embodiment}: statistics.{group}.{key}'
    if not isinstance(entry, Mapping) or 'q01' not in entry or 'q99' not in entry:
        available = sorted(stats.get(group, {}))
        raise MetadataError(f'{where} with q01/q99 is missing (available: {available})')
    try:
        # Upstream holds the statistics as float32 tensors: round them the same way.
        q01 = np.asarray(entry['q01'], dtype=np.float32).astype(np.float64).reshape(-1)
        q99 = np.asarray(entry['q99'], dtype=np.float32).astype(np.float64).reshape(-1)
    except (TypeError, ValueError) as error:
        raise MetadataError(f'{where}: q01/q99 must be lists of numbers ({error})') from error
    if q01.shape != q99.shape or q01.size == 0:
        raise MetadataError(
            f'{where}: q01 {q01.shape} and q99 {q99.shape} must be equal, non-empty'
        )
    if not (np.all(np.isfinite(q01)) and np.all(np.isfinite(q99))):
        raise MetadataError(f'{where}: q01/q99 must be finite')
    return Quantiles(q01, q99)


class StateActionNormalizer:
    """Turns robot state into model input and model output into absolute actions.

    Args:
        layout: key order and relative keys of the embodiment.
        state_stats: key -> quantiles, for every state key.
        action_stats: key -> quantiles, for every action key.
        max_state_dim: width of the padded state vector the model takes.
        max_action_dim: width of the padded action vector the model predicts.

    """

    def __init__(
        self,
        layout: EmbodimentLayout,
        state_stats: Mapping[str, Quantiles],
        action_stats: Mapping[str, Quantiles],
        max_state_dim: int = 64,
        max_action_dim: int = 32,
    ) -> None:
        self.layout = layout
        self.state_stats = {key: state_stats[key] for key in layout.state_keys}
        self.action_stats = {key: action_stats[key] for key in layout.action_keys}
        self.state_sizes = [stats.q01.size for stats in self.state_stats.values()]
        self.action_sizes = [stats.q01.size for stats in self.action_stats.values()]
        self.state_dim = sum(self.state_sizes)
        self.action_dim = sum(self.action_sizes)
        if self.state_dim > max_state_dim or self.action_dim > max_action_dim:
            raise MetadataError(
                f'state ({self.state_dim}) / action ({self.action_dim}) widths exceed the '
                f'model maximum ({max_state_dim} / {max_action_dim})'
            )
        for key in layout.relative_action_keys:
            if self.state_stats[key].q01.size != self.action_stats[key].q01.size:
                raise MetadataError(f'relative action key {key!r}: state and action widths differ')
        self.max_state_dim = max_state_dim
        self.max_action_dim = max_action_dim

    @classmethod
    def from_metadata(
        cls,
        metadata: Mapping[str, Any],
        embodiment: str,
        max_state_dim: int = 64,
        max_action_dim: int = 32,
    ) -> StateActionNormalizer:
        """Build from a parsed ``metadata.json`` for an embodiment tag such as ``oxe_droid``."""
        if embodiment not in EMBODIMENT_LAYOUTS:
            raise ObservationError(
                f'unknown embodiment {embodiment!r}; supported: {sorted(EMBODIMENT_LAYOUTS)}'
            )
        if embodiment not in metadata:
            raise MetadataError(
                f'metadata.json has no statistics for embodiment {embodiment!r} '
                f'(it has: {sorted(metadata)})'
            )
        stats = (
            metadata[embodiment].get('statistics')
            if isinstance(metadata[embodiment], Mapping)
            else None
        )
        if not isinstance(stats, Mapping):
            raise MetadataError(f'{embodiment}: metadata entry has no "statistics" object')
        layout = EMBODIMENT_LAYOUTS[embodiment]
        state = {key: _quantiles(stats, 'state', key, embodiment) for key in layout.state_keys}
        action = {key: _quantiles(stats, 'action', key, embodiment) for key in layout.action_keys}
        return cls(layout, state, action, max_state_dim, max_action_dim)

    def _split(self, vector: np.ndarray, sizes: list[int], keys: tuple[str, ...]) -> dict:
        """Split the last axis of ``vector`` into the named key blocks."""
        bounds = np.cumsum([0, *sizes])
        return {key: vector[..., bounds[i] : bounds[i + 1]] for i, key in enumerate(keys)}

    def normalize_state(self, state: np.ndarray) -> np.ndarray:
        """``(state_dim,)`` raw state -> ``(max_state_dim,)`` float32 model input."""
        state = np.asarray(state, dtype=np.float64)
        if state.shape != (self.state_dim,):
            raise ObservationError(f'state: expected shape ({self.state_dim},), got {state.shape}')
        if not np.all(np.isfinite(state)):
            raise ObservationError(f'state must be finite, got {state}')
        parts = self._split(state, self.state_sizes, self.layout.state_keys)
        normalized = np.concatenate(
            [self.state_stats[key].normalize(parts[key]) for key in self.layout.state_keys]
        )
        padded = np.zeros(self.max_state_dim, dtype=np.float32)
        padded[: self.state_dim] = normalized
        return padded

    def denormalize_actions(self, normalized: np.ndarray, state: np.ndarray) -> np.ndarray:
        """``(H, max_action_dim)`` model output + raw ``state`` -> ``(H, action_dim)`` absolute.

        Relative keys get the current state of the same key added back.
        """
        normalized = np.asarray(normalized, dtype=np.float64)
        if normalized.ndim != 2 or normalized.shape[1] < self.action_dim:
            raise ValueError(f'actions: expected (H, >= {self.action_dim}), got {normalized.shape}')
        actions = self._split(
            normalized[:, : self.action_dim], self.action_sizes, self.layout.action_keys
        )
        current = self._split(
            np.asarray(state, dtype=np.float64), self.state_sizes, self.layout.state_keys
        )
        blocks = []
        for key in self.layout.action_keys:
            block = self.action_stats[key].denormalize(actions[key])
            if key in self.layout.relative_action_keys:
                block = block + current[key][None, :]
            blocks.append(block)
        return np.concatenate(blocks, axis=1).astype(np.float32)
