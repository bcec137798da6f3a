# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Random checkpoints in the published layout, DROID statistics and observations for tests/demos.

:func:`write_random_checkpoint` writes what ``DreamZeroEngine.from_pretrained`` reads, with the
real tensor names and file layout (see :mod:`.checkpoint`), random seeded weights, plausible DROID
q01/q99 statistics and a tiny trained sentencepiece tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.torch import save_file
import torch

from dreamzero_ros.policy_types import DROID_CAMERAS, Observation

from .checkpoint import CONFIG_FILE, INDEX_FILE, METADATA_FILE, SINGLE_FILE, checkpoint_state
from .config import DTYPES, EngineConfig
from .tokenizer import train_tiny_tokenizer

__all__ = ['droid_metadata', 'random_observation', 'write_random_checkpoint']

# Franka Panda joint limits (rad), the range of DROID joint positions.
_JOINT_LOW = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
_JOINT_HIGH = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]


def _stats(q01: list[float], q99: list[float]) -> dict[str, list[float]]:
    low, high = np.asarray(q01), np.asarray(q99)
    return {
        'min': (low - 0.05).tolist(),
        'max': (high + 0.05).tolist(),
        'mean': ((low + high) / 2).tolist(),
        'std': ((high - low) / 4).tolist(),
        'q01': low.tolist(),
        'q99': high.tolist(),
    }


def droid_metadata(resolution: tuple[int, int] = (180, 320)) -> dict[str, Any]:
    """``experiment_cfg/metadata.json`` content for ``oxe_droid`` in upstream's schema.

    The values are plausible, not DROID's: joint states span 90 % of the Franka limits, joint
    actions (relative to the state) +-0.4 rad, the gripper ``[0, 1]``.
    """
    joint_low = [0.9 * v for v in _JOINT_LOW]
    joint_high = [0.9 * v for v in _JOINT_HIGH]
    height, width = resolution

    def modality(shape: int) -> dict[str, Any]:
        return {'absolute': True, 'rotation_type': None, 'shape': [shape], 'continuous': True}

    return {
        'oxe_droid': {
            'statistics': {
                'state': {
                    'joint_position': _stats(joint_low, joint_high),
                    'gripper_position': _stats([0.0], [1.0]),
                    'cartesian_position': _stats([-1.0] * 6, [1.0] * 6),
                },
                'action': {
                    'joint_position': _stats([-0.4] * 7, [0.4] * 7),
                    'gripper_position': _stats([0.0], [1.0]),
                    'cartesian_position': _stats([-1.0] * 6, [1.0] * 6),
                },
            },
            'modalities': {
                'video': {
                    name: {'resolution': [width, height], 'channels': 3, 'fps': 15.0}
                    for name in DROID_CAMERAS
                },
                'state': {
                    'cartesian_position': modality(6),
                    'gripper_position': modality(1),
                    'joint_position': modality(7),
                },
                'action': {
                    'cartesian_position': modality(6),
                    'gripper_position': modality(1),
                    'joint_position': modality(7),
                },
            },
            'embodiment_tag': 'oxe_droid',
        }
    }


def write_random_checkpoint(
    folder: str | Path,
    preset: str | EngineConfig = 'tiny',
    seed: int = 0,
    num_shards: int = 2,
    dtype: str = 'bfloat16',
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

    """
    from .pipeline import build_modules

    config = preset if isinstance(preset, EngineConfig) else EngineConfig.preset(preset)
    config = config.replace(device='cpu', dtype=dtype)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    modules = build_modules(config, seed)
    tensors = {
        key: tensor.detach().to(DTYPES[dtype]).contiguous()
        for key, tensor in checkpoint_state(modules.as_dict()).items()
    }
    _write_tensors(folder, tensors, num_shards)
    (folder / CONFIG_FILE).write_text(json.dumps(config.to_json_dict(), indent=2) + '\n')
    metadata = folder / METADATA_FILE
    metadata.parent.mkdir(parents=True, exist_ok=True)
    metadata.write_text(json.dumps(droid_metadata(config.view.source_size), indent=2) + '\n')
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


def random_observation(
    seed: int = 0,
    prompt: str = 'pick up the red cup and put it in the sink',
    session_id: str = 'default',
    size: tuple[int, int] = (180, 320),
    frames: int | None = None,
    stamp: float = 0.0,
) -> Observation:
    """A DROID observation with smooth random images and a joint state inside the limits."""
    rng = np.random.default_rng(seed)
    height, width = size
    shape = (height, width, 3) if frames is None else (frames, height, width, 3)
    rows = np.linspace(0, 1, height)[:, None, None]
    cols = np.linspace(0, 1, width)[None, :, None]
    images = {}
    for name in DROID_CAMERAS:
        base = 255 * (
            0.5 + 0.5 * np.sin(6 * rows * rng.uniform(0.5, 2) + 4 * cols + rng.uniform(0, 6, 3))
        )
        noise = rng.normal(0, 8, shape)
        images[name] = np.clip(np.broadcast_to(base, (height, width, 3)) + noise, 0, 255).astype(
            np.uint8
        )
    low, high = np.asarray(_JOINT_LOW), np.asarray(_JOINT_HIGH)
    joints = low + (high - low) * rng.uniform(0.3, 0.7, 7)
    return Observation(
        images=images,
        joint_position=joints,
        gripper_position=np.array([rng.uniform(0, 1)]),
        prompt=prompt,
        stamp=stamp,
        session_id=session_id,
    )
