# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A checkpoint of random weights in the published layout, for the demo and random-weight serving.

:func:`write_random_checkpoint` writes what ``DreamZeroEngine.from_pretrained`` reads, with the
real tensor names and file layout (see :mod:`.checkpoint`), random seeded weights, the
``experiment_cfg/`` of an embodiment (DROID with plausible statistics,
:func:`.synthetic_droid.droid_embodiment`, unless another is given) and a tiny trained
sentencepiece tokenizer.  The weights make the actions meaningless; everything else is the real
pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import save_file
import torch

from dreamzero_ros.engine.checkpoint.experiment_cfg import write_experiment_cfg
from dreamzero_ros.engine.checkpoint.layout import (
    CONFIG_FILE,
    INDEX_FILE,
    SINGLE_FILE,
    checkpoint_state,
)
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment_for
from dreamzero_ros.engine.checkpoint.tokenizer import train_tiny_tokenizer
from dreamzero_ros.engine.checkpoint.upstream_config import config_to_json
from dreamzero_ros.engine.config import DTYPES, EngineConfig
from dreamzero_ros.engine.embodiment import Embodiment
from dreamzero_ros.engine.memory.placement import build_modules
from dreamzero_ros.engine.options import EngineOptions

__all__ = ['write_random_checkpoint']


def write_random_checkpoint(
    folder: str | Path,
    preset: str | EngineConfig = 'tiny',
    seed: int = 0,
    num_shards: int = 2,
    dtype: str = 'bfloat16',
    embodiment: Embodiment | None = None,
) -> Path:
    """Write a random-weight checkpoint in the published layout and return its folder.

    Args:
        folder: output folder (created; existing files of the layout are overwritten).
        preset: ``tiny``, ``small``, ``droid_14b`` or an :class:`EngineConfig`.
        seed: weight seed; :meth:`DreamZeroEngine.from_config` with the same seed, preset and
            dtype has the same weights.
        num_shards: ``model-0000i-of-0000N.safetensors`` shards plus an index; 0 writes a
            single ``model.safetensors`` without an index.
        dtype: dtype of the stored tensors (the published checkpoint stores ``bfloat16``).
        embodiment: the robot the checkpoint describes in its ``experiment_cfg/`` (it must fit
            the model); default: DROID at the preset's view size.

    """
    config = preset if isinstance(preset, EngineConfig) else EngineConfig.preset(preset)
    config = config.replace(options=EngineOptions(device='cpu', dtype=dtype))
    if embodiment is None:
        embodiment = droid_embodiment_for(config.dit.frame_seqlen)
    config.check_embodiment(embodiment)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    modules = build_modules(config, seed)
    tensors = {
        key: tensor.detach().to(DTYPES[dtype]).contiguous()
        for key, tensor in checkpoint_state(modules.as_dict()).items()
    }
    _write_tensors(folder, tensors, num_shards)
    (folder / CONFIG_FILE).write_text(json.dumps(config_to_json(config), indent=2) + '\n')
    write_experiment_cfg(
        folder, embodiment, action_horizon=config.action_horizon, num_frames=config.num_frames
    )
    train_tiny_tokenizer(folder)
    return folder


def _write_tensors(folder: Path, tensors: dict[str, torch.Tensor], num_shards: int) -> None:
    """Save ``tensors`` as one file or as ``num_shards`` shards of similar size plus an index."""
    for stale in [folder / SINGLE_FILE, folder / INDEX_FILE, *folder.glob('model-*.safetensors')]:
        stale.unlink(missing_ok=True)
    if num_shards == 0:
        save_file(tensors, str(folder / SINGLE_FILE), metadata={'format': 'pt'})
        return
    if num_shards < 0:
        raise ValueError(f'num_shards must be >= 0, got {num_shards}')
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    shards: list[dict[str, torch.Tensor]] = [{} for _ in range(num_shards)]
    written = 0
    for key, tensor in tensors.items():
        index = min(num_shards - 1, written * num_shards // max(total, 1))
        shards[index][key] = tensor
        written += tensor.numel() * tensor.element_size()
    weight_map = {}
    for i, shard in enumerate(shards, start=1):
        name = f'model-{i:05d}-of-{num_shards:05d}.safetensors'
        save_file(shard, str(folder / name), metadata={'format': 'pt'})
        weight_map.update(dict.fromkeys(shard, name))
    index = {'metadata': {'total_size': total}, 'weight_map': dict(sorted(weight_map.items()))}
    (folder / INDEX_FILE).write_text(json.dumps(index, indent=2) + '\n')
