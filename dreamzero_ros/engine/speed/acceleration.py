# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed applied from outside the reference model: installing the speed options.

The options are fields of :class:`~.options.EngineOptions` (the defaults are the reference
path):

* ``compile``: every DiT block is compiled as written (diffusers' repeated-blocks compilation:
  each block instance, one graph shared by all 40, attention an opaque op inside it) with the
  configuration's backend (``EngineConfig.compile_backend``, inductor); on CUDA the VAE
  encoder's norm/SiLU/time padding are compiled into one kernel per layer, its activations kept
  ``channels_last_3d``, and cuDNN picks its fastest convolutions;
* ``fp8_linear``: ``rowwise`` or ``tensorwise``: the block linears are held and run in FP8 e4m3
  instead of the model dtype (:mod:`.fp8`; 16.8 GB instead of 33 GB for the 14B DiT);
* ``attention_backend``: the attention kernel the attention op of :mod:`.attention` prefers
  (``auto``: torch's choice; ``cudnn``, ``flash``, ``efficient``, ``math``, or ``fa3``:
  FlashAttention-3);
* ``compile_cache``: where ``compile`` keeps its caches across processes (:mod:`.compile_cache`).

They are applied to a DiT from outside, as diffusers does for Wan.  With ``compile`` or
``fp8_linear`` set, :func:`prepare_blocks` transforms the blocks' modules in place
(:mod:`.block_transforms`: FP8 linears, one q/k/v product with the QK-norm/rotary/K/V-write
kernel, the FFN's GELU in its product's epilogue -- same values, same checkpoint keys, so
engines sharing the DiT compute with them too) and, with ``compile``, compiles each block;
the denoiser installs its engine's blocks (:meth:`BlockRuns.install`) before every chunk.  The
blocks' code is the reference's; ``test_engine_block_transforms.py`` holds the transformed and
compiled blocks equal to the reference ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.dit_block import DiTBlock
from dreamzero_ros.engine.networks.fp8 import Fp8Linear, quantize_linears_
from dreamzero_ros.engine.networks.kv_cache import LayerKV
from dreamzero_ros.engine.networks.vae import WanVAE
from dreamzero_ros.engine.networks.vae_network import norm_silu_conv
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.speed.vae_fused import FusedNormConv
from dreamzero_ros.errors import ConfigError

__all__ = [
    'BlockRuns',
    'VAEEncoding',
    'compile_block',
    'held_fp8_mode',
    'prepare_blocks',
    'quantize_dit_',
    'transform_blocks_',
]


def held_fp8_mode(dit: CausalWanDiT) -> str:
    """``off``, or the FP8 scaling in which ``dit``'s block linears are held."""
    linear = dit.blocks[0].ffn[0] if len(dit.blocks) else None
    return linear.mode if isinstance(linear, Fp8Linear) else 'off'


def quantize_dit_(dit: CausalWanDiT, mode: str) -> None:
    """Hold every linear of ``dit``'s blocks in FP8 ``mode`` instead of the model dtype.

    In place: each model-dtype weight is released as its FP8 layer replaces it (on the ``meta``
    device only the shapes are taken).  The other weights (embeddings, heads) stay.
    """
    from dreamzero_ros.engine.speed.block_transforms import unfuse_qkv_

    for block in dit.blocks:
        unfuse_qkv_(block.self_attn)  # drop the fused model-dtype q/k/v
        quantize_linears_(block, mode)


def _allow_recompiles(limit: int = 64) -> None:
    """Let the block keep a compiled graph per shape and variant (torch's default is 8)."""
    config = torch._dynamo.config
    name = 'recompile_limit' if hasattr(config, 'recompile_limit') else 'cache_size_limit'
    setattr(config, name, max(getattr(config, name), limit))


#: How a block is called: ``block(x, modulation, rotary, cross_kv, kv)``.
BlockCall = Callable[..., torch.Tensor]


def compile_block(block: DiTBlock, backend: str) -> BlockCall:
    """``block``'s call compiled with ``backend`` (``nn.Module.compile``'s, as a function).

    One graph per call shape serves every block (the parameters are graph inputs); attention is
    one op in it.  A layer's K/V cache window grows with the cached tokens: its length is
    marked dynamic (only the attention op and the slice of the new tokens read it), so the
    graph is not specialised to each cache length.
    """
    _allow_recompiles()
    compiled = torch.compile(block._call_impl, backend=backend, dynamic=False, fullgraph=True)

    def call(*args: object) -> torch.Tensor:
        kv = args[-1]
        if isinstance(kv, LayerKV):
            for window in (kv.k, kv.v):
                torch._dynamo.maybe_mark_dynamic(window, 1)
        return compiled(*args)

    return call


