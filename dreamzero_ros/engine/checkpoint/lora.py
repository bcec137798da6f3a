# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Checkpoint tensors under the engine's names, with LoRA adapters merged as they load.

Upstream fine-tunes DreamZero with PEFT LoRA (``get_peft_model`` around the DiT; rank and alpha
in ``config.json``'s ``action_head_cfg.config``; targets ``q, k, v, o, ffn.0, ffn.2`` of the
self- and cross-attention).  Wrapping renames the DiT's tensors::

    action_head.model.blocks.3.self_attn.q.weight                        (plain)
    action_head.model.base_model.model.blocks.3.self_attn.q.base_layer.weight
    action_head.model.base_model.model.blocks.3.self_attn.q.lora_A.default.weight   (r, in)
    action_head.model.base_model.model.blocks.3.self_attn.q.lora_B.default.weight   (out, r)

A full save of a wrapped model holds all three kinds; ``save_lora_only`` keeps only the trained
tensors: the ``lora_A`` / ``lora_B`` pairs and the state/action projections, no base weights.

:class:`CheckpointTensors` indexes one folder under the plain names and collects its adapter
pairs; :class:`MergedWeights` reads tensors from a checkpoint, and from the base checkpoint a
LoRA-only one needs, with every adapter merged (``W + alpha / rank * B @ A``, in float32).  A base
that lacks a tensor an adapter targets, or holds it with another shape, is refused naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
import contextlib
from dataclasses import dataclass
import math
from pathlib import Path
import re
from typing import Any

from safetensors import SafetensorError
import torch

from dreamzero_ros.engine.checkpoint.layout import open_shard, read_weight_map, verify_shards
from dreamzero_ros.errors import CheckpointError

__all__ = ['CheckpointTensors', 'LoraSettings', 'MergedWeights', 'canonical_name']

_DIT = 'action_head.model.'
_PEFT_DIT = 'action_head.model.base_model.model.'
_ADAPTER = re.compile(r'^(?P<module>.+)\.lora_(?P<part>[AB])\.(?P<name>[^.]+)\.weight$')
#: PEFT tensors this engine does not merge (DoRA, trainable embeddings, module copies); other
#: names it does not know are refused as unexpected tensors when loading.
_UNSUPPORTED_PEFT = (
    'lora_magnitude_vector',
    'lora_embedding_',
    'modules_to_save',
    'original_module',
)
#: safetensors dtype names of floating-point tensors.
_FLOATS = ('F', 'BF')


@dataclass(frozen=True)
class LoraSettings:
    """``lora_rank`` and ``lora_alpha`` of a training run; adapters are scaled by their ratio."""

    rank: int
    alpha: float

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LoraSettings | None:
        """From ``config.json`` content; None when it names no LoRA training."""
        head = config.get('action_head_cfg', {}).get('config', {})
        if not isinstance(head, Mapping) or head.get('train_architecture') != 'lora':
            return None
        rank, alpha = head.get('lora_rank', 4), head.get('lora_alpha', 4)
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise CheckpointError(
                f'config.json: lora_rank must be a positive integer, got {rank!r}'
            )
        if (
            isinstance(alpha, bool)
            or not isinstance(alpha, int | float)
            or not math.isfinite(alpha)
        ):
            raise CheckpointError(f'config.json: lora_alpha must be a finite number, got {alpha!r}')
        return cls(rank, float(alpha))

    @property
    def scaling(self) -> float:
        """``alpha / rank``, PEFT's scaling of ``B @ A``."""
        return self.alpha / self.rank


def canonical_name(key: str) -> str:
    """The engine's name of a checkpoint tensor, PEFT's renaming undone.

    ``base_model.model.`` and ``.base_layer.`` are removed; adapter keys keep their
    ``lora_A`` / ``lora_B`` part.
    """
    if key.startswith(_PEFT_DIT):
        key = _DIT + key.removeprefix(_PEFT_DIT)
    return key.replace('.base_layer.', '.')


@dataclass(frozen=True)
class _Stored:
    shard: str
    key: str


