# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The four networks of the engine, built where they run, allocating only what is kept."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.memory.offload import host_lookup_, stream_parts_
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.image_encoder import CLIPImageEncoder
from dreamzero_ros.engine.networks.init import randomize_, skip_init
from dreamzero_ros.engine.networks.text_encoder import UMT5Encoder
from dreamzero_ros.engine.networks.vae import WanVAE
from dreamzero_ros.engine.parallel.tensor_parallel import shard_dit_
from dreamzero_ros.engine.speed.acceleration import quantize_dit_

__all__ = ['EngineModules', 'build_dit', 'build_modules']


@dataclass
class EngineModules:
    """The four networks of the engine."""

    dit: CausalWanDiT
    text_encoder: UMT5Encoder
    image_encoder: CLIPImageEncoder
    vae: WanVAE

    def as_dict(self) -> dict[str, nn.Module]:
        """Name -> module, with the names of :data:`.layout.COMPONENT_PREFIXES`."""
        return {
            'dit': self.dit,
            'text_encoder': self.text_encoder,
            'image_encoder': self.image_encoder,
            'vae': self.vae,
        }


def build_modules(
    config: EngineConfig, seed: int | None = None, tp_rank: int = 0, tp_size: int = 1
) -> EngineModules:
    """Construct the networks in ``config.dtype``, in inference mode, where they will run.

    Parameters are allocated once, in their final dtype and place, without running
    initialisers; with ``seed`` they are filled with seeded random values, otherwise they await a
    checkpoint.  These change what is allocated:

    * ``tp_size`` > 1: the DiT is only its tensor-parallel shard ``tp_rank`` (:func:`build_dit`);
    * ``options.fp8_linear``: the DiT's block linears are :class:`~.fp8.Fp8Linear`; the
      model-dtype block weights never exist (a checkpoint is quantized tensor by tensor as it
      loads, :mod:`.weights`);
    * ``options.text_encoder`` / ``options.image_encoder`` other than ``device``: the encoder is
      kept on the host (with ``offload`` streamed to the device block by block,
      :mod:`.offload`).  With ``seed`` it is randomised on ``config.device`` first -- the same
      weights as a build that keeps it there -- before the DiT is allocated, then moved.
    """
    device = torch.device(config.device)
    dtype = config.torch_dtype
    options = config.options
    text_encoder = _build_encoder(UMT5Encoder, config.umt5, config, seed, 1)
    if options.text_encoder == 'offload' and device.type != 'meta':
        parts = [*text_encoder.blocks, text_encoder.norm]
        if text_encoder.pos_embedding is not None:
            parts.append(text_encoder.pos_embedding)
        stream_parts_(text_encoder, parts, device)
        host_lookup_(text_encoder.token_embedding, device)
    image_encoder = _build_encoder(CLIPImageEncoder, config.clip, config, seed, 2)
    if options.image_encoder == 'offload' and device.type != 'meta':
        visual = image_encoder.model.visual
        stream_parts_(image_encoder, [visual, *visual.transformer], device)
    dit = build_dit(config, seed, tp_rank, tp_size)
    with skip_init(device, dtype):
        vae = WanVAE(config.vae)
    _prepare(vae, seed, 3)
    return EngineModules(dit, text_encoder, image_encoder, vae)


def build_dit(
    config: EngineConfig, seed: int | None = None, tp_rank: int = 0, tp_size: int = 1
) -> CausalWanDiT:
    """The DiT on ``config.device``, in inference mode: whole, or its tensor-parallel shard.

    With ``tp_size`` > 1 or ``fp8_linear`` it is built on the ``meta`` device, cut to shard
    ``tp_rank`` of ``tp_size`` (:func:`.tensor_parallel.shard_dit_`), its block linears then made
    :class:`~.fp8.Fp8Linear` (each shard quantized on its own), and only then allocated: neither
    the other ranks' weights nor the model-dtype block weights ever exist.  With ``seed`` it is
    filled with seeded random values (a shard with its part of the whole model's draw),
    otherwise it awaits a checkpoint.
    """
    fp8 = config.options.fp8_linear
    lazy = fp8 != 'off' or tp_size > 1
    with skip_init('meta' if lazy else config.device, config.torch_dtype):
        dit = CausalWanDiT(config.dit)
    if tp_size > 1:
        shard_dit_(dit, tp_rank, tp_size)
    if fp8 != 'off':
        quantize_dit_(dit, fp8)
    if lazy:
        dit.to_empty(device=config.device)
    dit.eval().requires_grad_(False)
    if seed is not None:
        shard = dit.tensor_parallel
        randomize_(dit, seed, shard.parts if shard is not None else None)
    return dit


def _build_encoder(
    kind: type[nn.Module], shape: object, config: EngineConfig, seed: int | None, offset: int
) -> nn.Module:
    """An encoder on ``config.device``, or on the host where ``config.options`` put it.

    A seeded host encoder is randomised on ``config.device`` first (the same weights as one
    kept there), before the other networks are allocated, then moved.
    """
    device = torch.device(config.device)
    placement = getattr(config.options, 'text_encoder' if kind is UMT5Encoder else 'image_encoder')
    host = device if device.type == 'meta' or placement == 'device' else torch.device('cpu')
    with skip_init(device if seed is not None else host, config.torch_dtype):
        encoder = kind(shape)
    _prepare(encoder, seed, offset)
    return encoder.to(host)


def _prepare(module: nn.Module, seed: int | None, offset: int) -> None:
    """Inference mode; seeded random values with ``seed`` (``seed + offset`` per network)."""
    module.eval().requires_grad_(False)
    if seed is not None:
        randomize_(module, seed + offset)
