# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Attention kernels of the DiT: one place that calls torch's scaled-dot-product attention.

Tensors are kept in the ``(batch, tokens, heads, head_dim)`` layout that the linear projections
produce and that flash attention consumes natively; :func:`sdpa` hands torch transposed views
(no copies), so the flash / cuDNN / memory-efficient kernels are used on the GPU and the math
kernel on the CPU.

Self-attention of a DiT call goes through a :class:`SelfAttentionBackend`: the K/V cache
(:class:`.kv_cache.KVCache`) is the one used at inference; tests plug in a
masked full-sequence backend to check the cache against the block-causal reference.

:func:`attention_kernel` picks the kernel torch uses (``auto`` leaves the choice to torch, the
reference); a named kernel is tried first and torch falls back to the others where it cannot run
a call (on the CPU only ``math`` and torch's CPU flash kernel exist).  ``fa3`` is
FlashAttention-3 (Hopper), not part of torch: the ``flash_attn_3`` package built from
Dao-AILab/flash-attention's ``hopper/`` folder; with it the unmasked bf16/fp16 CUDA calls run
in FlashAttention-3 (which takes the same ``(B, L, H, D)`` layout) and the others in torch's
kernels, cuDNN first.  ``fp8`` is the engine's own FP8 attention over an FP8 K/V cache
(:mod:`.fp8_attention_kernel`, Triton, GPUs with FP8 tensor cores): inside its context
:meth:`.kv_cache.Fp8KVCache.attend_written` calls the op ``torch.ops.dreamzero.fp8_kv_attention``
(:func:`fp8_kv_attention_active`); the other calls run in torch's kernels, cuDNN first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
from contextvars import ContextVar
import functools
import importlib
from typing import Protocol

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.option_names import ATTENTION_BACKENDS

__all__ = [
    'ATTENTION_KERNELS',
    'SelfAttentionBackend',
    'attention_kernel',
    'flash_attention_3',
    'fp8_kv_attention_active',
    'sdpa',
]

#: Kernel names of :func:`attention_kernel`: ``auto`` (torch decides) or the preferred kernel
#: (for ``fa3``: torch's kernel for the calls FlashAttention-3 does not take).
_PREFERRED = {
    'cudnn': SDPBackend.CUDNN_ATTENTION,
    'flash': SDPBackend.FLASH_ATTENTION,
    'efficient': SDPBackend.EFFICIENT_ATTENTION,
    'math': SDPBackend.MATH,
    'fa3': SDPBackend.CUDNN_ATTENTION,
    'fp8': SDPBackend.CUDNN_ATTENTION,
}
ATTENTION_KERNELS: dict[str, SDPBackend | None] = {
    name: _PREFERRED.get(name) for name in ATTENTION_BACKENDS
}
#: The FlashAttention-3 forward op while ``attention_kernel('fa3')`` is active, else None.
_FA3_FORWARD: ContextVar[Callable | None] = ContextVar('fa3_forward', default=None)
#: Whether ``attention_kernel('fp8')`` is active (the FP8 K/V cache attends in FP8).
_FP8_KV: ContextVar[bool] = ContextVar('fp8_kv_attention', default=False)
_FALLBACK_ORDER = (
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
)


@functools.cache
def flash_attention_3() -> Callable:
    """FlashAttention-3's forward op (``torch.ops.flash_attn_3.fwd``), loaded once.

    Called by every configuration check and every chunk's :func:`attention_kernel`.  Raises
    RuntimeError naming what is missing when ``flash_attn_3`` is not installed (not cached).
    """
    try:
        importlib.import_module('flash_attn_3._C')  # registers torch.ops.flash_attn_3
        return torch.ops.flash_attn_3.fwd
    except (ImportError, OSError, AttributeError, RuntimeError) as error:
        raise RuntimeError(
            "attention backend 'fa3' needs FlashAttention-3: the flash_attn_3 package, built "
            "from Dao-AILab/flash-attention's hopper/ folder for a Hopper GPU "
            f'({type(error).__name__}: {error})'
        ) from error


@contextlib.contextmanager
def _kernel_context(name: str) -> Iterator[None]:
    """The context of :func:`attention_kernel`.

    Every name sets both the FA3 and the FP8 flag, so a context nested in another one replaces
    its choice.
    """
    fa3 = flash_attention_3() if name == 'fa3' else None
    fa3_token = _FA3_FORWARD.set(fa3)
    fp8_token = _FP8_KV.set(name == 'fp8')
    try:
        preferred = ATTENTION_KERNELS[name]
        if preferred is None:
            yield
        else:
            order = [preferred, *(b for b in _FALLBACK_ORDER if b != preferred)]
            with sdpa_kernel(order, set_priority=True):
                yield
    finally:
        _FP8_KV.reset(fp8_token)
        _FA3_FORWARD.reset(fa3_token)


def fp8_kv_attention_active() -> bool:
    """Whether an FP8 K/V cache attends through the FP8 kernel (``attention_kernel('fp8')``)."""
    return _FP8_KV.get()


def attention_kernel(name: str) -> contextlib.AbstractContextManager:
    """Context in which :func:`sdpa` prefers the kernel ``name`` (see :data:`ATTENTION_KERNELS`).

    ``fa3`` raises RuntimeError on entry when FlashAttention-3 is not installed.
    """
    if name not in ATTENTION_KERNELS:
        raise ValueError(
            f'attention backend must be one of {sorted(ATTENTION_KERNELS)}, got {name!r}'
        )
    return _kernel_context(name)


def _fa3_takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether FlashAttention-3 can take an unmasked call (CUDA, 16-bit, unit last stride)."""
    return (
        q.is_cuda
        and q.dtype in (torch.bfloat16, torch.float16)
        and all(t.stride(-1) == 1 for t in (q, k, v))
    )


def sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``q (B, Lq, H, D)`` over ``k, v (B, Lk, H, D)``; returns ``(B, Lq, H, D)``.

    ``mask`` (optional, boolean, broadcastable to ``(B, H, Lq, Lk)``) marks allowed pairs.
    The softmax scale is ``D ** -0.5``.
    """
    forward = _FA3_FORWARD.get()
    if forward is not None and mask is None and _fa3_takes(q, k, v):
        return forward(q, k, v)[0]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
    )
    return out.transpose(1, 2)


class SelfAttentionBackend(Protocol):
    """How a DiT layer's self-attention sees keys and values beyond the tokens of the call."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention output ``(B, L, H, D)`` for the call's rotated ``q, k`` and ``v``."""
        ...

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Keep the call's rotated ``k`` and ``v`` without attending (a prefill's last block)."""
        ...
