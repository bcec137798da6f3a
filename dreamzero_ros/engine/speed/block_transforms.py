# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Module transforms of the DiT block: the same function in fewer, fused kernels.

Each transform changes a module of a :class:`~.dit_block.DiTBlock` in place -- same parameters, same
``state_dict`` keys -- and the block's code stays the reference's (:mod:`.acceleration` applies
them when ``compile`` or ``fp8_linear`` is set):

* :func:`fuse_qkv_`: ``q, k, v`` of a self-attention become views of one ``(3 dim, dim)``
  layer (no extra memory), and the attention a :class:`FusedQKVSelfAttention`: one product per
  call, then QK RMSNorm, rotary embedding and the K/V cache write -- on CUDA with Triton (or
  under Triton's interpreter) in one kernel, the op ``dreamzero::qk_norm_rope_into_cache``
  (:mod:`.qk_rope_kernel`), which writes the keys and values straight into the cache's slots;
  elsewhere the reference's :meth:`~.dit_block.SelfAttention.normalize_and_rotate` and cache write;
* :func:`fuse_gelu_epilogue_`: the FFN becomes a :class:`TanhGeluFFN`, whose bf16/fp16 input
  projection applies its tanh GELU in the cuBLASLt epilogue on CUDA.

FP8 linears (:func:`.fp8.quantize_linears_`) are the third transform; they are applied first,
so the fused q/k/v layer holds the FP8 weights and scales.
"""

from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.networks.attention import LayerAttention
from dreamzero_ros.engine.networks.dit_block import RMSNorm, SelfAttention
from dreamzero_ros.engine.networks.fp8 import Fp8Linear, fp8_linear
from dreamzero_ros.engine.networks.rope import Rotary
from dreamzero_ros.engine.speed import qk_rope_kernel

__all__ = [
    'FusedQKVSelfAttention',
    'TanhGeluFFN',
    'fuse_gelu_epilogue_',
    'fuse_qkv_',
    'unfuse_qkv_',
]


class FusedQKVSelfAttention(SelfAttention):
    """A :class:`~.dit_block.SelfAttention` whose ``q, k, v`` are views of one fused layer.

    The fused layer is held in non-persistent buffers (``qkv_weight``, ``qkv_bias`` and, for
    FP8 layers, ``qkv_scale``; not in the ``state_dict``).  ``qk_kernel``: whether the Triton
    kernel normalises, rotates and writes the keys and values.
    """

    qk_kernel: bool

    def write_keys_values(
        self, x: torch.Tensor, rotary: Rotary, kv: LayerAttention
    ) -> torch.Tensor:
        """As the reference: the rotated keys and the values of ``x`` into ``kv``; the queries."""
        scale = self.qkv_scale
        if scale is None:
            qkv = F.linear(x, self.qkv_weight, self.qkv_bias)
        else:
            qkv = fp8_linear(x, self.qkv_weight, scale, self.qkv_bias)
        if self.qk_kernel:
            k_out, v_out = kv.slots()
            return qk_rope_kernel.qk_norm_rope_into_cache(
                qkv, self.norm_q.weight, self.norm_k.weight, rotary.cos, rotary.sin,
                self.num_heads, self.norm_q.eps, k_out, v_out,
            )  # fmt: skip
        q, k, v = self.normalize_and_rotate(*qkv.chunk(3, dim=-1), rotary)
        kv.write(k, v)
        return q


def _is_fused(attention: SelfAttention) -> bool:
    """Whether ``attention`` is fused with its current ``q, k, v`` layers."""
    return (
        isinstance(attention, FusedQKVSelfAttention)
        and attention.q.weight.data_ptr() == attention.qkv_weight.data_ptr()
    )


@torch.no_grad()
def fuse_qkv_(attention: SelfAttention, qk_kernel: bool = False) -> FusedQKVSelfAttention:
    """Make ``q, k, v`` of ``attention`` views of one ``(3 dim, dim)`` layer; return it.

    Values and ``state_dict`` keys are unchanged; a second call keeps the fused layer (and
    re-fuses where ``q, k, v`` were replaced, e.g. quantized).  FP8 layers
    (:class:`~.fp8.Fp8Linear`) fuse their e4m3 weights and scales; tensorwise scales become one
    per row of the fused layer (its product then scales its input per row too).  The kernel
    (``qk_kernel``) needs RMSNorms over the whole heads (not a tensor-parallel shard's).
    """
    if not _is_fused(attention):
        linears = (attention.q, attention.k, attention.v)
        weight = torch.cat([lin.weight for lin in linears])
        bias = torch.cat([lin.bias for lin in linears])
        scale = None
        if isinstance(linears[0], Fp8Linear):
            scale = torch.cat([lin.scale.expand(1, lin.out_features) for lin in linears], dim=1)
        rows = linears[0].weight.shape[0]
        for i, lin in enumerate(linears):
            part = slice(i * rows, (i + 1) * rows)
            lin.weight = nn.Parameter(weight[part], requires_grad=False)
            lin.bias = nn.Parameter(bias[part], requires_grad=False)
            if scale is not None and lin.scale.ndim == 2:
                lin.scale = scale[:, part]
        attention.__class__ = FusedQKVSelfAttention
        attention.register_buffer('qkv_weight', weight, persistent=False)
        attention.register_buffer('qkv_bias', bias, persistent=False)
        attention.register_buffer('qkv_scale', scale, persistent=False)
    norms = (attention.norm_q, attention.norm_k)
    attention.qk_kernel = qk_kernel and all(type(norm) is RMSNorm for norm in norms)
    return attention


def unfuse_qkv_(attention: SelfAttention) -> None:
    """Undo :func:`fuse_qkv_` (the fused buffers are released; ``q, k, v`` stay views)."""
    if isinstance(attention, FusedQKVSelfAttention):
        for name in ('qkv_weight', 'qkv_bias', 'qkv_scale'):
            del attention._buffers[name]
        del attention.qk_kernel
        attention.__class__ = SelfAttention


class TanhGeluFFN(nn.Sequential):
    """The block's FFN ``Linear, GELU(tanh), Linear``; on CUDA the GELU in the first product.

    ``torch._addmm_activation(..., use_gelu=True)`` is one cuBLASLt product with the tanh GELU
    on CUDA (its CPU kernel applies the erf one, so the CPU keeps the separate GELU; FP8 linears
    keep GELU fused with their input quantization).  The epilogue rounds once, after the
    activation; the separate kernels round the product to the model dtype first.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``second(gelu_tanh(first(x)))``."""
        first, activation, second = self
        if type(first) is nn.Linear and first.bias is not None and x.is_cuda:
            rows = x.reshape(-1, x.shape[-1])
            hidden = torch._addmm_activation(first.bias, rows, first.weight.t(), use_gelu=True)
            return second(hidden.view(*x.shape[:-1], first.out_features))
        return second(activation(first(x)))


def fuse_gelu_epilogue_(ffn: nn.Sequential) -> TanhGeluFFN:
    """Make the block's FFN a :class:`TanhGeluFFN` (in place; same layers and keys)."""
    ffn.__class__ = TanhGeluFFN
    return ffn
