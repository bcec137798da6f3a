# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Analytic DiT FLOPs of a chunk (matrix products and attention), from the shapes alone."""

from __future__ import annotations

from dataclasses import dataclass

from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine


@dataclass(frozen=True)
class CallShape:
    """Token counts of one DiT call for one CFG row."""

    video_frames: int
    registers: int
    cached_frames: int


def dit_call_flops(dit: DiTConfig, shape: CallShape, text_tokens: int, image_tokens: int) -> float:
    """Multiply-add FLOPs (x2) of one DiT call for one row: matmuls and attention only.

    Per block, with ``L`` query tokens and ``K = cached + L`` keys: self-attention projections
    ``8 L d^2``, scores and values ``4 L K d``; cross-attention query/output ``4 L d^2`` and
    attention over text and CLIP tokens ``4 L (T + I) d``; FFN ``4 L d f``.  Plus the patch
    embedding and the video head.  Norms, modulation and the tiny action/state MLPs are left out.
    """
    d, f = dit.dim, dit.ffn_dim
    video = shape.video_frames * dit.frame_seqlen
    queries = video + shape.registers
    keys = shape.cached_frames * dit.frame_seqlen + queries
    per_block = queries * (12 * d * d + 4 * keys * d + 4 * (text_tokens + image_tokens) * d)
    per_block += queries * 4 * d * f
    patch = 1
    for p in dit.patch_size:
        patch *= p
    embed = 2 * video * d * patch * (dit.in_dim + dit.out_dim)
    return float(dit.num_layers * per_block + embed)


def context_flops(dit: DiTConfig, text_tokens: int, image_tokens: int) -> float:
    """FLOPs of projecting the cross-attention keys/values of a new window, per row."""
    d = dit.dim
    per_block = 2 * 2 * (text_tokens + image_tokens) * d * d
    embed = 2 * text_tokens * (dit.text_dim * d + d * d) + 2 * image_tokens * dit.clip_dim * d
    return float(dit.num_layers * per_block + embed)


def chunk_flops(engine: DreamZeroEngine, stats: dict, rows: int) -> tuple[float, float]:
    """(prefill, denoise) DiT FLOPs of the last chunk for ``rows`` CFG rows in this process."""
    dit = engine.config.dit
    text = engine.config.umt5.text_len
    image = engine.config.clip.num_tokens
    start, per_block = stats['start_frame'], dit.num_frame_per_block
    if stats['new_window']:
        prefill = dit_call_flops(dit, CallShape(1, 0, 0), text, image)
        prefill += context_flops(dit, text, image)
    else:
        cached = start - per_block
        prefill = dit_call_flops(dit, CallShape(per_block, 0, cached), text, image)
    # A call that skipped the unconditional branch computed one row's share.
    row_calls = rows * stats['dit_calls'] - (rows - 1) * stats.get('conditional_only_calls', 0)
    denoise = row_calls * dit_call_flops(
        dit, CallShape(per_block, dit.register_tokens, start), text, image
    )
    return rows * prefill, denoise
