# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed options of the DiT: a block runner with fused stages, FP8 linears and torch.compile.

:class:`AccelerationConfig` holds the switches (all off by default: the reference path):

* ``attention_backend``: the scaled-dot-product kernel torch should prefer (``auto``: its own
  choice; ``cudnn``, ``flash``, ``efficient``, ``math``), or ``fa3`` (FlashAttention-3, when
  installed), see :func:`.attention.attention_kernel`;
* ``compile``: ``True`` (inductor) or a ``torch.compile`` backend name: the three stages of every
  block between its attention calls are compiled, so norms, AdaLN modulation, QK RMSNorm, rotary
  embedding, gating, GELU and the FP8 input quantization fuse into a few kernels around the
  matrix products;
* ``fp8_linear``: ``rowwise`` or ``tensorwise``: the block linears (self-attention q/k/v/o,
  cross-attention q/o, FFN) run in FP8 e4m3 (:mod:`.fp8`); the weights are quantized once.
* ``triton_qk_rope``: on CUDA with Triton, QK RMSNorm, the rotary embedding and the K/V cache
  write run as one hand-written kernel (:mod:`.qk_rope_kernel`) after the q/k/v product.

Either of the last two replaces :meth:`CausalWanDiT.run_blocks` by :class:`FastBlockRunner`,
which computes the same block as :class:`~dreamzero_ros.engine.dit.DiTBlock` with:

* per-token modulation gathered from the per-segment vectors by a token -> segment index, instead
  of slicing the tokens per frame and concatenating the pieces again; when the call's timesteps
  are uniform (every prefill and denoising call of the denoiser), one vector for the video
  tokens and one for the register tokens, broadcast (``uniform_modulation``);
* one q/k/v product per block (the three weights become views of one fused matrix: same values,
  same checkpoint keys, no extra memory);
* the self-attention K/V written straight into the preallocated cache -- from inside the
  compiled stage, fused with QK RMSNorm and the rotary embedding (``fused_kv_write``) -- and
  attention over a view of it (the cache is :class:`~dreamzero_ros.engine.kv_cache.KVCache`);
* in a prefill, the last block stops once its keys/values are cached (nothing reads the rest);
* on CUDA, the bf16/fp16 FFN input projection with its tanh GELU in the cuBLASLt epilogue
  (``gelu_epilogue``): the GELU kernel's read and write of the 13824-wide activations go.

Attention itself (self and cross) runs between the compiled stages, eagerly, with the kernel
chosen by ``attention_backend``; its sequence lengths change within a context window, the
compiled stages' shapes do not (three token counts: 880, 1760 and 1785 for DROID).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.errors import ConfigError

from . import qk_rope_kernel
from .attention import ATTENTION_KERNELS, SelfAttentionBackend, flash_attention_3, sdpa
from .fp8 import FP8_MODES, fp8_linear, quantize_weight
from .rope import Rotary, rotate

__all__ = ['AccelerationConfig', 'FastBlockRunner', 'fuse_qkv_']

#: ``(weight, fp8 scale or None, bias or None)`` of one linear layer.
Linear = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]

_OFF = (False, None, 'off', 'none', '')


@dataclass(frozen=True)
class AccelerationConfig:
    """Speed switches of the DiT; the defaults are the reference path (see the module docstring).

    ``compile`` is ``False``, ``True`` (inductor) or a ``torch.compile`` backend name;
    ``fp8_linear`` is ``off``, ``rowwise`` or ``tensorwise`` (``True`` means ``rowwise``).
    ``uniform_modulation``, ``fused_kv_write``, ``gelu_epilogue`` and ``triton_qk_rope`` only
    change how :class:`FastBlockRunner` computes (same function): one broadcast modulation
    vector per token kind when a call's timesteps are uniform, keys/values written into the cache
    from inside the compiled stage, on CUDA the FFN's tanh GELU applied in the epilogue of its
    input projection (cuBLASLt, bf16/fp16 linears; FP8 linears keep GELU fused with their input
    quantization), and on CUDA with Triton QK RMSNorm + rotary embedding + K/V cache write in
    one Triton kernel (with ``fused_kv_write``).
    """

    compile: bool | str = False
    fp8_linear: str | bool = 'off'
    attention_backend: str = 'auto'
    uniform_modulation: bool = True
    fused_kv_write: bool = True
    gelu_epilogue: bool = True
    triton_qk_rope: bool = True

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
        """Whether the blocks run through :class:`FastBlockRunner`."""
        return self.compile_backend is not None or self.fp8_linear != 'off'


