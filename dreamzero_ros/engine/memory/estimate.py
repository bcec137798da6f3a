# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What an engine configuration needs of its device's memory, and refusing one that cannot fit.

:func:`estimate_memory` adds up, in bytes on the device of one rank -- the process that runs
the engine (rank 0 of a multi-process one, which also runs the encoders):

* the weights of each network where the configuration keeps it and in its dtype (counted on a
  ``meta`` build of the same modules: FP8 block linears at one byte per value, umT5 nothing
  when it lives on the host, a streamed encoder its largest part); under tensor parallel the
  DiT is the rank's shard (``1 / tp_size`` of the block weights, which is all a rank ever
  holds: it loads its part of each tensor), under CFG parallel a whole copy;
* per session, the DiT's self-attention K/V cache (model dtype, or FP8 with its scales and the
  working buffer of one layer; the rank's heads) and the projected cross-attention keys and
  values, for the CFG rows this process computes;
* an allowance for activations: the larger of one DiT call's (fused q/k/v in float32, the FFN
  hidden layer) and the VAE encoder's at full resolution, plus a fixed margin for the
  allocator and library workspaces, calibrated on the H200 measurements of
  ``benchmarks/memory_benchmark.py`` (docs/performance.md).

:func:`check_memory` raises :class:`~dreamzero_ros.errors.DeviceMemoryError` naming the need,
its parts and the device's free memory when the estimate exceeds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.errors import DeviceMemoryError

__all__ = [
    'MemoryEstimate',
    'check_memory',
    'device_budget',
    'estimate_memory',
    'session_memory',
]

GIB = 2**30
#: Allocator rounding and fragmentation, cuBLAS/cuDNN workspaces, small tensors.
ACTIVATION_MARGIN = GIB
#: Full-resolution activations the VAE encoder keeps alive at once, in units of one
#: ``dim``-channel tensor of the frames of one causal pass (4 new + 2 cached frames).
_VAE_LIVE_TENSORS = 8
_VAE_PASS_FRAMES = 6


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes an engine needs on its device.

    Attributes:
        weights: device bytes of each network's weights.
        kv_cache: one session's self-attention K/V cache.
        context: one session's projected cross-attention keys and values.
        activations: the allowance for activations and workspaces.
        sessions: sessions counted.

    """

    weights: dict[str, int] = field(default_factory=dict)
    kv_cache: int = 0
    context: int = 0
    activations: int = 0
    sessions: int = 1

    @property
    def total(self) -> int:
        """Everything, bytes."""
        per_session = self.kv_cache + self.context
        return sum(self.weights.values()) + self.sessions * per_session + self.activations

    def describe(self) -> str:
        """One line: the total and its parts, GiB."""
        parts = ', '.join(f'{name} {size / GIB:.1f}' for name, size in self.weights.items())
        return (
            f'{self.total / GIB:.1f} GiB (weights: {parts}; K/V cache {self.kv_cache / GIB:.1f} '
            f'and cross-attention context {self.context / GIB:.1f} per session x '
            f'{self.sessions}; activations {self.activations / GIB:.1f})'
        )


def _bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


def estimate_memory(
    config: EngineConfig, cfg_rows: int | None = None, tp_size: int = 1, sessions: int = 1
) -> MemoryEstimate:
    """Device bytes of ``config`` (see the module docstring).

    Args:
        config: the engine configuration (its memory and ``fp8_linear`` options).
        cfg_rows: CFG rows computed in this process: 2 with both branches batched (the default
            when ``cfg_scale`` is not 1), 1 under CFG parallel or without CFG.
        tp_size: tensor-parallel ranks the DiT is split over (the estimate is one rank's).
        sessions: sessions held at once.

    """
    from dreamzero_ros.engine.memory.placement import build_modules

    if cfg_rows is None:
        cfg_rows = config.sampling.cfg_rows
    modules = build_modules(config.on('meta'), tp_size=tp_size)
    text = modules.text_encoder
    weights = {'dit': _bytes(modules.dit)}
    placement = config.options.text_encoder
    if placement == 'device':
        weights['text_encoder'] = _bytes(text)
    elif placement == 'offload':
        weights['text_encoder'] = max(_bytes(block) for block in text.blocks)
    if config.options.image_encoder == 'offload':
        visual = modules.image_encoder.model.visual
        blocks = sum(_bytes(block) for block in visual.transformer)
        largest = max(_bytes(block) for block in visual.transformer)
        weights['image_encoder'] = _bytes(visual) - blocks + largest
    else:
        weights['image_encoder'] = _bytes(modules.image_encoder)
    weights['vae'] = _bytes(modules.vae)

    kv_cache, context = session_memory(config, cfg_rows, tp_size)
    c = config.dit
    itemsize = config.torch_dtype.itemsize
    tokens = c.num_frame_per_block * c.frame_seqlen + c.register_tokens
    dit_call = cfg_rows * tokens * (12 * c.dim + 2 * c.ffn_dim // tp_size) * itemsize
    pixels = c.frame_seqlen * (8 * c.patch_size[1]) * (8 * c.patch_size[2])
    vae = _VAE_LIVE_TENSORS * config.vae.dim * _VAE_PASS_FRAMES * pixels * itemsize
    activations = max(dit_call, vae) + ACTIVATION_MARGIN
    return MemoryEstimate(weights, kv_cache, context, activations, sessions)


def session_memory(config: EngineConfig, cfg_rows: int, tp_size: int = 1) -> tuple[int, int]:
    """``(kv_cache, context)``: device bytes of one session's caches (:func:`estimate_memory`)."""
    c = config.dit
    itemsize = config.torch_dtype.itemsize
    heads = c.num_heads // tp_size
    capacity = c.max_attention_tokens + c.register_tokens + 1  # as KVCache allocates
    values = cfg_rows * c.num_layers * capacity * heads * c.head_dim
    if config.options.kv_cache == 'fp8':
        work = cfg_rows * capacity * heads * c.head_dim * itemsize
        kv_cache = 2 * (values + values // c.head_dim * itemsize + work)
    else:
        kv_cache = 2 * values * itemsize
    context_tokens = c.text_len + config.clip.num_tokens
    context = 2 * cfg_rows * c.num_layers * context_tokens * heads * c.head_dim * itemsize
    return kv_cache, context


def device_budget(device: torch.device | str) -> int | None:
    """Free bytes of a CUDA ``device`` now; None for other devices (not checked)."""
    device = torch.device(device)
    if device.type != 'cuda':
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return int(free)


def check_memory(estimate: MemoryEstimate, budget: int | None, device: str) -> None:
    """Raise :class:`DeviceMemoryError` when ``estimate`` exceeds ``budget`` bytes (None: pass)."""
    if budget is None or estimate.total <= budget:
        return
    raise DeviceMemoryError(
        f'this engine configuration needs about {estimate.describe()}, but {device} has '
        f'{budget / GIB:.1f} GiB free: use fp8_linear (FP8 block weights), '
        'text_encoder: cpu or offload, kv_cache: fp8, or more GPUs (CFG / tensor parallel); '
        'docs/performance.md gives the recipe of each GPU memory class'
    )