class CheckpointTensors:
    """The tensors of one checkpoint folder under the engine's names, and its LoRA adapters.

    Args:
        folder: checkpoint folder (safetensors shards and index, or one file).
        settings: the run's LoRA rank and alpha; needed when the folder holds adapters.
        label: added to the places named in messages (``' of the base <folder>'``).

    """

    def __init__(
        self, folder: str | Path, settings: LoraSettings | None = None, label: str = ''
    ) -> None:
        self.folder = Path(folder)
        self.settings = settings
        self.label = label
        self.tensors: dict[str, _Stored] = {}
        #: Name of the weight an adapter modifies -> its ``lora_A`` and ``lora_B`` tensors.
        self.adapters: dict[str, tuple[_Stored, _Stored]] = {}
        halves: dict[str, dict[str, _Stored]] = {}
        names: set[str] = set()
        weight_map = read_weight_map(self.folder)
        verify_shards(self.folder, weight_map)
        for key, shard in weight_map.items():
            name = canonical_name(key)
            match = _ADAPTER.match(name)
            if match:
                names.add(match['name'])
                target = match['module'] + '.weight'
                halves.setdefault(target, {})[match['part']] = _Stored(shard, key)
                continue
            if any(f'.{part}' in name for part in _UNSUPPORTED_PEFT):
                raise CheckpointError(
                    f'PEFT tensor {key!r} in {shard}{label} is not supported (DoRA, trainable '
                    'embeddings and modules_to_save are not merged here)'
                )
            if name in self.tensors:
                raise CheckpointError(
                    f'{self.folder}: tensors {self.tensors[name].key!r} and {key!r} are both '
                    f'{name!r}'
                )
            self.tensors[name] = _Stored(shard, key)
        if len(names) > 1:
            raise CheckpointError(f'{self.folder}: several LoRA adapters {sorted(names)}')
        for target, pair in sorted(halves.items()):
            if set(pair) != {'A', 'B'}:
                missing = 'lora_B' if 'A' in pair else 'lora_A'
                raise CheckpointError(f'{self.folder}: the adapter of {target!r} lacks {missing}')
            self.adapters[target] = (pair['A'], pair['B'])
        if self.adapters and settings is None:
            raise CheckpointError(
                f'{self.folder} holds LoRA adapters but its config.json names no LoRA run '
                '(train_architecture lora, lora_rank, lora_alpha)'
            )
        self._shards = contextlib.ExitStack()
        self._handles: dict[str, Any] = {}

    @property
    def adapter_only(self) -> bool:
        """Whether the folder holds adapters without the weights they modify (LoRA-only)."""
        return any(target not in self.tensors for target in self.adapters)

    def where(self, stored: _Stored) -> str:
        """``'<key>' in <shard>`` (and the label), for messages."""
        return f'{stored.key!r} in {stored.shard}{self.label}'

    def file(self, stored: _Stored) -> str:
        """The shard holding a stored tensor (and the label)."""
        return f'{stored.shard}{self.label}'

    def shape(self, stored: _Stored) -> tuple[int, ...]:
        """Shape of a stored tensor, without reading it."""
        return tuple(self._handle(stored.shard).get_slice(stored.key).get_shape())

    def is_floating(self, stored: _Stored) -> bool:
        """Whether a stored tensor has a floating-point dtype, without reading it."""
        return self._handle(stored.shard).get_slice(stored.key).get_dtype().startswith(_FLOATS)

    def read(self, stored: _Stored) -> torch.Tensor:
        """A stored tensor, on the CPU."""
        try:
            return self._handle(stored.shard).get_tensor(stored.key)
        except (SafetensorError, OSError, RuntimeError) as error:
            raise CheckpointError(f'tensor {self.where(stored)} is unreadable: {error}') from error

    def close(self) -> None:
        """Close the shards opened so far."""
        self._shards.close()
        self._handles.clear()

    def _handle(self, shard: str) -> Any:
        if shard not in self._handles:
            self._handles[shard] = self._shards.enter_context(open_shard(self.folder / shard))
        return self._handles[shard]