@torch.no_grad()
def fuse_qkv_(attention: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Make ``q, k, v`` of a self-attention views of one ``(3 dim, dim)`` matrix; return it.

    Values and ``state_dict`` keys are unchanged; a second call returns the same fused tensors.
    """
    linears = (attention.q, attention.k, attention.v)
    fused = getattr(attention, '_fused_qkv', None)
    if fused is not None and linears[0].weight.data_ptr() == fused[0].data_ptr():
        return fused
    weight = torch.cat([lin.weight for lin in linears])
    bias = torch.cat([lin.bias for lin in linears])
    rows = linears[0].weight.shape[0]
    for i, lin in enumerate(linears):
        part = slice(i * rows, (i + 1) * rows)
        lin.weight = torch.nn.Parameter(weight[part], requires_grad=False)
        lin.bias = torch.nn.Parameter(bias[part], requires_grad=False)
    attention._fused_qkv = (weight, bias)
    return weight, bias


def _linear(x: torch.Tensor, layer: Linear) -> torch.Tensor:
    weight, scale, bias = layer
    if scale is None:
        return F.linear(x, weight, bias)
    return fp8_linear(x, weight, scale, bias)


def _linear_gelu(x: torch.Tensor, layer: Linear, epilogue: bool) -> torch.Tensor:
    """``gelu_tanh(x @ W.T + b)``; with ``epilogue`` on CUDA, one cuBLASLt product does all.

    ``torch._addmm_activation(..., use_gelu=True)`` applies the tanh GELU on CUDA (its CPU
    kernel applies the erf one, so the CPU keeps the separate GELU).  The epilogue rounds once,
    after the activation; the separate kernels round the product to the model dtype first.
    """
    weight, scale, bias = layer
    if epilogue and scale is None and bias is not None and x.is_cuda:
        rows = torch._addmm_activation(bias, x.reshape(-1, x.shape[-1]), weight.t(), use_gelu=True)
        return rows.view(*x.shape[:-1], weight.shape[0])
    return F.gelu(_linear(x, layer), approximate='tanh')


def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Wan RMSNorm (as :class:`~dreamzero_ros.engine.dit.RMSNorm`); identity without weight."""
    if weight is None:
        return x
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return normed.type_as(x) * weight


#: Where a token's modulation comes from: a token -> segment index tensor (``mod`` has a vector
#: per frame and per register token), or, with uniform timesteps, the number of video tokens
#: (``mod`` has one vector for all video tokens, then one for all register tokens if any).
Segments = torch.Tensor | int


def _token_vectors(mod: torch.Tensor, segment: Segments, index: int, length: int) -> torch.Tensor:
    """Modulation vector ``index`` of every token, ``(B, L, C)`` or broadcastable ``(B, 1, C)``.

    Per segment it is a gather; with uniform timesteps one vector broadcast over the video
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
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """QK RMSNorm and rotary embedding of ``qkv (B, L, 3 dim)``: ``q, k, v (B, L, heads, D)``.

    With ``k_out, v_out`` (the K/V cache's slots of the call) ``k`` and ``v`` are written there
    and ``q, None, None`` returned.  The torch path of
    :func:`.qk_rope_kernel.qk_norm_rope_into_cache`.
    """
    q, k, v = qkv.chunk(3, dim=-1)
    q = rotate(_rms_norm(q, norm_q, eps).unflatten(-1, (heads, -1)), cos, sin)
    k = rotate(_rms_norm(k, norm_k, eps).unflatten(-1, (heads, -1)), cos, sin)
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
    k_out: torch.Tensor | None = None,
    v_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """AdaLN, fused q/k/v, then :func:`qk_norm_rope` (cache writes inside the compiled stage)."""
    qkv_out = _pre_qkv(x, mod, segment, qkv, eps)
    return qk_norm_rope(qkv_out, norm_q, norm_k, cos, sin, heads, eps, k_out, v_out)


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output projection, gated residual, cross-attention norm and query: ``x, q_cross``."""
    x = x + _linear(attended.flatten(2), o) * _token_vectors(mod, segment, 2, x.shape[1])
    h = x if norm3 is None else F.layer_norm(x, x.shape[-1:], norm3[0], norm3[1], eps)
    q = _rms_norm(_linear(h, cross_q), cross_norm_q, eps)
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
    gelu_epilogue: bool = False,
) -> torch.Tensor:
    """Cross-attention output and residual, then the modulated FFN with its gated residual."""
    x = x + _linear(text.flatten(2) + image.flatten(2), cross_o)
    h = _modulated_norm(x, mod, segment, 3, eps)
    y = _linear(_linear_gelu(h, ffn_in, gelu_epilogue), ffn_out)
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


def _layer_weights(block: Any, fp8: str) -> _LayerWeights:
    def linear(weight: torch.Tensor, bias: torch.Tensor | None) -> Linear:
        if fp8 == 'off':
            return weight, None, bias
        return quantize_weight(weight, bias, fp8).as_tuple()

    def module(lin: torch.nn.Linear) -> Linear:
        return linear(lin.weight, lin.bias)

    attn, cross = block.self_attn, block.cross_attn
    norm3 = block.norm3
    return _LayerWeights(
        qkv=linear(*fuse_qkv_(attn)),
        norm_q=_norm_weight(attn.norm_q),
        norm_k=_norm_weight(attn.norm_k),
        o=module(attn.o),
        norm3=None if isinstance(norm3, torch.nn.Identity) else (norm3.weight, norm3.bias),
        cross_q=module(cross.q),
        cross_norm_q=_norm_weight(cross.norm_q),
        cross_o=module(cross.o),
        ffn_in=module(block.ffn[0]),
        ffn_out=module(block.ffn[2]),
    )


def _allow_recompiles(limit: int = 64) -> None:
    """Let each stage keep a compiled graph per shape and variant (torch's default is 8)."""
    config = torch._dynamo.config
    name = 'recompile_limit' if hasattr(config, 'recompile_limit') else 'cache_size_limit'
    setattr(config, name, max(getattr(config, name), limit))


class FastBlockRunner:
    """Runs the blocks of a :class:`~dreamzero_ros.engine.dit.CausalWanDiT` fast.

    A drop-in for :meth:`CausalWanDiT.run_blocks` (pass it as ``runner`` to the DiT's
    :meth:`~CausalWanDiT.forward` and :meth:`~CausalWanDiT.prefill`).  Building it fuses the
    q/k/v weights of every block in place and, with FP8, quantizes the block linears (about
    12 GB for the 14B model, next to the model-dtype weights).  Not for tensor-parallel shards.
    """

    def __init__(self, dit: Any, config: AccelerationConfig) -> None:
        if dit.tensor_parallel is not None:
            raise ValueError('compile / fp8_linear do not support a tensor-parallel DiT')
        if config.fp8_linear != 'off' and dit.dtype != torch.bfloat16:
            raise ValueError(f'fp8_linear needs a bfloat16 model, not {dit.dtype}')
        self.dit = dit
        self.config = config
        self.layers = [_layer_weights(block, config.fp8_linear) for block in dit.blocks]
        self.heads = dit.blocks[0].self_attn.num_heads
        self.eps = dit.config.eps
        self._segments: dict[tuple, torch.Tensor] = {}
        self.qk_kernel = (
            config.triton_qk_rope
            and config.fused_kv_write
            and qk_rope_kernel.available(dit.device)
            and all(w.norm_q is not None and w.norm_k is not None for w in self.layers)
        )
        stages = (_pre_attention, _pre_qkv, _post_attention, _post_cross_attention)
        backend = config.compile_backend
        if backend is not None:
            _allow_recompiles()
            stages = tuple(
                torch.compile(stage, backend=backend, dynamic=False, fullgraph=True)
                for stage in stages
            )
        self._pre, self._pre_qkv, self._post, self._post_cross = stages

    def segment_index(self, frames: int, tokens: int, registers: int) -> torch.Tensor:
        """Segment of every token: its frame for video tokens, ``frames + j`` for register j."""
        key = (frames, tokens, registers)
        index = self._segments.get(key)
        if index is None:
            video = tokens - registers
            device = self.dit.device
            index = torch.cat(
                [
                    torch.arange(video, device=device) // (video // frames),
                    frames + torch.arange(registers, device=device),
                ]
            )
            self._segments[key] = index
        return index

    def __call__(
        self,
        x: torch.Tensor,
        e0: torch.Tensor,
        frames: int,
        rotary: Rotary,
        context: Any,
        backend: SelfAttentionBackend,
        last_output: bool = True,
        uniform: bool = False,
    ) -> torch.Tensor | None:
        """The blocks on ``x``; see :meth:`CausalWanDiT.run_blocks`.

        With ``last_output=False`` (a prefill) the last block only caches its keys and values
        and None is returned.  With ``uniform`` (all video frames at one timestep, all register
        tokens at another) and ``uniform_modulation`` on, each block's modulation is one vector
        per token kind, broadcast; otherwise one per frame and register token, gathered.
        With ``fused_kv_write`` and a K/V cache as ``backend``, the compiled stage writes the
        keys/values into the cache's slots (no separate copies), or the Triton kernel does
        (:attr:`qk_kernel`).
        """
        registers = e0.shape[1] - frames
        segment: Segments
        if uniform and self.config.uniform_modulation:
            segment = x.shape[1] - registers  # the video tokens; e0: one row per token kind
            kinds = [e0[:, :1], e0[:, frames : frames + 1]] if registers else [e0[:, :1]]
            e0 = torch.cat(kinds, dim=1)  # slices, not an index list (no host-to-device copy)
        else:
            segment = self.segment_index(frames, x.shape[1], registers)
        heads, eps = self.heads, self.eps
        last = len(self.layers) - 1
        fused = self.config.fused_kv_write and hasattr(backend, 'slots')
        for i, (block, w) in enumerate(zip(self.dit.blocks, self.layers, strict=True)):
            mod = block.modulation.unsqueeze(0) + e0
            slots = backend.slots(i) if fused else (None, None)
            if fused and self.qk_kernel:
                qkv = self._pre_qkv(x, mod, segment, w.qkv, eps)
                q = qk_rope_kernel.qk_norm_rope_into_cache(
                    qkv, w.norm_q, w.norm_k, rotary.cos, rotary.sin, heads, eps, *slots
                )
                k = v = None
            else:
                q, k, v = self._pre(
                    x, mod, segment, w.qkv, w.norm_q, w.norm_k, rotary.cos, rotary.sin, heads,
                    eps, *slots,
                )  # fmt: skip
            if i == last and not last_output and hasattr(backend, 'store'):
                if not fused:
                    backend.store(i, k, v)
                return None
            attended = backend.attend_written(i, q) if fused else backend.attend(i, q, k, v)
            x, q = self._post(
                x, attended, mod, segment, w.o, w.norm3, w.cross_q, w.cross_norm_q, heads, eps
            )
            k_text, v_text, k_image, v_image = context.layers[i]
            x = self._post_cross(
                x,
                sdpa(q, k_text, v_text),
                sdpa(q, k_image, v_image),
                mod,
                segment,
                w.cross_o,
                w.ffn_in,
                w.ffn_out,
                eps,
                self.config.gelu_epilogue,
            )
        return x if last_output else None
