# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""LoRA fine-tunes of a random checkpoint, saved the ways upstream's PEFT training saves them.

From a base checkpoint (``write_random_checkpoint``) these write, in the real tensor naming:

* a LoRA-only save (``save_lora_only``): ``lora_A`` / ``lora_B`` of every target of every block
  and new state/action projections, under PEFT's ``base_model.model.`` prefix, nothing else;
* a full save of the PEFT-wrapped model: every tensor, targets as ``.base_layer.``, plus the
  adapters, unmerged;
* the merged model as a plain full checkpoint (float32, so nothing is rounded).
"""

import json
from pathlib import Path
import shutil

from safetensors import safe_open
from safetensors.torch import save_file
import torch

DIT = 'action_head.model.'
PEFT_DIT = 'action_head.model.base_model.model.'
TARGETS = ('self_attn.q', 'self_attn.k', 'self_attn.v', 'self_attn.o')
TARGETS += ('cross_attn.q', 'cross_attn.k', 'cross_attn.v', 'cross_attn.o', 'ffn.0', 'ffn.2')
PROJECTIONS = ('state_encoder.', 'action_encoder.', 'action_decoder.')


def read_tensors(folder) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder, by stored name."""
    tensors = {}
    for shard in sorted(Path(folder).glob('*.safetensors')):
        with safe_open(str(shard), framework='pt') as handle:
            tensors.update({key: handle.get_tensor(key) for key in handle.keys()})
    return tensors


def write_tensors(folder, tensors: dict[str, torch.Tensor], shards: int = 2) -> None:
    """Save ``tensors`` as ``shards`` safetensors files plus the index, replacing old ones."""
    folder = Path(folder)
    for stale in folder.glob('model*.safetensors*'):
        stale.unlink()
    names = sorted(tensors)
    weight_map = {}
    for i in range(shards):
        part = names[i::shards]
        file = f'model-{i + 1:05d}-of-{shards:05d}.safetensors'
        save_file({name: tensors[name].contiguous() for name in part}, str(folder / file))
        weight_map.update(dict.fromkeys(part, file))
    index = {'metadata': {}, 'weight_map': weight_map}
    (folder / 'model.safetensors.index.json').write_text(json.dumps(index, indent=2))


def _lora_config(config: dict, rank: int, alpha: float) -> dict:
    config = json.loads(json.dumps(config))
    head = config['action_head_cfg']['config']
    head.update(
        train_architecture='lora',
        lora_rank=rank,
        lora_alpha=alpha,
        lora_target_modules='q,k,v,o,ffn.0,ffn.2',
        init_lora_weights='kaiming',
    )
    return config


def adapted_weights(base: dict[str, torch.Tensor], layers: int) -> list[str]:
    """Names of the weights upstream's LoRA targets, in a model of ``layers`` blocks."""
    names = [f'{DIT}blocks.{i}.{target}.weight' for i in range(layers) for target in TARGETS]
    assert all(name in base for name in names)
    return names


def write_lora_checkpoints(
    base_folder, out, layers: int, rank: int = 2, alpha: float = 4.0, seed: int = 7
) -> dict[str, Path]:
    """Write ``lora_only``, ``peft_full`` and ``merged`` next to each other under ``out``.

    Returns their folders.  The adapters and new projections are seeded random values large
    enough to change the model's actions.
    """
    base_folder, out = Path(base_folder), Path(out)
    base = read_tensors(base_folder)
    generator = torch.Generator().manual_seed(seed)
    scaling = alpha / rank
    adapters, projections = {}, {}
    for name in adapted_weights(base, layers):
        out_dim, in_dim = base[name].shape
        a = torch.randn(rank, in_dim, generator=generator) / in_dim**0.5
        b = torch.randn(out_dim, rank, generator=generator) * 0.5
        adapters[name] = (a.to(torch.bfloat16), b.to(torch.bfloat16))
    for name, tensor in base.items():
        if name.startswith(tuple(DIT + p for p in PROJECTIONS)):
            noise = torch.randn(tensor.shape, generator=generator) * 0.05
            projections[name] = (tensor.float() + noise).to(torch.bfloat16)
    config = json.loads((base_folder / 'config.json').read_text())
    folders = {}
    for kind in ('lora_only', 'peft_full', 'merged'):
        folder = out / kind
        shutil.copytree(base_folder, folder, dirs_exist_ok=True)
        folders[kind] = folder
        tensors = {}
        if kind == 'merged':
            for name, tensor in base.items():
                tensor = projections.get(name, tensor).float()
                if name in adapters:
                    a, b = adapters[name]
                    tensor = tensor + scaling * (b.float() @ a.float())
                tensors[name] = tensor
        else:
            (folder / 'config.json').write_text(json.dumps(_lora_config(config, rank, alpha)))
            for name, (a, b) in adapters.items():
                module = PEFT_DIT + name.removeprefix(DIT).removesuffix('.weight')
                tensors[f'{module}.lora_A.default.weight'] = a
                tensors[f'{module}.lora_B.default.weight'] = b
            for name, tensor in projections.items():
                tensors[PEFT_DIT + name.removeprefix(DIT)] = tensor
        if kind == 'peft_full':
            for name, tensor in base.items():
                if name in projections:
                    continue
                if name.startswith(DIT):
                    module, leaf = name.removeprefix(DIT).rsplit('.', 1)
                    adapted = DIT + module + '.weight' in adapters
                    middle = '.base_layer.' if adapted else '.'
                    name = PEFT_DIT + module + middle + leaf
                tensors[name] = tensor
        write_tensors(folder, tensors)
    return folders
