# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The fast block processor: the reference DiT block as fused, compiled stages.

:class:`FastBlockProcessor` computes the same function as
:class:`~.dit.ReferenceBlockProcessor` (:mod:`.acceleration` installs it
on every block when ``compile`` or ``fp8_linear`` is set), with:

* per-token modulation gathered from the per-segment vectors by a token -> segment index,
  instead of slicing the tokens per frame and concatenating the pieces again; in a uniform call
  (:attr:`~.dit.Modulation.uniform`: every prefill and denoising call of
  the denoiser) one vector for the video tokens and one for the register tokens, broadcast;
* one q/k/v product per block (:func:`fuse_qkv_`: the three weights become views of one fused
  matrix -- same values, same checkpoint keys, no extra memory);
* the self-attention keys/values written straight into the K/V cache's slots from inside the
  compiled stage, fused with QK RMSNorm and the rotary embedding -- or, on CUDA with Triton, by
  one hand-written kernel (:mod:`.qk_rope_kernel`) -- and attention over a view of the cache;
* on CUDA, the bf16/fp16 FFN input projection with its tanh GELU in the cuBLASLt epilogue;
* the block's FP8 e4m3 linears where the DiT holds them (:class:`.fp8.Fp8Linear`, instead of
  the model-dtype weights) and ``torch.compile`` of the three stages between
  the attention calls (norms, AdaLN modulation, QK RMSNorm, rotary embedding, gating, GELU and
  the FP8 input quantization fuse into a few kernels around the matrix products).

Attention itself (self and cross) runs between the compiled stages, eagerly, through
:func:`.attention.sdpa`; its sequence lengths change within a context window, the compiled
stages' shapes do not (three token counts: 880, 1760 and 1785 for DROID).  The processor needs
a K/V cache as its attention backend (:class:`~.kv_cache.KVCache`).

A tensor-parallel DiT (:mod:`.tensor_parallel`, sharded before the processors are built, so
FP8 quantizes each rank's shard) has the sharded model's reductions inside the stages, as
functional collectives that ``torch.compile`` traces: the QK RMSNorm statistics and the outputs
of the row-parallel ``o``, cross-attention ``o`` and ``ffn.2`` are all-reduced over the
tensor-parallel group.  The Triton QK kernel normalises over one rank's heads only, so it is
not used there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.model.attention import sdpa
from dreamzero_ros.engine.model.dit import CrossKV, Modulation
from dreamzero_ros.engine.model.kv_cache import KVCache
from dreamzero_ros.engine.model.rope import Rotary, rotate
from dreamzero_ros.engine.speed import qk_rope_kernel
from dreamzero_ros.engine.speed.fp8 import Fp8Linear, fp8_linear

__all__ = ['FastBlockProcessor', 'FastStages', 'fuse_qkv_', 'qk_norm_rope', 'stage_shard']

#: ``(weight, fp8 scale or None, bias or None)`` of one linear layer.
Linear = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]
#: A tensor-parallel DiT's ``(group name, full model width)``; None for an unsharded one.
Shard = tuple[str, int] | None


def stage_shard(dit: Any) -> Shard:
    """The :data:`Shard` of a :class:`~.dit.CausalWanDiT`."""
    shard = dit.tensor_parallel
    return None if shard is None else (shard.group_name, dit.config.dim)


