# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Attention of the DiT: a torch custom op in front of a registry of attention functions.

Tensors are kept in the ``(batch, tokens, heads, head_dim)`` layout that the linear projections
produce and that flash attention consumes natively; :func:`sdpa` hands torch transposed views
(no copies), so the flash / cuDNN / memory-efficient kernels are used on the GPU and the math
kernel on the CPU.

The DiT block attends through one op, ``torch.ops.dreamzero.attention`` (:func:`attention`:
``q`` over ``k, v``, unmasked; the cross-attention, and the self-attention over a layer's K/V
cache window), which ``torch.compile`` keeps as one opaque call (its fake implementation gives
the output's shape), so a compiled block has no graph break and the kernel is chosen when the
op runs, not when the block is traced.

It runs the function of :data:`ATTENTION_FUNCTIONS` that the active :func:`attention_kernel`
names (a registry, as diffusers' ``attention_dispatch``): ``sdpa`` -- torch's
scaled-dot-product attention, ``auto`` leaving the kernel to torch (the reference), a named
kernel tried first and torch falling back to the others where it cannot run a call (on the CPU
only ``math`` and torch's CPU flash kernel exist) -- or ``fa3``: FlashAttention-3 (Hopper), not
part of torch but the ``flash_attn_3`` package built from Dao-AILab/flash-attention's
``hopper/`` folder, which takes the unmasked bf16/fp16 CUDA calls (same ``(B, L, H, D)``
layout) and leaves the others to torch, cuDNN first.

Self-attention of a DiT call goes through a :class:`SelfAttentionBackend`: the K/V cache
(:class:`.kv_cache.KVCache`) is the one used at inference; tests plug in a masked
full-sequence backend to check the cache against the block-causal reference.
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
    'ATTENTION_FUNCTIONS',
    'ATTENTION_KERNELS',
    'LayerAttention',
    'SelfAttentionBackend',
    'attention',
    'attention_kernel',
    'flash_attention_3',
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
}
ATTENTION_KERNELS: dict[str, SDPBackend | None] = {
    name: _PREFERRED.get(name) for name in ATTENTION_BACKENDS
}
#: The attention function of the active :func:`attention_kernel` (a key of ATTENTION_FUNCTIONS).
_FUNCTION: ContextVar[str] = ContextVar('attention_function', default='sdpa')
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

    Every name sets the attention function, so a context nested in another one replaces its
    choice.
    """
    if name == 'fa3':
        flash_attention_3()  # refused on entry where it is missing
    function_token = _FUNCTION.set('fa3' if name == 'fa3' else 'sdpa')
    try:
        preferred = ATTENTION_KERNELS[name]
        if preferred is None:
            yield
        else:
            order = [preferred, *(b for b in _FALLBACK_ORDER if b != preferred)]
            with sdpa_kernel(order, set_priority=True):
                yield
    finally:
        _FUNCTION.reset(function_token)


def attention_kernel(name: str) -> contextlib.AbstractContextManager:
    """Context in which the attention ops and :func:`sdpa` prefer the kernel ``name``.

    (See :data:`ATTENTION_KERNELS`; ``fa3`` picks the ops' function.)

    ``fa3`` raises RuntimeError on entry when FlashAttention-3 is not installed.
    """
    if name not in ATTENTION_KERNELS:
        raise ValueError(
            f'attention backend must be one of {sorted(ATTENTION_KERNELS)}, got {name!r}'
        )
    return _kernel_context(name)


def sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``q (B, Lq, H, D)`` over ``k, v (B, Lk, H, D)``; returns ``(B, Lq, H, D)``.

    Torch's scaled-dot-product attention, the kernel of its choice (or of the active
    :func:`attention_kernel`).  ``mask`` (optional, boolean, broadcastable to
    ``(B, H, Lq, Lk)``) marks allowed pairs.  The softmax scale is ``D ** -0.5``.
    """
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
    )
    return out.transpose(1, 2)


def _fa3_takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether FlashAttention-3 can take a call (CUDA, 16-bit, unit last stride)."""
    return (
        q.is_cuda
        and q.dtype in (torch.bfloat16, torch.float16)
        and all(t.stride(-1) == 1 for t in (q, k, v))
    )


def _fa3(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """FlashAttention-3 where it takes the call, else :func:`sdpa`."""
    if _fa3_takes(q, k, v):
        return flash_attention_3()(q, k, v)[0]
    return sdpa(q, k, v)


#: The attention functions the ops dispatch to, ``(q, k, v) -> out`` in ``(B, L, H, D)``.
ATTENTION_FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]
ATTENTION_FUNCTIONS = {'sdpa': sdpa, 'fa3': _fa3}


def _dispatch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The active function's attention, contiguous (as the ops' fake implementations)."""
    return ATTENTION_FUNCTIONS[_FUNCTION.get()](q, k, v).contiguous()


@torch.library.custom_op('dreamzero::attention', mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Unmasked attention of ``q (B, Lq, H, D)`` over ``k, v (B, Lk, H, D)``: ``(B, Lq, H, D)``.

    Runs the active :func:`attention_kernel`'s function; softmax scale ``D ** -0.5``.
    """
    return _dispatch(q, k, v)


@attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return q.new_empty(q.shape)


class LayerAttention(Protocol):
    """One DiT layer's self-attention over the call's tokens and what the backend holds."""

    def write(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Keep the call's rotated ``k`` and ``v`` (``(B, L, H, D)``)."""
        ...

    def attend_written(self, q: torch.Tensor) -> torch.Tensor:
        """Attention output ``(B, L, H, D)`` of the call's rotated ``q`` over what is kept."""
        ...


class SelfAttentionBackend(Protocol):
    """How the DiT's self-attention sees keys and values beyond the tokens of the call."""

    def layer(self, index: int) -> LayerAttention:
        """The self-attention of layer ``index`` in the current call."""
        ...
