# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-call error of FP8 attention against the bf16 path, on the engine's own activations.

Builds the engine (default: the 14B DROID architecture with random weights) with
``attention_backend: fp8`` and ``kv_cache: fp8``, runs a few chunks, and for every
self-attention call over the FP8 K/V cache computes the output twice: through the FP8 kernel
(what the chunk uses) and through the dequantizing path (the cached tokens dequantized into bf16,
then cuDNN: what ``kv_cache: fp8`` computes without FP8 attention).  Prints, over the calls,
the distribution of the relative rms error (rms of the difference over the rms of the bf16
output) and of the largest absolute difference, overall and for the calls with and without
cached tokens.

    python benchmarks/fp8_attention_error.py --chunks 4
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.memory.options import MemoryConfig
from dreamzero_ros.engine.model import attention
from dreamzero_ros.engine.model.config import EngineConfig
from dreamzero_ros.engine.model.kv_cache import LayerKV
from dreamzero_ros.engine.model.pipeline import DreamZeroEngine
from dreamzero_ros.engine.speed.acceleration import AccelerationConfig


def _probe(calls: list[dict]) -> None:
    """Make ``LayerKV.attend_written`` also compute the bf16 path and record the error.

    (The blocks run eagerly, so that the probe runs: the attention op runs eagerly either way.)
    """
    attend = LayerKV.attend_written

    def probed(kv: LayerKV, q: torch.Tensor) -> torch.Tensor:
        out = attend(kv, q)
        if kv.k_fp8 is not None and kv.v_fp8 is not None:
            cached = kv.k_fp8.shape[1]
            k, v = kv.k.clone(), kv.v.clone()  # the cached tokens dequantized, then bf16
            k[:, :cached] = (kv.k_fp8.float() * kv.k_scale.float()).to(k.dtype)
            v[:, :cached] = (kv.v_fp8.float() * kv.v_scale.float()).to(v.dtype)
            with attention.attention_kernel('cudnn'):
                reference = attention.attention(q, k, v)
            diff = out.float() - reference.float()
            calls.append(
                {
                    'cached': cached,
                    'rel_rms': float(
                        diff.pow(2).mean().sqrt() / reference.float().pow(2).mean().sqrt()
                    ),
                    'max_abs': float(diff.abs().max()),
                    'ref_max': float(reference.float().abs().max()),
                }
            )
        return out

    LayerKV.attend_written = probed


def _line(name: str, calls: list[dict]) -> str:
    rel = np.array([c['rel_rms'] for c in calls])
    mx = np.array([c['max_abs'] for c in calls])
    return (
        f'{name:<18} {len(calls):>5} calls: rel rms median {np.median(rel):.4f} '
        f'p99 {np.percentile(rel, 99):.4f} max {rel.max():.4f}; max |d| median '
        f'{np.median(mx):.4f} max {mx.max():.4f} (largest |bf16 output| '
        f'{max(c["ref_max"] for c in calls):.3g})'
    )


def main() -> None:
    """Run the chunks and print the error distribution (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--preset', default='droid_14b')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--chunks', type=int, default=4, help='chunks (one context window: 4)')
    args = parser.parse_args()
    config = EngineConfig.preset(
        args.preset,
        device=args.device,
        acceleration=AccelerationConfig(fp8_linear='rowwise', attention_backend='fp8'),
        memory=MemoryConfig(kv_cache='fp8'),
    )
    engine = DreamZeroEngine.from_config(config, seed=0)
    calls: list[dict] = []
    _probe(calls)
    for step in range(1, args.chunks + 1):
        engine.infer(random_observation(seed=step % 7, session_id='error', stamp=step / 15))
    print(f'FP8 attention vs dequantize + cuDNN, {args.preset}, {args.chunks} chunks')
    print(_line('all', calls))
    for name, group in (
        ('with cached tokens', [c for c in calls if c['cached']]),
        ('no cached tokens', [c for c in calls if not c['cached']]),
    ):
        if group:
            print(_line(name, group))
    cached = sorted({c['cached'] for c in calls})
    print(
        'cached tokens per call: '
        + ', '.join(
            f'{n}: rel rms {statistics.fmean(c["rel_rms"] for c in calls if c["cached"] == n):.4f}'
            for n in cached
        )
    )
    engine.close()


if __name__ == '__main__':
    main()
