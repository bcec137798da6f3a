# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed applied from outside the reference model: the options a user sets, and installing them.

:class:`AccelerationConfig` holds the options (the defaults are the reference path):

* ``compile``: ``True`` (inductor) or a ``torch.compile`` backend name: the stages of every DiT
  block between its attention calls are compiled (the repeated block, compiled once for all
  40); on CUDA the VAE encoder's norm/SiLU/time padding are compiled into one kernel per layer,
  its activations kept ``channels_last_3d``, and cuDNN picks its fastest convolutions;
* ``fp8_linear``: ``rowwise`` or ``tensorwise``: the block linears are held and run in FP8 e4m3
  instead of the model dtype (:mod:`.fp8`; 16.8 GB instead of 33 GB for the 14B DiT);
* ``attention_backend``: the attention kernel :func:`.attention.sdpa` prefers (``auto``: torch's
  choice; ``cudnn``, ``flash``, ``efficient``, ``math``, ``fa3``: FlashAttention-3, or ``fp8``:
  the engine's FP8 attention over the FP8 K/V cache, :mod:`.fp8_attention_kernel`, which needs
  ``kv_cache: fp8`` and a GPU with FP8 tensor cores: :func:`check_attention_device`);
* ``compile_cache``: where ``compile`` keeps its caches across processes (:mod:`.compile_cache`).

