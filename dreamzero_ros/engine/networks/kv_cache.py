# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Self-attention K/V cache of the causal DiT for one CFG branch set (all layers).

Only clean video tokens are cached: a *prefill* call (clean context latents at ``t = 0``) appends
its rotated keys and values; a *denoising* call writes its noisy video, action and state keys to
the scratch space right after the cached ones, attends over ``[cache | new tokens]`` with no mask
(exactly as upstream concatenates them), and leaves the cache unchanged.

The video part is a sliding window of ``max_video_tokens`` (``local_attn_size * frame_seqlen``
upstream): when cache plus new video tokens would exceed it, the oldest tokens are dropped.
With DreamZero's window reset (a new context window every ``max_chunk_size`` chunks) that never
happens in practice; it is kept for fidelity.

Buffers are allocated once at full capacity, ``(layers, batch, capacity, heads, head_dim)``, so
shapes inside a chunk are static (CUDA-graph and torch.compile friendly) and no per-step
concatenation of the context is needed.  The capacity has one spare token: no call's window
(:meth:`KVCache.layer`) is a whole buffer, so every window of a many-row cache has the same
memory layout (its rows not contiguous with each other), and code compiled for one serves all.
For batched CFG the batch holds the conditional rows followed by the unconditional rows, i.e.
each branch keeps its own cache rows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from dreamzero_ros.engine.networks.attention import attention
from dreamzero_ros.engine.networks.fp8 import FP8_DTYPE, FP8_MAX

__all__ = ['KV_CACHES', 'Fp8KVCache', 'KVCache', 'LayerKV']