class MergedWeights:
    """Tensors of a checkpoint by the engine's names, LoRA adapters merged into their weights.

    A checkpoint that holds adapters only reads everything else from ``base``: the base
    checkpoint the adapters were trained on.  Tensors the checkpoint holds replace the base's
    (the state/action projections of a LoRA run); adapters of the base are merged first.

    Raises:
        CheckpointError: a LoRA-only checkpoint without a base, a base for a checkpoint that
            needs none, or a base that lacks or mis-shapes a tensor an adapter needs.

    """

    def __init__(self, checkpoint: CheckpointTensors, base: CheckpointTensors | None = None):
        if checkpoint.adapter_only and base is None:
            raise CheckpointError(
                f'{checkpoint.folder} holds LoRA adapters only ({len(checkpoint.adapters)} '
                'adapted weights, no base weights): supply the base checkpoint it was trained on'
            )
        if base is not None and not checkpoint.adapter_only:
            raise CheckpointError(
                f'{checkpoint.folder} holds full weights; a base checkpoint is only used with a '
                'LoRA-only checkpoint'
            )
        if base is not None and base.adapter_only:
            raise CheckpointError(f'the base {base.folder} is itself a LoRA-only checkpoint')
        self.checkpoint = checkpoint
        self.base = base
        self._check_fit()

    @property
    def names(self) -> set[str]:
        """Every tensor name this source provides."""
        names = set(self.checkpoint.tensors)
        if self.base is not None:
            names |= set(self.base.tensors)
        return names

    def _source(self, name: str) -> tuple[CheckpointTensors, _Stored]:
        if name in self.checkpoint.tensors:
            return self.checkpoint, self.checkpoint.tensors[name]
        if self.base is not None and name in self.base.tensors:
            return self.base, self.base.tensors[name]
        raise KeyError(name)

    def where(self, name: str) -> str:
        """Where ``name`` is read from, for messages."""
        source, stored = self._source(name)
        return source.where(stored)

    def file(self, name: str) -> str:
        """The shard ``name`` is read from (its adapters' shards are read with it)."""
        source, stored = self._source(name)
        return source.file(stored)

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of tensor ``name`` (adapters do not change it)."""
        source, stored = self._source(name)
        return source.shape(stored)

    def read(self, name: str) -> torch.Tensor:
        """Tensor ``name``: the stored one, or float32 ``W + scaling * B @ A`` where adapted."""
        source, stored = self._source(name)
        tensor = source.read(stored)
        layers = [self.checkpoint]
        if source is self.base:
            layers.insert(0, self.base)
        for layer in layers:
            if name in layer.adapters:
                tensor = tensor.float() + self._delta(layer, name)
        return tensor

    def close(self) -> None:
        """Close every shard opened."""
        self.checkpoint.close()
        if self.base is not None:
            self.base.close()

    def __enter__(self) -> MergedWeights:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _delta(layer: CheckpointTensors, name: str) -> torch.Tensor:
        """``scaling * B @ A``; an adapter tensor with a NaN or infinity is refused, named."""
        a, b = layer.adapters[name]
        factors = []
        for stored in (b, a):
            tensor = layer.read(stored).float()
            if not bool(torch.isfinite(tensor).all()):
                raise CheckpointError(
                    f'LoRA adapter {layer.where(stored)} holds non-finite values (NaN or inf)'
                )
            factors.append(tensor)
        return layer.settings.scaling * (factors[0] @ factors[1])

    def _check_fit(self) -> None:
        """Every adapter's weight exists with the shape ``B @ A`` has; replaced tensors fit."""
        layers = [self.checkpoint] if self.base is None else [self.base, self.checkpoint]
        for layer in layers:
            missing = sorted(set(layer.adapters) - self.names)
            if missing:
                base = self.base.folder if self.base is not None else layer.folder
                raise CheckpointError(
                    f'{len(missing)} weight(s) adapted by {layer.folder} are not in {base}, '
                    f'e.g. {missing[0]!r}: {missing[:4]}'
                )
            for name, (a, b) in layer.adapters.items():
                for half in (a, b):
                    if not layer.is_floating(half):
                        raise CheckpointError(
                            f'adapter tensor {layer.where(half)} is not floating point'
                        )
                a_shape, b_shape = layer.shape(a), layer.shape(b)
                weight = self.shape(name)
                rank = layer.settings.rank
                if (
                    len(a_shape) != 2
                    or len(b_shape) != 2
                    or (a_shape[0], b_shape[1]) != (rank,) * 2
                ):
                    raise CheckpointError(
                        f'adapter of {name!r} in {layer.folder}: lora_A {a_shape} and lora_B '
                        f"{b_shape} do not have the run's rank {rank}"
                    )
                if (b_shape[0], a_shape[1]) != weight:
                    raise CheckpointError(
                        f'adapter of {name!r} in {layer.folder} is {b_shape[0]}x{a_shape[1]} '
                        f'(lora_B {b_shape} @ lora_A {a_shape}), the weight {self.where(name)} '
                        f'is {weight}'
                    )
        if self.base is None:
            return
        for name, stored in self.checkpoint.tensors.items():
            if name in self.base.tensors:
                own, base = self.checkpoint.shape(stored), self.base.shape(self.base.tensors[name])
                if own != base:
                    raise CheckpointError(
                        f'tensor {name!r} is {own} in {self.checkpoint.folder} and {base} in '
                        f'the base {self.base.folder}'
                    )