@torch.no_grad()
def fuse_qkv_(attention: torch.nn.Module) -> Linear:
    """Make ``q, k, v`` of a self-attention views of one ``(3 dim, dim)`` layer; return it.

    Values and ``state_dict`` keys are unchanged; a second call returns the same fused tensors.
    FP8 layers (:class:`~.fp8.Fp8Linear`) fuse their e4m3 weights and scales; tensorwise scales
    become one per row of the fused layer (its product then scales its input per row too).
    """
    linears = (attention.q, attention.k, attention.v)
    fused = getattr(attention, '_fused_qkv', None)
    if fused is not None and linears[0].weight.data_ptr() == fused[0].data_ptr():
        return fused
    weight = torch.cat([lin.weight for lin in linears])
    bias = torch.cat([lin.bias for lin in linears])
    scale = None
    if isinstance(linears[0], Fp8Linear):
        scale = torch.cat([lin.scale.expand(1, lin.out_features) for lin in linears], dim=1)
    rows = linears[0].weight.shape[0]
    for i, lin in enumerate(linears):
        part = slice(i * rows, (i + 1) * rows)
        lin.weight = torch.nn.Parameter(weight[part], requires_grad=False)
        lin.bias = torch.nn.Parameter(bias[part], requires_grad=False)
        if scale is not None and lin.scale.ndim == 2:
            lin.scale = scale[:, part]
    attention._fused_qkv = (weight, scale, bias)
    return attention._fused_qkv


def _linear(x: torch.Tensor, layer: Linear) -> torch.Tensor:
    weight, scale, bias = layer
    if scale is None:
        return F.linear(x, weight, bias)
    return fp8_linear(x, weight, scale, bias)


def _linear_gelu(x: torch.Tensor, layer: Linear) -> torch.Tensor:
    """``gelu_tanh(x @ W.T + b)``; a bf16/fp16 product on CUDA applies GELU in its epilogue.

    ``torch._addmm_activation(..., use_gelu=True)`` is one cuBLASLt product with the tanh GELU on
    CUDA (its CPU kernel applies the erf one, so the CPU keeps the separate GELU; FP8 linears keep
    GELU fused with their input quantization).  The epilogue rounds once, after the activation;
    the separate kernels round the product to the model dtype first.
    """
    weight, scale, bias = layer
    if scale is None and bias is not None and x.is_cuda:
        rows = torch._addmm_activation(bias, x.reshape(-1, x.shape[-1]), weight.t(), use_gelu=True)
        return rows.view(*x.shape[:-1], weight.shape[0])
    return F.gelu(_linear(x, layer), approximate='tanh')


def _all_reduce(x: torch.Tensor, shard: Shard) -> torch.Tensor:
    """The sum of ``x`` over the tensor-parallel group; ``x`` itself when unsharded."""
    if shard is None:
        return x
    return funcol.all_reduce(x, 'sum', shard[0])


def _rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, shard: Shard = None
) -> torch.Tensor:
    """Wan RMSNorm (as :class:`~.dit.RMSNorm`); identity without weight.

    Sharded, ``x`` is this rank's slice of the channels and the statistics cover all ranks'
    (as :class:`~.tensor_parallel.ShardedRMSNorm`).
    """
    if weight is None:
        return x
    xf = x.float()
    if shard is None:
        mean_square = xf.pow(2).mean(dim=-1, keepdim=True)
    else:
        mean_square = _all_reduce(xf.pow(2).sum(dim=-1, keepdim=True), shard) / shard[1]
    normed = xf * torch.rsqrt(mean_square + eps)
    return normed.type_as(x) * weight


#: Where a token's modulation comes from: a token -> segment index tensor (``mod`` has a vector
#: per frame and per register token), or, in a uniform call, the number of video tokens (``mod``
#: has one vector for all video tokens, then one for all register tokens if any).
Segments = torch.Tensor | int


def _token_vectors(mod: torch.Tensor, segment: Segments, index: int, length: int) -> torch.Tensor:
    """Modulation vector ``index`` of every token, ``(B, L, C)`` or broadcastable ``(B, 1, C)``.

    Per segment it is a gather; in a uniform call one vector broadcast over the video
    tokens (and a select by token position where register tokens follow), which compiles to
    index arithmetic instead of an indexed load.
    """
    if isinstance(segment, torch.Tensor):
        return mod[:, segment, index]
    vectors = mod[:, :, index]
    if vectors.shape[1] == 1:
        return vectors
    register = torch.arange(length, device=mod.device)[:, None] >= segment
    return torch.where(register, vectors[:, 1:], vectors[:, :1])