@dataclass(frozen=True)
class BlockRuns:
    """How an engine's DiT blocks run: eagerly, or each through its compiled call."""

    calls: tuple[BlockCall | None, ...]

    def install(self, dit: CausalWanDiT) -> None:
        """Let ``dit``'s blocks run this way (engines sharing a DiT install theirs per chunk)."""
        for block, call in zip(dit.blocks, self.calls, strict=True):
            block._compiled_call_impl = call


def transform_blocks_(dit: CausalWanDiT, fp8_linear: str = 'off') -> None:
    """Apply the module transforms of :mod:`.block_transforms` to ``dit``'s blocks, in place.

    FP8 linears first (``fp8_linear``: a scaling, or ``off``), then one q/k/v product with the
    QK-norm/rotary/K/V-write kernel where it runs, then the FFN's GELU epilogue.
    """
    from dreamzero_ros.engine.speed import qk_rope_kernel  # Triton: only with the transforms
    from dreamzero_ros.engine.speed.block_transforms import fuse_gelu_epilogue_, fuse_qkv_

    if fp8_linear != held_fp8_mode(dit):
        quantize_dit_(dit, fp8_linear)
    # The kernel's statistics cover only the heads it sees: unsharded DiTs only.
    qk_kernel = qk_rope_kernel.available(dit.device) and dit.tensor_parallel is None
    for block in dit.blocks:
        fuse_qkv_(block.self_attn, qk_kernel)
        fuse_gelu_epilogue_(block.ffn)


def prepare_blocks(dit: CausalWanDiT, options: EngineOptions, backend: str) -> BlockRuns:
    """Apply ``options``' transforms to ``dit``'s blocks in place; return how they run.

    With ``compile`` or ``fp8_linear`` the blocks' modules are transformed
    (:mod:`.block_transforms`; same values and checkpoint keys).  With ``fp8_linear`` a DiT that
    still holds model-dtype block linears is quantized in place (:func:`quantize_dit_`): of a
    tensor-parallel DiT, the rank's shard (the DiT is sharded before).  Engines sharing the DiT
    then compute in FP8 too, so a DiT held in FP8 refuses ``fp8_linear: off``.  With
    ``compile`` each block is compiled with ``backend`` (:func:`compile_block`).  Install the
    result with :meth:`BlockRuns.install`; the denoiser does before every chunk.
    """
    fp8 = options.fp8_linear
    held = held_fp8_mode(dit)
    if held not in (fp8, 'off'):
        raise ConfigError(
            f'the DiT holds its block linears in {held} FP8 (built or quantized for '
            f'fp8_linear: {held}); fp8_linear {fp8!r} needs another model'
        )
    if not options.compile and fp8 == 'off':
        return BlockRuns((None,) * len(dit.blocks))
    if fp8 != 'off' and dit.dtype != torch.bfloat16:
        raise ConfigError(f'fp8_linear needs a bfloat16 model, not {dit.dtype}')
    transform_blocks_(dit, fp8)
    if not options.compile:
        return BlockRuns((None,) * len(dit.blocks))
    return BlockRuns(tuple(compile_block(block, backend) for block in dit.blocks))


@dataclass(frozen=True)
class VAEEncoding:
    """How the engine runs the VAE encoder: activation layout and compiled norms (:meth:`encode`).

    With ``compile`` on CUDA the encoder's activations are ``channels_last_3d`` (the layout tensor
    cores prefer) and each norm, SiLU and time padding before a convolution is one compiled
    kernel (:class:`.vae_fused.FusedNormConv`); elsewhere the reference layers run.
    """

    channels_last: bool = False
    compile_backend: str | None = None

    @classmethod
    def for_engine(cls, options: EngineOptions, device: torch.device, backend: str) -> VAEEncoding:
        """The encoding of an engine with ``options`` on ``device``, compiling with ``backend``."""
        if not options.compile or device.type != 'cuda':
            return cls()
        return cls(channels_last=True, compile_backend=backend)

    def encode(self, vae: WanVAE, video: torch.Tensor) -> torch.Tensor:
        """:meth:`.vae.WanVAE.encode` of ``video`` run this way."""
        norm_conv = norm_silu_conv
        if self.compile_backend is not None:
            norm_conv = FusedNormConv(self.compile_backend)
        return vae.encode(video, channels_last=self.channels_last, norm_conv=norm_conv)
