# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""State and action normalisation of an embodiment, with its checkpoint's statistics.

The model sees the state concatenated in the embodiment's key order, each key normalised with
its mode and its :class:`~.embodiment.KeyStatistics` (:func:`normalize`; ``q99``: ``[q01, q99]
-> [-1, 1]``, clipped), zero-padded to ``max_state_dim``; it predicts actions the same way,
padded to ``max_action_dim``.  A relative action key (DROID's joints) is predicted as
``action - current state``: after de-normalising, the current state of the same key is added
back.
"""

from __future__ import annotations

import numpy as np

from dreamzero_ros.engine.embodiment import Embodiment, KeyStatistics, ModalityKey
from dreamzero_ros.errors import EmbodimentError, ObservationError

__all__ = ['StateActionNormalizer', 'denormalize', 'normalize']


def normalize(statistics: KeyStatistics, x: np.ndarray, mode: str) -> np.ndarray:
    """Raw values -> model values (upstream's ``Normalizer.forward``)."""
    v = statistics.values
    if mode == 'q99':
        return _scale_to_unit(x, v['q01'], v['q99'], keep_constant=True)
    if mode == 'min_max':
        return _scale_to_unit(x, v['min'], v['max'], keep_constant=False)
    if mode == 'mean_std':
        std = v['std']
        return np.where(std != 0, (x - v['mean']) / np.where(std != 0, std, 1), x)
    if mode == 'binary':
        return (x > 0.5).astype(np.float64)
    return x


def denormalize(statistics: KeyStatistics, x: np.ndarray, mode: str) -> np.ndarray:
    """Model values -> raw values (upstream's ``Normalizer.inverse``; no clipping)."""
    v = statistics.values
    if mode == 'q99':
        return (x + 1.0) / 2.0 * (v['q99'] - v['q01']) + v['q01']
    if mode == 'min_max':
        return (x + 1.0) / 2.0 * (v['max'] - v['min']) + v['min']
    if mode == 'mean_std':
        return x * v['std'] + v['mean']
    if mode == 'binary':
        return (x > 0.5).astype(np.float64)
    return x


def _scale_to_unit(
    x: np.ndarray, low: np.ndarray, high: np.ndarray, keep_constant: bool
) -> np.ndarray:
    """``[low, high] -> [-1, 1]``, clipped; dims with ``low == high`` keep x (or become 0)."""
    span = high - low
    scaled = 2.0 * (x - low) / np.where(span != 0, span, 1) - 1
    scaled = np.where(span != 0, scaled, x if keep_constant else 0.0)
    return np.clip(scaled, -1.0, 1.0)


def _bounds(keys: tuple[ModalityKey, ...]) -> dict[str, slice]:
    """Key -> its slice of the concatenated vector."""
    bounds, start = {}, 0
    for key in keys:
        bounds[key.key] = slice(start, start + key.dim)
        start += key.dim
    return bounds


class StateActionNormalizer:
    """Turns robot state into model input and model output into absolute actions.

    Args:
        embodiment: key order, widths, normalisation, statistics and relative keys.
        max_state_dim: width of the padded state vector the model takes.
        max_action_dim: width of the padded action vector the model predicts.

    """

    def __init__(
        self, embodiment: Embodiment, max_state_dim: int = 64, max_action_dim: int = 32
    ) -> None:
        self.embodiment = embodiment
        self.state_dim = embodiment.state_dim
        self.action_dim = embodiment.action_dim
        if self.state_dim > max_state_dim or self.action_dim > max_action_dim:
            raise EmbodimentError(
                f'embodiment {embodiment.tag!r}: state ({self.state_dim}) / action '
                f'({self.action_dim}) widths exceed the model maximum ({max_state_dim} / '
                f'{max_action_dim})'
            )
        self.max_state_dim = max_state_dim
        self.max_action_dim = max_action_dim
        self._state_bounds = _bounds(embodiment.state)
        self._action_bounds = _bounds(embodiment.action)

    def normalize_state(self, state: np.ndarray) -> np.ndarray:
        """``(state_dim,)`` raw state -> ``(max_state_dim,)`` float32 model input."""
        state = np.asarray(state, dtype=np.float64)
        if state.shape != (self.state_dim,):
            raise ObservationError(f'state: expected shape ({self.state_dim},), got {state.shape}')
        if not np.all(np.isfinite(state)):
            raise ObservationError(f'state must be finite, got {state}')
        padded = np.zeros(self.max_state_dim, dtype=np.float32)
        for key in self.embodiment.state:
            part = self._state_bounds[key.key]
            padded[part] = normalize(key.statistics, state[part], key.normalization)
        return padded

    def denormalize_actions(self, normalized: np.ndarray, state: np.ndarray) -> np.ndarray:
        """``(H, max_action_dim)`` model output + raw ``state`` -> ``(H, action_dim)`` absolute.

        Relative keys get the current state of the same key added back.
        """
        normalized = np.asarray(normalized, dtype=np.float64)
        if normalized.ndim != 2 or normalized.shape[1] < self.action_dim:
            raise ValueError(f'actions: expected (H, >= {self.action_dim}), got {normalized.shape}')
        state = np.asarray(state, dtype=np.float64)
        actions = np.empty((normalized.shape[0], self.action_dim))
        for key in self.embodiment.action:
            part = self._action_bounds[key.key]
            block = denormalize(key.statistics, normalized[:, part], key.normalization)
            if key.relative:
                block = block + state[self._state_bounds[key.key]][None, :]
            actions[:, part] = block
        return actions.astype(np.float32)
