# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Loading the engine's weights from a checkpoint folder, strictly.

:func:`load_checkpoint` fills every tensor of the engine's modules from

* the checkpoint's safetensors, under the engine's names (PEFT's renaming undone) and with its
  LoRA adapters merged (:mod:`.lora`; rank and alpha from its ``config.json``);
* for a LoRA-only checkpoint, the base checkpoint it was trained on (``base``), whose tensors
  the checkpoint's own replace;
* for an encoder neither holds any tensor of, the Wan2.1 file its ``config.json`` names,
  found in ``encoder_dir`` or the checkpoint folder (:mod:`.encoder_files`).

Strict: a tensor the engine does not know, a tensor it needs that is absent, a shape mismatch,
a tensor stored in an incompatible dtype (integer or boolean where the model holds floating
point; floating dtypes are cast) or a base that does not fit the adapters is a
:class:`CheckpointError` naming the tensor and where it was read.  Tensors are copied one at a
time from memory-mapped shards into modules that already live on the target device in the target
dtype, so a checkpoint never needs more memory than the model (and one merged tensor).  A
tensor-parallel shard of the DiT (:func:`.tensor_parallel.shard_dit_`) takes its part of each
tensor it cut, and the weights of FP8 layers (:class:`~.fp8.Fp8Linear`) are quantized one at a
time as they arrive (a shard's part, with its own scales): such a DiT never holds the other
ranks' weights nor its model-dtype block weights.

Tensors are copied file by file (a shard, the base's shards, an encoder file), and each file
read is logged at INFO on this module's logger (``loaded weights: file 2/5 <name>, <bytes> in
<seconds>``), the total first: a 14-billion-parameter checkpoint takes tens of seconds, and the
tools and the node print these lines (:func:`dreamzero_ros.log_forwarding.forwarded_logs`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
import contextlib
import logging
from pathlib import Path
import time
from typing import Protocol

import torch
from torch import nn

from dreamzero_ros.engine.checkpoint.data_files import read_json_object
from dreamzero_ros.engine.checkpoint.encoder_files import (
    ENCODERS,
    EncoderFile,
    resolve_encoder_file,
)
from dreamzero_ros.engine.checkpoint.layout import (
    COMPONENT_PREFIXES,
    CONFIG_FILE,
    IGNORED_PREFIXES,
    checkpoint_state,
)
from dreamzero_ros.engine.checkpoint.lora import CheckpointTensors, LoraSettings, MergedWeights
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.fp8 import Fp8Linear
from dreamzero_ros.engine.parallel.tensor_parallel import ShardPart
from dreamzero_ros.errors import CheckpointError

__all__ = ['WeightSource', 'load_checkpoint', 'load_weights', 'open_checkpoint']

logger = logging.getLogger(__name__)


class WeightSource(Protocol):
    """Tensors by checkpoint name: what :func:`load_weights` copies from."""

    @property
    def names(self) -> set[str]:
        """Every tensor name the source provides."""
        ...

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of tensor ``name``, without reading it."""
        ...

    def read(self, name: str) -> torch.Tensor:
        """Tensor ``name`` on the CPU."""
        ...

    def where(self, name: str) -> str:
        """Where ``name`` is read from, for messages."""
        ...

    def file(self, name: str) -> str:
        """The file ``name`` is read from (a shard, an encoder file), for progress."""
        ...


class _Sources:
    """Several sources as one: each name from the first source that has it."""

    def __init__(self, sources: Sequence[WeightSource]) -> None:
        self._owner: dict[str, WeightSource] = {}
        for source in reversed(sources):
            self._owner.update(dict.fromkeys(source.names, source))

    @property
    def names(self) -> set[str]:
        return set(self._owner)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._owner[name].shape(name)

    def read(self, name: str) -> torch.Tensor:
        return self._owner[name].read(name)

    def where(self, name: str) -> str:
        return self._owner[name].where(name)

    def file(self, name: str) -> str:
        return self._owner[name].file(name)


def _config_json(folder: Path) -> Mapping:
    missing = f'{folder} has no {CONFIG_FILE}'
    return read_json_object(folder / CONFIG_FILE, CheckpointError, missing)


@contextlib.contextmanager
def open_checkpoint(
    folder: str | Path,
    *,
    base: str | Path | None = None,
    encoder_dir: str | Path | None = None,
    components: Sequence[str] = tuple(COMPONENT_PREFIXES),
) -> Iterator[WeightSource]:
    """The tensors of a checkpoint (see the module docstring), open while in the block.

    ``components`` are the engine modules to be loaded: an encoder among them that has no
    tensor in the checkpoint (or its base) is read from its Wan2.1 file.
    """
    folder = Path(folder)
    config = _config_json(folder)
    checkpoint = CheckpointTensors(folder, LoraSettings.from_config(config))
    with contextlib.ExitStack() as stack:
        stack.callback(checkpoint.close)
        base_tensors = None
        if base is not None:
            base = Path(base)
            settings = LoraSettings.from_config(_config_json(base))
            base_tensors = CheckpointTensors(base, settings, f' of the base {base}')
            stack.callback(base_tensors.close)
        merged = MergedWeights(checkpoint, base_tensors)
        sources: list[WeightSource] = [merged]
        held = merged.names
        folders = [Path(p) for p in (encoder_dir, folder, base) if p is not None]
        for component in components:
            prefix = COMPONENT_PREFIXES[component]
            if component in ENCODERS and not any(name.startswith(prefix) for name in held):
                path = resolve_encoder_file(config, component, folders)
                sources.append(EncoderFile(path, component))
        yield _Sources(sources)


def load_weights(source: WeightSource, modules: Mapping[str, nn.Module]) -> None:
    """Load every tensor of ``modules`` from ``source``, strictly.

    Each tensor is cast to the dtype and moved to the device of the module tensor it fills.
    """
    targets = checkpoint_state(modules)
    names = source.names
    unexpected = sorted(
        name for name in names if name not in targets and not name.startswith(IGNORED_PREFIXES)
    )
    if unexpected:
        raise CheckpointError(
            f'{len(unexpected)} unexpected tensor(s) in the checkpoint, e.g. '
            f'{source.where(unexpected[0])}: {unexpected[:8]}'
        )
    missing = sorted(name for name in targets if name not in names)
    if missing:
        raise CheckpointError(
            f'{len(missing)} tensor(s) missing from the checkpoint, e.g. {missing[0]!r}: '
            f'{missing[:8]}'
        )
    fp8_layers = {
        id(layer.weight): layer
        for module in modules.values()
        for layer in module.modules()
        if isinstance(layer, Fp8Linear)
    }
    parts = _shard_parts(modules)
    by_file: dict[str, list[str]] = {}
    for name in targets:
        by_file.setdefault(source.file(name), []).append(name)
    total = sum(target.numel() * target.element_size() for target in targets.values())
    logger.info('loading weights: %s from %d file(s)', _size_text(total), len(by_file))
    with torch.no_grad():
        for index, (file, names) in enumerate(sorted(by_file.items()), start=1):
            started = time.monotonic()
            size = 0
            for name in names:
                target = targets[name]
                _copy_tensor(source, name, target, fp8_layers.get(id(target)), parts.get(name))
                size += target.numel() * target.element_size()
            logger.info(
                'loaded weights: file %d/%d %s, %s in %.1f s',
                index,
                len(by_file),
                file,
                _size_text(size),
                time.monotonic() - started,
            )


def _shard_parts(modules: Mapping[str, nn.Module]) -> dict[str, ShardPart]:
    """Checkpoint name -> the part a tensor-parallel DiT among ``modules`` holds of it."""
    dit = modules.get('dit')
    shard = dit.tensor_parallel if isinstance(dit, CausalWanDiT) else None
    if shard is None:
        return {}
    prefix = COMPONENT_PREFIXES['dit']
    return {prefix + key: part for key, part in shard.parts.items()}


def load_checkpoint(
    folder: str | Path,
    modules: Mapping[str, nn.Module],
    *,
    base: str | Path | None = None,
    encoder_dir: str | Path | None = None,
) -> None:
    """:func:`load_weights` of :func:`open_checkpoint`."""
    with open_checkpoint(folder, base=base, encoder_dir=encoder_dir, components=list(modules)) as s:
        load_weights(s, modules)


def _copy_tensor(
    source: WeightSource,
    name: str,
    target: torch.Tensor,
    fp8_layer: Fp8Linear | None = None,
    part: ShardPart | None = None,
) -> None:
    """Copy one tensor into ``target`` after checking its shape and dtype.

    A floating-point tensor may be stored in any floating dtype (it is cast) and must hold
    finite values only (a NaN or infinity is refused, naming the tensor: it would otherwise
    surface as non-finite actions at the first inference; the check costs about what the copy
    does, ``benchmarks/finite_weights.py``); any other tensor must be stored in exactly the dtype
    of ``target``.  A shard's ``part`` of the tensor is cut from it first; the weight of an FP8
    layer (``fp8_layer``) is quantized into it.
    """
    shape = source.shape(name)
    expected = part.full_shape if part is not None else tuple(target.shape)
    if shape != expected:
        raise CheckpointError(
            f'tensor {source.where(name)} has shape {shape}, the model expects {expected}'
        )
    tensor = source.read(name)
    if target.dtype.is_floating_point:
        compatible = tensor.dtype.is_floating_point
    else:
        compatible = tensor.dtype == target.dtype
    if not compatible:
        kind = 'a floating-point dtype' if target.dtype.is_floating_point else 'exactly'
        raise CheckpointError(
            f'tensor {source.where(name)} is stored as {_dtype_name(tensor.dtype)}, the model '
            f'expects {kind} {_dtype_name(target.dtype)}'
        )
    if part is not None:
        tensor = part.take(tensor)
    if tensor.dtype.is_floating_point and not all_finite(tensor):
        raise CheckpointError(f'tensor {source.where(name)} holds non-finite values (NaN or inf)')
    if fp8_layer is not None:
        fp8_layer.load_(tensor)
    else:
        target.data.copy_(tensor)


def all_finite(tensor: torch.Tensor) -> bool:
    """Whether a floating-point tensor holds no NaN or infinity.

    Fast path: its sum (a NaN or infinity makes it non-finite; a finite sum proves there is
    none), about the cost of a copy; only a non-finite sum (a real one, or an overflow of the
    sum) pays for the element-wise check, about 40 times slower on the CPU for bfloat16
    (``benchmarks/finite_weights.py``). float8 e4m3fn has no infinities and no CPU ``isfinite``:
    its NaN is every exponent and mantissa bit set.
    """
    if tensor.dtype == torch.float8_e4m3fn:
        return not bool(((tensor.view(torch.uint8) & 0x7F) == 0x7F).any())
    if bool(torch.isfinite(tensor.sum())):
        return True
    return bool(torch.isfinite(tensor).all())


def _size_text(size: int) -> str:
    """Bytes as ``12.3 GB`` / ``45.6 MB`` / ``789 kB``."""
    for unit, scale in (('GB', 1e9), ('MB', 1e6)):
        if size >= scale:
            return f'{size / scale:.1f} {unit}'
    return f'{size / 1e3:.0f} kB'


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix('torch.')
