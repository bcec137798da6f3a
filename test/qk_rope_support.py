# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Runs the Triton QK kernel under Triton's CPU interpreter; prints its checks as JSON.

Started by ``test_engine_qk_rope_kernel.py`` with ``TRITON_INTERPRET=1`` (Triton reads it when the
kernel is defined, so it must be set before the engine is imported).
"""

import json
import sys

import torch

sys.path.insert(0, __file__.rsplit('/', 1)[0])

import copy  # noqa: E402

from dit_support import call_inputs, make_dit, rel, run_call, transformed  # noqa: E402

from dreamzero_ros.engine.networks.dit_block import SelfAttention  # noqa: E402
from dreamzero_ros.engine.networks.rope import Rotary  # noqa: E402
from dreamzero_ros.engine.speed.qk_rope_kernel import qk_norm_rope_into_cache  # noqa: E402

EPS = 1e-6


def kernel_against_torch(dtype: torch.dtype) -> dict:
    """The kernel on 2 x 5 tokens of 3 heads x 8 (12 pairs: a masked block) vs the torch path."""
    batch, tokens, heads, head_dim, start = 2, 5, 3, 8, 2
    dim = heads * head_dim
    g = torch.Generator().manual_seed(0)
    qkv = (3 * torch.randn(batch, tokens, 3 * dim, generator=g)).to(dtype)
    weight_q, weight_k = (0.5 + torch.rand(2, dim, generator=g)).to(dtype)
    angles = 20 * torch.rand(tokens, head_dim // 2, generator=g)
    cos, sin = angles.cos(), angles.sin()
    cache_k = torch.full((batch, tokens + 4, heads, head_dim), 7.0, dtype=dtype)
    cache_v = cache_k.clone()
    slots = cache_k[:, start : start + tokens], cache_v[:, start : start + tokens]
    q = qk_norm_rope_into_cache(qkv, weight_q, weight_k, cos, sin, heads, EPS, *slots)

    attention = SelfAttention(dim, heads, qk_norm=True, eps=EPS).to(dtype)
    attention.norm_q.weight.data.copy_(weight_q)
    attention.norm_k.weight.data.copy_(weight_k)
    with torch.no_grad():
        ref_q, ref_k, ref_v = attention.normalize_and_rotate(*qkv.chunk(3, -1), Rotary(cos, sin))
    outside = torch.cat([cache_k[:, :start], cache_k[:, start + tokens :], cache_v[:, :start]])
    return {
        'q_max_abs': float((q.float() - ref_q.float()).abs().max()),
        'k_max_abs': float((slots[0].float() - ref_k.float()).abs().max()),
        'v_equal': torch.equal(slots[1], ref_v),
        'outside_untouched': bool((outside == 7).all()),
        'q_shape': list(q.shape),
        'ref_max_abs': float(ref_q.float().abs().max()),
    }


def runner_against_reference() -> dict:
    """One prefill + denoising call of the tiny DiT: the transformed blocks (kernel) vs reference.

    Eager, and compiled by inductor (the kernel an op of the block's graph that writes into the
    cache's slots).
    """
    dit = make_dit()
    x = call_inputs(dit)
    reference, ref_cache = run_call(dit, x)
    end = ref_cache.length
    checks = {}
    for name, backend in (('eager', None), ('inductor', 'inductor')):
        model = copy.deepcopy(dit)
        runs = transformed(model, backend)
        out, cache = run_call(model, x, runs)
        checks[name] = {
            'uses_kernel': all(block.self_attn.qk_kernel for block in model.blocks),
            'video_rel': rel(out.video, reference.video),
            'action_rel': rel(out.action, reference.action),
            'cache_k_max_abs': float((cache.k[:, :, :end] - ref_cache.k[:, :, :end]).abs().max()),
            'cache_v_max_abs': float((cache.v[:, :, :end] - ref_cache.v[:, :, :end]).abs().max()),
        }
    return checks


def opcheck() -> dict:
    """``torch.library.opcheck`` of the kernel op (fake implementation, mutations, schema)."""
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 5, 3 * 16, generator=g)
    weight = 0.5 + torch.rand(16, generator=g)
    table = torch.rand(5, 4, generator=g)
    cache = torch.zeros(2, 2, 9, 2, 8)
    args = (qkv, weight, weight, table, table, 2, EPS, cache[0, :, 3:8], cache[1, :, 3:8])
    result = torch.library.opcheck(torch.ops.dreamzero.qk_norm_rope_into_cache.default, args)
    return {name: outcome == 'SUCCESS' for name, outcome in result.items()}


def refusals() -> dict:
    """Messages of the kernel's input checks."""
    qkv = torch.zeros(1, 4, 3 * 16)
    slot = torch.zeros(1, 4, 2, 8)
    table = torch.zeros(4, 4)
    messages = {}
    cases = {
        'strided_qkv': (qkv[:, ::2], slot[:, ::2], slot[:, ::2], table[::2]),
        'wrong_slot': (qkv, torch.zeros(1, 4, 4, 4), slot, table),
        'wrong_table': (qkv, slot, slot, torch.zeros(4, 8)),
        'wrong_weight': (qkv, slot, slot, table),
    }
    weight = torch.ones(16)
    for name, (q, k_out, v_out, cos) in cases.items():
        try:
            norm = weight[:8] if name == 'wrong_weight' else weight
            qk_norm_rope_into_cache(q, norm, norm, cos, cos, 2, EPS, k_out, v_out)
        except ValueError as error:
            messages[name] = str(error)
    return messages


if __name__ == '__main__':
    torch.set_num_threads(1)
    print(
        json.dumps(
            {
                'float32': kernel_against_torch(torch.float32),
                'bfloat16': kernel_against_torch(torch.bfloat16),
                'runner': runner_against_reference(),
                'opcheck': opcheck(),
                'refusals': refusals(),
            }
        )
    )