def _modulated_norm(
    x: torch.Tensor, mod: torch.Tensor, segment: Segments, shift: int, eps: float
) -> torch.Tensor:
    """``LayerNorm(x) * (1 + scale) + shift`` with each token's modulation vectors."""
    normed = F.layer_norm(x, x.shape[-1:], eps=eps)
    length = x.shape[1]
    scale = _token_vectors(mod, segment, shift + 1, length)
    return normed * (1 + scale) + _token_vectors(mod, segment, shift, length)


def _pre_qkv(
    x: torch.Tensor, mod: torch.Tensor, segment: Segments, qkv: Linear, eps: float
) -> torch.Tensor:
    """AdaLN and the fused q/k/v product: ``(B, L, 3 dim)``."""
    return _linear(_modulated_norm(x, mod, segment, 0, eps), qkv)


def qk_norm_rope(
    qkv: torch.Tensor,
    norm_q: torch.Tensor | None,
    norm_k: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    eps: float,
    k_out: torch.Tensor | None = None,
    v_out: torch.Tensor | None = None,
    shard: Shard = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """QK RMSNorm and rotary embedding of ``qkv (B, L, 3 dim)``: ``q, k, v (B, L, heads, D)``.

    With ``k_out, v_out`` (the K/V cache's slots of the call) ``k`` and ``v`` are written there
    and ``q, None, None`` returned.  The torch path of
    :func:`.qk_rope_kernel.qk_norm_rope_into_cache`.  Sharded, ``heads`` are this rank's.
    """
    q, k, v = qkv.chunk(3, dim=-1)
    q = rotate(_rms_norm(q, norm_q, eps, shard).unflatten(-1, (heads, -1)), cos, sin)
    k = rotate(_rms_norm(k, norm_k, eps, shard).unflatten(-1, (heads, -1)), cos, sin)
    v = v.unflatten(-1, (heads, -1))
    if k_out is None or v_out is None:
        return q, k, v
    k_out.copy_(k)
    v_out.copy_(v)
    return q, None, None


def _pre_attention(
    x: torch.Tensor,
    mod: torch.Tensor,
    segment: Segments,
    qkv: Linear,
    norm_q: torch.Tensor | None,
    norm_k: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    eps: float,
    k_out: torch.Tensor,
    v_out: torch.Tensor,
    shard: Shard,
) -> torch.Tensor:
    """AdaLN, fused q/k/v, :func:`qk_norm_rope` with the cache writes inside the stage: ``q``."""
    qkv_out = _pre_qkv(x, mod, segment, qkv, eps)
    return qk_norm_rope(qkv_out, norm_q, norm_k, cos, sin, heads, eps, k_out, v_out, shard)[0]


def _post_attention(
    x: torch.Tensor,
    attended: torch.Tensor,
    mod: torch.Tensor,
    segment: Segments,
    o: Linear,
    norm3: tuple[torch.Tensor, torch.Tensor] | None,
    cross_q: Linear,
    cross_norm_q: torch.Tensor | None,
    heads: int,
    eps: float,
    shard: Shard,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output projection, gated residual, cross-attention norm and query: ``x, q_cross``."""
    out = _all_reduce(_linear(attended.flatten(2), o), shard)
    x = x + out * _token_vectors(mod, segment, 2, x.shape[1])
    h = x if norm3 is None else F.layer_norm(x, x.shape[-1:], norm3[0], norm3[1], eps)
    q = _rms_norm(_linear(h, cross_q), cross_norm_q, eps, shard)
    return x, q.unflatten(-1, (heads, -1))


def _post_cross_attention(
    x: torch.Tensor,
    text: torch.Tensor,
    image: torch.Tensor,
    mod: torch.Tensor,
    segment: Segments,
    cross_o: Linear,
    ffn_in: Linear,
    ffn_out: Linear,
    eps: float,
    shard: Shard,
) -> torch.Tensor:
    """Cross-attention output and residual, then the modulated FFN with its gated residual."""
    x = x + _all_reduce(_linear(text.flatten(2) + image.flatten(2), cross_o), shard)
    h = _modulated_norm(x, mod, segment, 3, eps)
    y = _all_reduce(_linear(_linear_gelu(h, ffn_in), ffn_out), shard)
    return x + y * _token_vectors(mod, segment, 5, x.shape[1])


@dataclass(frozen=True)
class _LayerWeights:
    qkv: Linear
    norm_q: torch.Tensor | None
    norm_k: torch.Tensor | None
    o: Linear
    norm3: tuple[torch.Tensor, torch.Tensor] | None
    cross_q: Linear
    cross_norm_q: torch.Tensor | None
    cross_o: Linear
    ffn_in: Linear
    ffn_out: Linear


def _norm_weight(norm: torch.nn.Module) -> torch.Tensor | None:
    return getattr(norm, 'weight', None)


def _linear_of(layer: torch.nn.Module) -> Linear:
    """``(weight, scale, bias)`` of an ``nn.Linear`` (no scale) or an :class:`~.fp8.Fp8Linear`."""
    if isinstance(layer, Fp8Linear):
        return layer.as_tuple()
    return layer.weight, None, layer.bias


def _layer_weights(block: Any) -> _LayerWeights:
    attn, cross = block.self_attn, block.cross_attn
    norm3 = block.norm3
    return _LayerWeights(
        qkv=fuse_qkv_(attn),
        norm_q=_norm_weight(attn.norm_q),
        norm_k=_norm_weight(attn.norm_k),
        o=_linear_of(attn.o),
        norm3=None if isinstance(norm3, torch.nn.Identity) else (norm3.weight, norm3.bias),
        cross_q=_linear_of(cross.q),
        cross_norm_q=_norm_weight(cross.norm_q),
        cross_o=_linear_of(cross.o),
        ffn_in=_linear_of(block.ffn[0]),
        ffn_out=_linear_of(block.ffn[2]),
    )


def _allow_recompiles(limit: int = 64) -> None:
    """Let each stage keep a compiled graph per shape and variant (torch's default is 8)."""
    config = torch._dynamo.config
    name = 'recompile_limit' if hasattr(config, 'recompile_limit') else 'cache_size_limit'
    setattr(config, name, max(getattr(config, name), limit))


class FastStages:
    """What the fast processors of one DiT share: the (compiled) stages and per-call layout.

    Args:
        backend: ``torch.compile`` backend of the stages, or None to run them eagerly.
        device: the DiT's device (whether the Triton QK kernel can run there).
        shard: a tensor-parallel DiT's group name and full width; None for an unsharded one.

    """

    def __init__(self, backend: str | None, device: torch.device, shard: Shard = None) -> None:
        stages = (_pre_attention, _pre_qkv, _post_attention, _post_cross_attention)
        if backend is not None:
            _allow_recompiles()
            stages = tuple(
                torch.compile(stage, backend=backend, dynamic=False, fullgraph=True)
                for stage in stages
            )
        self.pre, self.pre_qkv, self.post, self.post_cross = stages
        # The kernel's statistics cover only the heads it sees: unsharded DiTs only.
        self.qk_kernel = qk_rope_kernel.available(device) and shard is None
        self.shard = shard
        self.device = device
        self._segments: dict[tuple[int, int, int], torch.Tensor] = {}
        self._call: tuple[Modulation, int, Segments, torch.Tensor] | None = None

    def segment_index(self, frames: int, tokens: int, registers: int) -> torch.Tensor:
        """Segment of every token: its frame for video tokens, ``frames + j`` for register j."""
        key = (frames, tokens, registers)
        index = self._segments.get(key)
        if index is None:
            video = tokens - registers
            index = torch.cat(
                [
                    torch.arange(video, device=self.device) // (video // frames),
                    frames + torch.arange(registers, device=self.device),
                ]
            )
            self._segments[key] = index
        return index

    def token_layout(self, modulation: Modulation, tokens: int) -> tuple[Segments, torch.Tensor]:
        """``(segment, e0)`` of a call: computed by its first block, reused by the others.

        In a uniform call ``e0`` is one row per token kind and ``segment`` the video token count;
        otherwise ``e0`` is per segment and ``segment`` the token -> segment index.
        """
        call = self._call
        if call is not None and call[0] is modulation and call[1] == tokens:
            return call[2], call[3]
        e0, frames = modulation.e0, modulation.frames
        registers = e0.shape[1] - frames
        segment: Segments
        if modulation.uniform:
            segment = tokens - registers
            kinds = [e0[:, :1], e0[:, frames : frames + 1]] if registers else [e0[:, :1]]
            e0 = torch.cat(kinds, dim=1)  # slices, not an index list (no host-to-device copy)
        else:
            segment = self.segment_index(frames, tokens, registers)
        self._call = (modulation, tokens, segment, e0)
        return segment, e0


class FastBlockProcessor:
    """A :class:`~.dit.DiTBlock`'s processor: its fused, compiled stages.

    Building it fuses the block's q/k/v weights in place; the block's FP8 linears
    (:func:`.fp8.quantize_linears_`) run in FP8.
    """

    def __init__(self, block: Any, stages: FastStages) -> None:
        self.weights = _layer_weights(block)
        self.stages = stages
        self.heads = block.self_attn.num_heads
        self.eps = block.norm1.eps
        w = self.weights
        self.qk_kernel = stages.qk_kernel and w.norm_q is not None and w.norm_k is not None

    def _keys_values(
        self,
        block: Any,
        x: torch.Tensor,
        modulation: Modulation,
        rotary: Rotary,
        cache: KVCache,
        layer: int,
    ) -> tuple[torch.Tensor, torch.Tensor, Segments]:
        """Write the call's keys/values into ``cache``; return ``q``, ``mod`` and ``segment``."""
        if not isinstance(cache, KVCache):
            raise TypeError('the fast block processor attends through a KVCache')
        segment, e0 = self.stages.token_layout(modulation, x.shape[1])
        mod = block.modulation.unsqueeze(0) + e0
        w, heads, eps = self.weights, self.heads, self.eps
        slots = cache.slots(layer)
        if self.qk_kernel:
            qkv = self.stages.pre_qkv(x, mod, segment, w.qkv, eps)
            q = qk_rope_kernel.qk_norm_rope_into_cache(
                qkv, w.norm_q, w.norm_k, rotary.cos, rotary.sin, heads, eps, *slots
            )
        else:
            q = self.stages.pre(
                x, mod, segment, w.qkv, w.norm_q, w.norm_k, rotary.cos, rotary.sin, heads, eps,
                *slots, self.stages.shard,
            )  # fmt: skip
        return q, mod, segment

    def __call__(
        self,
        block: Any,
        x: torch.Tensor,
        modulation: Modulation,
        rotary: Rotary,
        cross_kv: CrossKV,
        backend: KVCache,
        layer: int,
    ) -> torch.Tensor:
        """The block on ``x``, as the reference computes it."""
        q, mod, segment = self._keys_values(block, x, modulation, rotary, backend, layer)
        w, heads, eps = self.weights, self.heads, self.eps
        attended = backend.attend_written(layer, q)
        shard = self.stages.shard
        x, q = self.stages.post(
            x, attended, mod, segment, w.o, w.norm3, w.cross_q, w.cross_norm_q, heads, eps, shard
        )
        k_text, v_text, k_image, v_image = cross_kv
        return self.stages.post_cross(
            x,
            sdpa(q, k_text, v_text),
            sdpa(q, k_image, v_image),
            mod,
            segment,
            w.cross_o,
            w.ffn_in,
            w.ffn_out,
            eps,
            shard,
        )

    def cache_keys_values(
        self,
        block: Any,
        x: torch.Tensor,
        modulation: Modulation,
        rotary: Rotary,
        backend: KVCache,
        layer: int,
    ) -> None:
        """Only the keys and values of ``x``, written into the cache."""
        self._keys_values(block, x, modulation, rotary, backend, layer)