They are applied to a DiT from outside, as diffusers does for Wan: :func:`block_processors`
fuses the projections in place and gives every block a
:class:`.fast_blocks.FastBlockProcessor` when ``compile`` or ``fp8_linear`` is set (the
reference processor otherwise), which the denoiser installs.  The fast processor computes the
same function as the reference (``test_engine_fast_blocks.py`` holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dreamzero_ros.engine.model.attention import ATTENTION_KERNELS, flash_attention_3
from dreamzero_ros.engine.model.dit import REFERENCE_PROCESSOR, BlockProcessor, CausalWanDiT
from dreamzero_ros.engine.option_names import FP8_MODES
from dreamzero_ros.engine.speed.fp8 import Fp8Linear, quantize_linears_
from dreamzero_ros.errors import ConfigError

__all__ = [
    'AccelerationConfig',
    'VAEEncoding',
    'block_processors',
    'check_attention_device',
    'held_fp8_mode',
    'quantize_dit_',
]

_OFF = (False, None, 'off', 'none', '')


@dataclass(frozen=True)
class AccelerationConfig:
    """The speed options a user sets (see the module docstring); defaults: the reference path.

    ``compile`` is ``False``, ``True`` (inductor) or a ``torch.compile`` backend name;
    ``fp8_linear`` is ``off``, ``rowwise`` or ``tensorwise`` (``True`` means ``rowwise``);
    ``compile_cache`` is the folder of the compile cache (:mod:`.compile_cache`): ``''`` for
    ``$XDG_CACHE_HOME/dreamzero_ros/torch_compile``, ``off`` for torch's own locations.
    """

    compile: bool | str = False
    fp8_linear: str | bool = 'off'
    attention_backend: str = 'auto'
    compile_cache: str = ''

    def __post_init__(self) -> None:
        fp8 = self.fp8_linear
        if isinstance(fp8, bool):
            object.__setattr__(self, 'fp8_linear', 'rowwise' if fp8 else 'off')
        elif fp8 not in FP8_MODES:
            raise ConfigError(f'fp8_linear must be one of {FP8_MODES} or a bool, got {fp8!r}')
        if not isinstance(self.compile, bool | str) and self.compile is not None:
            raise ConfigError('compile must be a bool or a torch.compile backend name')
        if self.attention_backend not in ATTENTION_KERNELS:
            raise ConfigError(
                f'attention_backend must be one of {sorted(ATTENTION_KERNELS)}, '
                f'got {self.attention_backend!r}'
            )
        if self.attention_backend == 'fa3':
            try:  # refused here, not at the first chunk, where it is missing
                flash_attention_3()
            except RuntimeError as error:
                raise ConfigError(str(error)) from error

    @property
    def compile_backend(self) -> str | None:
        """The ``torch.compile`` backend, or None when compilation is off."""
        if self.compile in _OFF:
            return None
        return 'inductor' if self.compile is True else str(self.compile)

    @property
    def fast_blocks(self) -> bool:
        """Whether the DiT blocks compute through :class:`.fast_blocks.FastBlockProcessor`."""
        return self.compile_backend is not None or self.fp8_linear != 'off'


def check_attention_device(config: AccelerationConfig, device: str, kv_cache: str) -> None:
    """Refuse ``attention_backend: fp8`` where it cannot run (ConfigError naming why).

    It needs an FP8 K/V cache, Triton, and a device with FP8 tensor cores.
    """
    if config.attention_backend != 'fp8':
        return
    if kv_cache != 'fp8':
        raise ConfigError(
            f"attention_backend 'fp8' attends over an FP8 K/V cache: it needs kv_cache 'fp8', "
            f'not {kv_cache!r}'
        )
    from dreamzero_ros.engine.speed import fp8_attention_kernel  # Triton: only for this backend

    reason = fp8_attention_kernel.unsupported(device)
    if reason is not None:
        raise ConfigError(f"attention_backend 'fp8' {reason}")


def held_fp8_mode(dit: CausalWanDiT) -> str:
    """``off``, or the FP8 scaling in which ``dit``'s block linears are held."""
    linear = dit.blocks[0].ffn[0] if len(dit.blocks) else None
    return linear.mode if isinstance(linear, Fp8Linear) else 'off'


def quantize_dit_(dit: CausalWanDiT, mode: str) -> None:
    """Hold every linear of ``dit``'s blocks in FP8 ``mode`` instead of the model dtype.

    In place: each model-dtype weight is released as its FP8 layer replaces it (on the ``meta``
    device only the shapes are taken).  The other weights (embeddings, heads) stay.
    """
    for block in dit.blocks:
        block.self_attn.__dict__.pop('_fused_qkv', None)  # drop the fused model-dtype q/k/v
        quantize_linears_(block, mode)


def block_processors(dit: CausalWanDiT, config: AccelerationConfig) -> list[BlockProcessor]:
    """The processors of ``dit``'s blocks under ``config``: fast ones, or the reference.

    Building fast processors fuses each block's q/k/v weights in place (same values and
    checkpoint keys).  With ``fp8_linear`` a DiT that still holds model-dtype block linears is
    quantized in place (:func:`quantize_dit_`): of a tensor-parallel DiT, the rank's shard (the
    DiT is sharded before its processors are built).  Engines sharing the DiT then compute in
    FP8 too, so a DiT held in FP8 refuses ``fp8_linear: off``.  Install the processors with
    :meth:`~.dit.CausalWanDiT.set_block_processor`; the denoiser does before
    every chunk, so engines that share one DiT each compute with their own.
    """
    held = held_fp8_mode(dit)
    if held != config.fp8_linear and held != 'off':
        raise ConfigError(
            f'the DiT holds its block linears in {held} FP8 (built or quantized for '
            f'fp8_linear: {held}); fp8_linear {config.fp8_linear!r} needs another model'
        )
    if not config.fast_blocks:
        return [REFERENCE_PROCESSOR] * len(dit.blocks)
    from dreamzero_ros.engine.speed.fast_blocks import FastBlockProcessor, FastStages, stage_shard

    if config.fp8_linear != 'off' and dit.dtype != torch.bfloat16:
        raise ConfigError(f'fp8_linear needs a bfloat16 model, not {dit.dtype}')
    if config.fp8_linear != held:
        quantize_dit_(dit, config.fp8_linear)
    stages = FastStages(config.compile_backend, dit.device, stage_shard(dit))
    return [FastBlockProcessor(block, stages) for block in dit.blocks]


@dataclass(frozen=True)
class VAEEncoding:
    """How the engine runs the VAE encoder: activation layout and compiled norms.

    With ``compile`` on CUDA the encoder's activations are ``channels_last_3d`` (the layout tensor
    cores prefer) and each norm, SiLU and time padding before a convolution is one compiled
    kernel (:class:`.vae_fused.FusedNormConv`); elsewhere the reference layers run.
    """

    channels_last: bool = False
    compile_backend: str | None = None

    @classmethod
    def for_engine(cls, config: AccelerationConfig, device: torch.device) -> VAEEncoding:
        """The encoding of an engine with ``config`` on ``device``."""
        backend = config.compile_backend
        if backend is None or device.type != 'cuda':
            return cls()
        return cls(channels_last=True, compile_backend=backend)