@dataclass(frozen=True)
class LayerKV:
    """One layer's K/V cache window in a DiT call: the cached tokens, then the call's ``new``.

    ``k, v (B, cached + new, H, D)`` are views of the cache's buffers in the model dtype.
    """

    k: torch.Tensor
    v: torch.Tensor
    new: int

    def slots(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of the window's places of the call's new keys and values."""
        cached = self.k.shape[1] - self.new
        return self.k[:, cached:], self.v[:, cached:]

    def write(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the call's rotated ``k`` and ``v`` into the window, after the cached tokens."""
        if k.shape[1] != self.new:
            raise RuntimeError(f'got {k.shape[1]} new tokens, the call announced {self.new}')
        k_slot, v_slot = self.slots()
        k_slot.copy_(k)
        v_slot.copy_(v)

    def attend_written(self, q: torch.Tensor) -> torch.Tensor:
        """Attend ``q`` over the cached tokens and the new ones already written to the slots."""
        return attention(q, self.k, self.v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Write the call's ``k, v`` into the window and attend ``q`` over it."""
        self.write(k, v)
        return self.attend_written(q)


class KVCache:
    """Preallocated per-layer K/V buffers with a cached length and a scratch tail.

    Args:
        num_layers: DiT blocks.
        batch: rows (``2 * B`` for batched CFG, ``B`` for one branch).
        num_heads, head_dim: attention geometry.
        max_video_tokens: sliding-window size of cached plus new video tokens.
        max_register_tokens: action + state tokens appended by a denoising call.

    """

    def __init__(
        self,
        num_layers: int,
        batch: int,
        num_heads: int,
        head_dim: int,
        max_video_tokens: int,
        max_register_tokens: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        self.max_video_tokens = max_video_tokens
        self.max_register_tokens = max_register_tokens
        capacity = max_video_tokens + max_register_tokens + 1  # the spare token (above)
        self._allocate((num_layers, batch, capacity, num_heads, head_dim), dtype, device)
        self.length = 0
        self._new_video = 0
        self._new_total = 0
        self._is_view = False

    def _allocate(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str
    ) -> None:
        """The buffers, ``(layers, batch, capacity, heads, head_dim)``."""
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def _stores(self) -> tuple[torch.Tensor, ...]:
        """The buffers that hold cached tokens, ``(layers, batch, capacity, ...)``."""
        return self.k, self.v

    def _drop_oldest(self, count: int) -> None:
        """Drop the ``count`` oldest cached tokens (the sliding window)."""
        keep = self.length - count
        for store in self._stores():
            store[:, :, :keep] = store[:, :, count : self.length].clone()
        self.length = keep

    @property
    def batch(self) -> int:
        """Rows of the cache."""
        return self._stores()[0].shape[1]

    def reset(self) -> None:
        """Forget every cached token (a new context window)."""
        self.length = 0
        self._new_video = self._new_total = 0

    def begin(self, num_video: int, num_registers: int) -> None:
        """Announce a DiT call of ``num_video`` video then ``num_registers`` register tokens.

        Drops the oldest cached tokens if the video window would overflow.
        """
        if num_video > self.max_video_tokens or num_registers > self.max_register_tokens:
            raise ValueError(
                f'a call of {num_video} video + {num_registers} register tokens exceeds the '
                f'cache ({self.max_video_tokens} + {self.max_register_tokens})'
            )
        overflow = self.length + num_video - self.max_video_tokens
        if overflow > 0 and self._is_view:
            raise RuntimeError('a row view of the cache cannot drop cached tokens')
        if overflow > 0:
            self._drop_oldest(overflow)
        self._new_video = num_video
        self._new_total = num_video + num_registers

    def rows(self, count: int) -> KVCache:
        """The first ``count`` rows as a cache of their own (same buffers, same cached tokens).

        For a denoising call on part of the batch (e.g. the conditional rows); it must not need
        to drop cached tokens (:meth:`begin` raises), and it cannot :meth:`commit` for its parent.
        """
        if not 0 < count <= self.batch:
            raise ValueError(f'rows must be in [1, {self.batch}], got {count}')
        view = copy.copy(self)
        view.k, view.v = self.k[:, :count], self.v[:, :count]
        view._is_view = True
        return view

    def layer(self, index: int) -> LayerKV:
        """Layer ``index``'s window in the current call (views of the buffers)."""
        end = self.length + self._new_total
        return LayerKV(self.k[index, :, :end], self.v[index, :, :end], self._new_total)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Write the call's ``k, v`` after the cache and attend ``q`` over cache + new tokens."""
        return self.layer(layer).attend(q, k, v)

    def slots(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of ``layer``'s key and value buffers that hold the call's new tokens."""
        return self.layer(layer).slots()

    def attend_written(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        """Attend ``q`` over the cache and the new tokens already written to :meth:`slots`."""
        return self.layer(layer).attend_written(q)

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the call's ``k, v`` after the cache without attending.

        (The last layer of a prefill: nothing reads its attention output.)
        """
        self.layer(layer).write(k, v)

    def commit(self) -> None:
        """Keep the video tokens of the last call (a prefill) in the cache."""
        if self._is_view:
            raise RuntimeError('a row view of the cache cannot commit')
        self.length += self._new_video
        self._new_video = self._new_total = 0


def _quantize_rows(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, scale)``: e4m3 values of ``x (..., D)`` and one ``dtype`` scale per vector.

    The scale is rounded to ``dtype`` before dividing, so ``values * scale`` is what is read.
    """
    xf = x.float()
    scale = (xf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / FP8_MAX).to(dtype)
    values = (xf / scale.float()).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return values, scale


class Fp8KVCache(KVCache):
    """A :class:`KVCache` that keeps its tokens in FP8 e4m3: about half the memory of bf16.

    Each cached key and value vector (one token, one head) is stored as e4m3 values with one
    scale in the model dtype (``amax / 448``).  A call's new keys and values are written in the
    model dtype into a working buffer of one layer, ``(batch, capacity, heads, head_dim)``,
    right after the cached tokens (:meth:`layer`, which first dequantizes the layer's cached
    tokens into the same buffer), and attention reads that buffer, so a call attends its own
    tokens exactly.
    A prefill's new tokens (a call without register tokens: the only calls that are committed)
    are quantized into the store when the next layer starts writing and on :meth:`commit`; a
    denoising call's are never stored.

    Memory: ``1 + 2 / head_dim`` bytes per cached value instead of 2, plus the working buffer
    of one layer.
    """

    def _allocate(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str
    ) -> None:
        scales = (*shape[:-1], 1)
        self.k8 = torch.zeros(shape, dtype=FP8_DTYPE, device=device)
        self.v8 = torch.zeros(shape, dtype=FP8_DTYPE, device=device)
        self.k_scale = torch.zeros(scales, dtype=dtype, device=device)
        self.v_scale = torch.zeros(scales, dtype=dtype, device=device)
        self.work_k = torch.zeros(shape[1:], dtype=dtype, device=device)
        self.work_v = torch.zeros(shape[1:], dtype=dtype, device=device)
        self._pending: int | None = None
        self._prefill = False

    def _stores(self) -> tuple[torch.Tensor, ...]:
        return self.k8, self.v8, self.k_scale, self.v_scale

    def reset(self) -> None:
        """Forget every cached token (a new context window)."""
        super().reset()
        self._pending = None

    def begin(self, num_video: int, num_registers: int) -> None:
        """As :meth:`KVCache.begin`, after quantizing the last call's pending tokens."""
        self._flush()
        super().begin(num_video, num_registers)
        self._prefill = num_registers == 0

    def rows(self, count: int) -> Fp8KVCache:
        """The first ``count`` rows as a cache of their own (see :meth:`KVCache.rows`)."""
        if not 0 < count <= self.batch:
            raise ValueError(f'rows must be in [1, {self.batch}], got {count}')
        self._flush()
        view = copy.copy(self)
        view.k8, view.v8, view.k_scale, view.v_scale = (t[:, :count] for t in self._stores())
        view.work_k, view.work_v = self.work_k[:count], self.work_v[:count]
        view._is_view = True
        return view

    def _flush(self) -> None:
        """Quantize the pending layer's new tokens from the working buffer into the store."""
        layer, self._pending = self._pending, None
        if layer is None or not self._new_total or not self._prefill:
            return
        new = slice(self.length, self.length + self._new_total)
        for work, store, scale in (
            (self.work_k, self.k8, self.k_scale),
            (self.work_v, self.v8, self.v_scale),
        ):
            values, scales = _quantize_rows(work[:, new], work.dtype)
            store[layer, :, new] = values
            scale[layer, :, new] = scales

    def layer(self, index: int) -> LayerKV:
        """Layer ``index``'s window in the working buffer.

        The last layer's pending new tokens are quantized first; then the layer's cached tokens
        are dequantized into the working buffer next to the new ones.
        """
        self._flush()
        self._pending = index
        cached, end = self.length, self.length + self._new_total
        if cached:  # the kernel imports Triton: here, not with the model
            from dreamzero_ros.engine.networks.kv_fp8_kernel import dequantize_into

            for work, store, scale in (
                (self.work_k, self.k8, self.k_scale),
                (self.work_v, self.v8, self.v_scale),
            ):
                dequantize_into(
                    store[index, :, :cached], scale[index, :, :cached], work[:, :cached]
                )
        return LayerKV(self.work_k[:, :end], self.work_v[:, :end], self._new_total)

    def commit(self) -> None:
        """Quantize the last layer's new tokens, then keep the call's video tokens."""
        if self._new_total and not self._prefill and not self._is_view:
            raise RuntimeError('an FP8 K/V cache commits prefill calls (no register tokens) only')
        self._flush()
        super().commit()


#: ``kv_cache`` option -> cache class: ``model`` (the model dtype) or ``fp8``.
KV_CACHES: dict[str, type[KVCache]] = {'model': KVCache, 'fp8': Fp8KVCache}
