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
cached tokens.  ``--configs`` names kernel configurations of ``micro_fp8_attention.py`` by their
index there (default: the token-major default, 0); every call is computed with each, the chunk
goes on with the first one's output.

    python benchmarks/fp8_attention_error.py --chunks 4 --configs 0 3 10
"""

from __future__ import annotations

import argparse
import statistics

from micro_fp8_attention import CONFIGS
import numpy as np
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.memory.options import MemoryConfig
from dreamzero_ros.engine.model import attention
from dreamzero_ros.engine.model.config import EngineConfig
from dreamzero_ros.engine.model.kv_cache import LayerKV
from dreamzero_ros.engine.model.pipeline import DreamZeroEngine
from dreamzero_ros.engine.speed.acceleration import AccelerationConfig
from dreamzero_ros.engine.speed.fp8_attention_kernel import KernelConfig, kernel_config


def _probe(calls: list[dict], configs: list[KernelConfig]) -> None:
    """Make ``LayerKV.attend_written`` record each configuration's error against the bf16 path.

    It returns the first configuration's output.  (The blocks run eagerly, so that the probe
    runs: the attention op runs eagerly either way.)
    """
    attend = LayerKV.attend_written

    def probed(kv: LayerKV, q: torch.Tensor) -> torch.Tensor:
        if kv.k_fp8 is None or kv.v_fp8 is None or kv.k_scale is None or kv.v_scale is None:
            return attend(kv, q)
        cached = kv.k_fp8.shape[1]
        k, v = kv.k.clone(), kv.v.clone()  # the cached tokens dequantized, then bf16
        k[:, :cached] = (kv.k_fp8.float() * kv.k_scale.float()).to(k.dtype)
        v[:, :cached] = (kv.v_fp8.float() * kv.v_scale.float()).to(v.dtype)
        with attention.attention_kernel('cudnn'):
            reference = attention.attention(q, k, v)
        outputs = []
        for config in configs:
            kernel_config(config)
            outputs.append(attend(kv, q))
            diff = outputs[-1].float() - reference.float()
            calls.append(
                {
                    'config': config.name,
                    'cached': cached,
                    'rel_rms': float(
                        diff.pow(2).mean().sqrt() / reference.float().pow(2).mean().sqrt()
                    ),
                    'max_abs': float(diff.abs().max()),
                    'ref_max': float(reference.float().abs().max()),
                }
            )
        kernel_config(configs[0])
        return outputs[0]

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
    parser.add_argument(
        '--configs',
        type=int,
        nargs='+',
        default=[0],
        choices=range(len(CONFIGS)),
        help='kernel configurations, by index in micro_fp8_attention.CONFIGS: '
        + '; '.join(f'{i}: {c.name}' for i, c in enumerate(CONFIGS)),
    )
    args = parser.parse_args()
    configs = [CONFIGS[i] for i in args.configs]
    config = EngineConfig.preset(
        args.preset,
        device=args.device,
        acceleration=AccelerationConfig(fp8_linear='rowwise', attention_backend='fp8'),
        memory=MemoryConfig(kv_cache='fp8'),
    )
    engine = DreamZeroEngine.from_config(config, seed=0)
    calls: list[dict] = []
    _probe(calls, configs)
    kernel_config(configs[0])
    for step in range(1, args.chunks + 1):
        engine.infer(random_observation(seed=step % 7, session_id='error', stamp=step / 15))
    for config in configs:
        ours = [c for c in calls if c['config'] == config.name]
        print(f'{config.name} vs dequantize + cuDNN, {args.preset}, {args.chunks} chunks')
        print(_line('all', ours))
        for name, group in (
            ('with cached tokens', [c for c in ours if c['cached']]),
            ('no cached tokens', [c for c in ours if not c['cached']]),
        ):
            if group:
                print(_line(name, group))
        cached = sorted({c['cached'] for c in ours})
        print(
            'cached tokens per call: '
            + ', '.join(
                f'{n}: rel rms '
                f'{statistics.fmean(c["rel_rms"] for c in ours if c["cached"] == n):.4f}'
                for n in cached
            )
        )
    engine.close()


if __name__ == '__main__':
    main()
