# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The published checkpoint layout: files, tensor names, shards.

A checkpoint folder (``GEAR-Dreams/DreamZero-DROID`` layout)::

    config.json                        upstream VLAConfig (see :mod:`.config`)
    model.safetensors.index.json       {"metadata": {...}, "weight_map": {tensor: shard file}}
    model-00001-of-0000N.safetensors   the shards (or one model.safetensors and no index)
    experiment_cfg/metadata.json       per-embodiment q01/q99 statistics
    tokenizer/spiece.model             the umT5 sentencepiece model

Tensor names are those of upstream's ``VLA`` module; each prefix goes to one engine module:

    ``action_head.model.*``          -> the causal DiT
    ``action_head.text_encoder.*``   -> the umT5 encoder
    ``action_head.image_encoder.*``  -> the CLIP image encoder
    ``action_head.vae.*``            -> the Wan VAE

Ignored on purpose (inference never reads them): ``action_head.image_encoder.model.textual.*``,
the text tower of the open-CLIP model that upstream keeps inside its image encoder, and
``backbone.*`` (upstream's IdentityBackbone has no weights; nothing is expected there).
A shard listed in the index that is missing or unreadable, an index that disagrees with its
shards, or a JSON file of the folder that cannot be parsed is a :class:`CheckpointError`
(:class:`ConfigError` for ``config.json``, :class:`MetadataError` for ``metadata.json``) naming
the shard or the file.  :mod:`.weights` loads the tensors, strictly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
import contextlib
from pathlib import Path

from safetensors import SafetensorError, safe_open
import torch
from torch import nn

from dreamzero_ros.engine.checkpoint.data_files import read_json
from dreamzero_ros.errors import CheckpointError

__all__ = [
    'COMPONENT_PREFIXES',
    'CONFIG_FILE',
    'IGNORED_PREFIXES',
    'INDEX_FILE',
    'METADATA_FILE',
    'SINGLE_FILE',
    'checkpoint_state',
    'open_shard',
    'read_weight_map',
    'verify_shards',
]

CONFIG_FILE = 'config.json'
INDEX_FILE = 'model.safetensors.index.json'
SINGLE_FILE = 'model.safetensors'
METADATA_FILE = str(Path('experiment_cfg') / 'metadata.json')

#: Engine module name -> prefix of its tensors in the checkpoint.
COMPONENT_PREFIXES: dict[str, str] = {
    'dit': 'action_head.model.',
    'text_encoder': 'action_head.text_encoder.',
    'image_encoder': 'action_head.image_encoder.',
    'vae': 'action_head.vae.',
}

#: Checkpoint tensors that inference does not use (see the module docstring).
IGNORED_PREFIXES: tuple[str, ...] = ('action_head.image_encoder.model.textual.', 'backbone.')


def read_weight_map(folder: str | Path) -> dict[str, str]:
    """Tensor name -> shard file name, from the index (or the single ``model.safetensors``)."""
    folder = Path(folder)
    index = folder / INDEX_FILE
    if index.is_file():
        content = read_json(index, CheckpointError)
        if not isinstance(content, dict) or 'weight_map' not in content:
            raise CheckpointError(f'{index} is not a safetensors index: no "weight_map"')
        weight_map = content['weight_map']
        if not isinstance(weight_map, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
        ):
            raise CheckpointError(f'{index}: weight_map must map tensor names to file names')
        for shard in sorted(set(weight_map.values())):
            if Path(shard).name != shard:
                raise CheckpointError(f'{index}: shard {shard!r} must be a file in the folder')
            if not (folder / shard).is_file():
                raise CheckpointError(f'shard {shard} listed in {INDEX_FILE} is missing')
        return weight_map
    single = folder / SINGLE_FILE
    if single.is_file():
        with open_shard(single) as handle:
            return dict.fromkeys(handle.keys(), SINGLE_FILE)
    raise CheckpointError(f'{folder} has neither {INDEX_FILE} nor {SINGLE_FILE}')


@contextlib.contextmanager
def open_shard(path: Path) -> Iterator:
    """``safe_open`` a shard on the CPU, turning a corrupt file into :class:`CheckpointError`."""
    try:
        handle = safe_open(str(path), framework='pt', device='cpu')
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f'shard {path.name} is unreadable: {error}') from error
    with handle:
        yield handle


def checkpoint_state(modules: Mapping[str, nn.Module]) -> dict[str, torch.Tensor]:
    """Checkpoint tensor name -> the engine tensor it loads into (parameters and buffers)."""
    unknown = set(modules) - set(COMPONENT_PREFIXES)
    if unknown:
        raise ValueError(f'no checkpoint prefix for modules {sorted(unknown)}')
    return {
        COMPONENT_PREFIXES[name] + key: tensor
        for name, module in modules.items()
        for key, tensor in module.state_dict(keep_vars=True).items()
    }


def verify_shards(folder: str | Path, weight_map: Mapping[str, str]) -> None:
    """Check that every shard holds exactly the tensors the index places there."""
    by_shard: dict[str, set[str]] = {}
    for key, shard in weight_map.items():
        by_shard.setdefault(shard, set()).add(key)
    for shard, keys in sorted(by_shard.items()):
        with open_shard(Path(folder) / shard) as handle:
            present = set(handle.keys())
        absent = sorted(keys - present)
        if absent:
            raise CheckpointError(
                f'shard {shard} lacks tensor {absent[0]!r} that the index places there'
            )
        extra = sorted(present - keys)
        if extra:
            raise CheckpointError(
                f'shard {shard} holds tensor {extra[0]!r} that the index does not list'
            )
