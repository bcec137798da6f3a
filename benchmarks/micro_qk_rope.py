# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""QK RMSNorm + rotary + K/V write: eager, compiled and the Triton kernel (``--qk-rope``, CUDA)."""

from __future__ import annotations

from typing import Any

from bench_timing import graph_ms
import torch

from dreamzero_ros.engine.networks.dit_block import SelfAttention
from dreamzero_ros.engine.networks.rope import Rotary
from dreamzero_ros.engine.speed import qk_rope_kernel


def qk_rope_benchmark(device: torch.device, repeats: int = 20) -> dict:
    """QK RMSNorm, rotary embedding and K/V cache write of one 14B block call, three ways.

    2 x 1785 tokens of 40 x 128 after the q/k/v product: eager torch (the reference), the same
    compiled (the fast runner before round 4) and the Triton kernel; GPU time per call (medians
    of a CUDA graph of 50 calls, so no launch overhead), the memory rate of the minimal traffic
    (q/k/v read once, q/k/v written once) and the differences from eager.
    """
    if device.type != 'cuda' or not qk_rope_kernel.available(device):
        return {}
    batch, tokens, heads, head_dim, context, eps = 2, 1785, 40, 128, 7945, 1e-6
    dim = heads * head_dim
    generator = torch.Generator(device).manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=device, generator=generator)

    qkv = randn(batch, tokens, 3 * dim).bfloat16()
    weight_q, weight_k = (1 + 0.1 * randn(2, dim)).bfloat16()
    angles = 50 * torch.rand(tokens, head_dim // 2, device=device, generator=generator)
    cos, sin = angles.cos(), angles.sin()
    caches = {
        name: torch.zeros(2, batch, context, heads, head_dim, device=device, dtype=torch.bfloat16)
        for name in ('eager', 'compiled', 'triton')
    }

    attention = SelfAttention(dim, heads, qk_norm=True, eps=eps).to(device, torch.bfloat16)
    attention.requires_grad_(False)
    attention.norm_q.weight.data.copy_(weight_q)
    attention.norm_k.weight.data.copy_(weight_k)
    rotary = Rotary(cos, sin)

    def torch_stage(qkv: torch.Tensor, k_out: torch.Tensor, v_out: torch.Tensor) -> torch.Tensor:
        """The reference block's torch path: norms, rotary embedding, cache write."""
        q, k, v = attention.normalize_and_rotate(*qkv.chunk(3, dim=-1), rotary)
        k_out.copy_(k)
        v_out.copy_(v)
        return q

    def triton_stage(qkv: torch.Tensor, k_out: torch.Tensor, v_out: torch.Tensor) -> torch.Tensor:
        return qk_rope_kernel.qk_norm_rope_into_cache(
            qkv, weight_q, weight_k, cos, sin, heads, eps, k_out, v_out
        )

    stages = {
        'eager': torch_stage,
        'compiled': torch.compile(torch_stage, dynamic=False, fullgraph=True),
        'triton': triton_stage,
    }
    moved = 2 * qkv.numel() * qkv.element_size()
    shape = f'{batch} x {tokens} tokens, {heads} x {head_dim}'
    print(f'\nQK RMSNorm + rotary + K/V cache write, {shape}')
    result, outputs = {}, {}
    for label, stage in stages.items():
        cache = caches[label]
        slots = cache[0, :, context - tokens :], cache[1, :, context - tokens :]

        def call(stage: Any = stage, slots: tuple = slots) -> torch.Tensor:
            return stage(qkv, *slots)

        outputs[label] = (call(), *slots)
        ms = graph_ms(device, call, 50, repeats)
        row = {'ms': ms, 'tb_s': moved / ms / 1e9}
        if label != 'eager':
            for name, mine, ref in zip('qkv', outputs[label], outputs['eager'], strict=True):
                delta = (mine.float() - ref.float()).abs()
                row[f'{name}_max_abs'] = float(delta.max())
                row[f'{name}_differing'] = float((delta > 0).float().mean())
        result[label] = row
        details = ', '.join(f'{k} {v:.3g}' for k, v in row.items() if k not in ('ms', 'tb_s'))
        print(f'  {label:<9}: {ms:.4f} ms (median), {row["tb_s"]:.2f} TB/s  {details}')
    return result
