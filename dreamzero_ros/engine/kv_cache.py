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
concatenation of the context is needed.  For batched CFG the batch holds the conditional rows
followed by the unconditional rows, i.e. each branch keeps its own cache rows.
"""

from __future__ import annotations

import copy

import torch

from .attention import sdpa

__all__ = ['KVCache']


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
        capacity = max_video_tokens + max_register_tokens
        shape = (num_layers, batch, capacity, num_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0
        self._new_video = 0
        self._new_total = 0
        self._is_view = False

    @property
    def batch(self) -> int:
        """Rows of the cache."""
        return self.k.shape[1]

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
            keep = self.length - overflow
            self.k[:, :, :keep] = self.k[:, :, overflow : self.length].clone()
            self.v[:, :, :keep] = self.v[:, :, overflow : self.length].clone()
            self.length = keep
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

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Write the call's ``k, v`` after the cache and attend ``q`` over cache + new tokens."""
        self.store(layer, k, v)
        return self.attend_written(layer, q)

    def slots(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of ``layer``'s key and value buffers that hold the call's new tokens.

        A block processor may write the new keys/values straight into them (instead of
        :meth:`store`), then call :meth:`attend_written`.
        """
        end = self.length + self._new_total
        return self.k[layer, :, self.length : end], self.v[layer, :, self.length : end]

    def attend_written(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        """Attend ``q`` over the cache and the new tokens already written to :meth:`slots`."""
        end = self.length + self._new_total
        return sdpa(q, self.k[layer, :, :end], self.v[layer, :, :end])

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the call's ``k, v`` after the cache without attending.

        (The last layer of a prefill: nothing reads its attention output.)
        """
        if k.shape[1] != self._new_total:
            raise RuntimeError(
                f'layer {layer}: got {k.shape[1]} new tokens, begin() announced {self._new_total}'
            )
        end = self.length + self._new_total
        self.k[layer, :, self.length : end] = k
        self.v[layer, :, self.length : end] = v

    def commit(self) -> None:
        """Keep the video tokens of the last call (a prefill) in the cache."""
        if self._is_view:
            raise RuntimeError('a row view of the cache cannot commit')
        self.length += self._new_video
        self._new_video = self._new_total = 0
