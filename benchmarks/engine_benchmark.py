# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-chunk latency of the DreamZero engine with random weights.

Builds the engine of a preset (default: the published 14B DROID architecture) directly on the
device in the target dtype with seeded random weights, feeds it a steady stream of DROID
observations of one session, and prints per chunk the inputs / encode / prefill / denoise /
decode / total milliseconds (``inputs``: cropping, resizing and stitching the camera views and
the upload), the DiT FLOPs actually computed (counted analytically from the shapes), the
DiT throughput of the denoising loop, and the peak memory.  Chunks cycle through context windows
(a new window every ``max_chunk_size`` chunks encodes the conditioning frame with CLIP and the
VAE), so the summary reports new-window and continuing chunks separately and their mean over a
whole window cycle, the per-chunk cost a robot sees.

One process: both CFG branches as one batch.  Under ``torchrun --nproc_per_node 2`` rank 0 runs
the conditional branch and rank 1 the unconditional one (CFG parallel); rank 0 prints.

Several *variants* (engine settings) run one after another on the same weights; each is timed
over the same observation stream, so their actions can be compared chunk by chunk.  The first
variant is the baseline of the printed ratios; every variant's actions are compared with the
first variant of the same step-cache mode and, for an FP8 variant, with the variant that differs
from it only in ``fp8_linear``.  Named variants (``--variants``) add up the speed options:

* ``eager``: the reference path (torch picks the attention kernel, no compilation, bf16);
* ``attention``: ``attention_backend=--attention`` (default cudnn);
* ``compile``: that plus ``compile=True``;
* ``dynamic``: that plus the dynamic step cache;
* ``fp8``: ``compile`` plus ``fp8_linear=--fp8`` (default rowwise);
* ``fp8-dynamic``: that plus the dynamic step cache;
* ``dynamic-min`` / ``fp8-dynamic-min``: the dynamic cache at its fewest DiT calls (see below);
* ``eager-r1``, ``compile-r1``, ``fp8-r1``: ``eager``, ``compile``, ``fp8`` with the second
  and third rounds' options off (the full last DiT call, per-token AdaLN gathers, separate K/V
  cache copies, the VAE encoder 4 frames per pass in the default memory layout, views prepared
  on the host, GELU after the FFN product);
* ``eager-r2``, ``compile-r2``, ``fp8-r2``: the same with the third and fourth rounds' options
  off (views prepared on the host, the GELU kernel after the FFN product, the VAE encoder
  uncompiled and all frames of a call in one pass, as the second round left it);
* ``eager-r3``, ``compile-r3``, ``fp8-r3``: the fourth round's option off (QK norm, rotary
  embedding and K/V write compiled by inductor instead of the Triton kernel).

``label:key=value,...`` defines another (keys: ``step_cache``, ``compile``, ``fp8_linear``,
``attention_backend``, ``skip_final_uncond``, ``uniform_modulation``, ``fused_kv_write``,
``gelu_epilogue``, ``vae_frames_per_pass``, ``vae_channels_last``, ``vae_compile``,
``inputs_on_device``, ``triton_qk_rope``).  Without ``--variants`` one variant runs per
``--step-cache`` mode.
``--vae`` first times the VAE encoder alone with each of its options, ``--inputs`` the view
preparation on the host and on the device (and how far their uint8 frames differ), ``--gelu``
the FFN input product with the GELU kernel after it and with GELU in its epilogue,
``--qk-rope`` QK norm + rotary embedding + K/V cache write eager, compiled and as the Triton
kernel, ``--fa3`` the DiT's attention calls through cuDNN and FlashAttention-3.

Examples::

    python benchmarks/engine_benchmark.py                       # 14B, 1 GPU, bf16
    python benchmarks/engine_benchmark.py --step-cache full static dynamic
    python benchmarks/engine_benchmark.py --variants eager attention compile dynamic fp8 fp8-dynamic
    torchrun --nproc_per_node 2 benchmarks/engine_benchmark.py  # 14B, CFG parallel on 2 GPUs
    python benchmarks/engine_benchmark.py --preset tiny --device cpu --warmup 1 --repeats 3
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import functools
import json
import math
import os
import resource
import statistics
import sys
import time
import traceback
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.dit import DiTConfig
from dreamzero_ros.engine.step_cache import StepCacheConfig
from dreamzero_ros.engine.synthetic_droid import random_observation
from dreamzero_ros.policy_types import DROID_CAMERAS


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
    text = engine.config.text_encoder.text_len
    image = engine.config.image_encoder.num_tokens
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


def peak_memory_gib(device: torch.device) -> float:
    """Peak allocated device memory (CUDA) or peak resident set size (CPU), GiB."""
    if device.type == 'cuda':
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--preset', default='droid_14b', help='droid_14b, small or tiny')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--dtype', default='bfloat16', help='bfloat16, float16 or float32')
    parser.add_argument('--steps', type=int, default=16, help='UniPC steps per chunk')
    parser.add_argument(
        '--step-cache',
        nargs='+',
        default=['static'],
        choices=('full', 'static', 'dynamic', 'dynamic-min'),
        help='DiT step schedule(s); several run one after another on the same weights and '
        'are compared with the first',
    )
    parser.add_argument('--dit-steps', type=int, default=8, help='DiT steps of the static cache')
    parser.add_argument(
        '--variants',
        nargs='+',
        help='engine settings to compare (see the module docstring); overrides --step-cache',
    )
    parser.add_argument(
        '--attention', default='cudnn', help='attention_backend of the named variants'
    )
    parser.add_argument('--fp8', default='rowwise', help='fp8_linear of the named FP8 variants')
    parser.add_argument('--profile', help='append torch.profiler kernel tables to this file')
    parser.add_argument(
        '--profile-variants',
        nargs='*',
        default=[],
        help='variants of which one more chunk is profiled (default: none)',
    )
    parser.add_argument(
        '--time-budget',
        type=float,
        default=0.0,
        help='skip the variants that would start after this many seconds (0: no limit)',
    )
    parser.add_argument('--cfg-scale', type=float, default=5.0)
    parser.add_argument('--warmup', type=int, default=2, help='chunks before timing')
    parser.add_argument('--repeats', type=int, default=8, help='timed chunks per schedule')
    parser.add_argument(
        '--baseline-repeats',
        type=int,
        help='timed chunks of the first variant (default: --repeats); a multiple of '
        'max_chunk_size keeps whole context windows',
    )
    parser.add_argument(
        '--vae', action='store_true', help='first time the VAE encoder alone with its options'
    )
    parser.add_argument(
        '--inputs',
        action='store_true',
        help='first time the view preparation on the host and on the device',
    )
    parser.add_argument(
        '--gelu',
        action='store_true',
        help='first time the FFN input product with GELU after it and in its epilogue (CUDA)',
    )
    parser.add_argument(
        '--qk-rope',
        action='store_true',
        help='first time QK norm + rotary + K/V write: eager, compiled, Triton kernel (CUDA)',
    )
    parser.add_argument(
        '--fa3',
        action='store_true',
        help='first time self- and cross-attention: cuDNN vs FlashAttention-3 (CUDA, flash_attn_3)',
    )
    parser.add_argument('--seed', type=int, default=0, help='weight seed')
    parser.add_argument('--threads', type=int, help='torch CPU threads')
    parser.add_argument('--json', help='also write the results to this JSON file')
    return parser.parse_args(argv)


#: Named variants: EngineConfig changes, with ``attention`` / ``fp8`` filled from the options.
NAMED_VARIANTS: dict[str, dict[str, Any]] = {
    'eager': {},
    'attention': {'attention_backend': 'ATTENTION'},
    'compile': {'attention_backend': 'ATTENTION', 'compile': True},
    'dynamic': {'attention_backend': 'ATTENTION', 'compile': True, 'step_cache': 'dynamic'},
    'fp8': {'attention_backend': 'ATTENTION', 'compile': True, 'fp8_linear': 'FP8'},
    'fp8-dynamic': {
        'attention_backend': 'ATTENTION',
        'compile': True,
        'fp8_linear': 'FP8',
        'step_cache': 'dynamic',
    },
    'dynamic-min': {'attention_backend': 'ATTENTION', 'compile': True, 'step_cache': 'dynamic-min'},
    'fp8-dynamic-min': {
        'attention_backend': 'ATTENTION',
        'compile': True,
        'fp8_linear': 'FP8',
        'step_cache': 'dynamic-min',
    },
}
#: The third round's options, off.
ROUND3 = {'gelu_epilogue': False, 'vae_compile': False, 'inputs_on_device': False}
#: The fourth round's option, off.
ROUND4 = {'triton_qk_rope': False}
#: The options of rounds 2 to 4, off (as the first round measured).
ROUND1 = {
    'skip_final_uncond': False,
    'uniform_modulation': False,
    'fused_kv_write': False,
    'vae_frames_per_pass': 4,
    'vae_channels_last': False,
    **ROUND3,
    **ROUND4,
}
for _name in ('eager', 'compile', 'fp8'):
    NAMED_VARIANTS[f'{_name}-r1'] = {**NAMED_VARIANTS[_name], **ROUND1}
    # Round 2 encoded all frames of a call in one pass when compiling.
    _frames = 0 if NAMED_VARIANTS[_name].get('compile') else 4
    NAMED_VARIANTS[f'{_name}-r2'] = {
        **NAMED_VARIANTS[_name],
        **ROUND3,
        **ROUND4,
        'vae_frames_per_pass': _frames,
    }
    NAMED_VARIANTS[f'{_name}-r3'] = {**NAMED_VARIANTS[_name], **ROUND4}
#: ``dynamic-min``: the dynamic schedule with every similarity test passed, i.e. its fewest DiT
#: calls (4 of 16: steps 0, 1, 6, 11) -- what a trained model whose successive velocities agree
#: gets; random weights never pass upstream's 0.93 test, so they run all 16 steps.
DYNAMIC_MIN = StepCacheConfig(mode='dynamic', thresholds=(-2.0,), countdowns=(4,))
_VARIANT_KEYS = ('step_cache', 'compile', 'fp8_linear', 'attention_backend', *ROUND1)


def _setting(text: str) -> bool | int | str:
    lowered = text.lower()
    if lowered in ('true', 'on', 'yes'):
        return True
    if lowered in ('false', 'no'):
        return False
    if lowered.isdigit():
        return int(lowered)
    return text


def parse_variants(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """``(label, settings)`` of every variant; settings are EngineConfig changes."""
    if not args.variants:
        return [
            (f'static-{args.dit_steps}' if mode == 'static' else mode, {'step_cache': mode})
            for mode in args.step_cache
        ]
    variants = []
    for spec in args.variants:
        if ':' in spec:
            label, _, body = spec.partition(':')
            settings: dict[str, Any] = {}
            for item in filter(None, body.split(',')):
                key, _, value = item.partition('=')
                if key not in _VARIANT_KEYS:
                    raise SystemExit(f'unknown variant setting {key!r} (known: {_VARIANT_KEYS})')
                settings[key] = _setting(value)
        elif spec in NAMED_VARIANTS:
            label = spec
            settings = {
                key: {'ATTENTION': args.attention, 'FP8': args.fp8}.get(value, value)
                for key, value in NAMED_VARIANTS[spec].items()
            }
        else:
            raise SystemExit(f'unknown variant {spec!r}: {sorted(NAMED_VARIANTS)} or label:k=v,...')
        variants.append((label, settings))
    return variants


def variant_config(base: EngineConfig, settings: dict[str, Any], dit_steps: int) -> EngineConfig:
    """``base`` with a variant's settings (the step cache by mode name, or ``dynamic-min``)."""
    changes = dict(settings)
    mode = changes.pop('step_cache', base.step_cache.mode)
    if mode == 'dynamic-min':
        changes['step_cache'] = DYNAMIC_MIN
    else:
        changes['step_cache'] = StepCacheConfig(mode=mode, dit_steps=dit_steps)
    return base.replace(**changes)


def _timed_ms(device: torch.device, fn: Any, repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` calls of ``fn`` (device-synchronised)."""
    times = []
    for _ in range(repeats):
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        fn()
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - begin) * 1e3)
    return times


#: VAE encoder options timed by ``--vae``: (frames per pass, channels_last_3d, compiled norms).
VAE_OPTIONS = (
    (4, False, False),
    (0, False, False),
    (4, True, False),
    (0, True, False),
    (4, True, True),
    (0, True, True),
)


def vae_benchmark(engine: DreamZeroEngine, repeats: int = 5) -> list[dict]:
    """Time the VAE encoder on a continuing chunk's and a new window's video, per option.

    Options: frames per pass (4 = upstream, 0 = all after the first in one pass), the
    ``channels_last_3d`` layout and the compiled norm/SiLU/padding kernels; cuDNN picks its
    fastest kernels (as with ``compile``).  Also reports each option's largest latent difference
    from the 4-frame, default-layout encoding, and the peak memory of the encoding alone.
    """
    device, vae = engine.device, engine.modules.vae
    if device.type == 'cuda':
        torch.backends.cudnn.benchmark = True
    backend = engine.config.acceleration.compile_backend or 'inductor'
    height, width = engine.config.view.stitched_size
    generator = torch.Generator(device).manual_seed(0)
    results = []
    print(f'\nVAE encoder, {height}x{width} frames, mean of {repeats} (ms)')
    for frames in (9, engine.config.num_frames):
        video = torch.rand(1, 3, frames, height, width, device=device, generator=generator)
        video = (video * 2 - 1).to(engine.config.torch_dtype)
        reference = None
        for per_pass, channels_last, fused in VAE_OPTIONS:
            options = (per_pass, channels_last, backend if fused else None)
            begin = time.perf_counter()
            latents = vae.encode(video, *options)  # warm-up / autotune / compile
            first_s = time.perf_counter() - begin
            if reference is None:
                reference = latents.float()
            base = 0
            if device.type == 'cuda':
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
                base = torch.cuda.memory_allocated(device)
            times = _timed_ms(device, lambda v=video, o=options: vae.encode(v, *o), repeats)
            extra = (torch.cuda.max_memory_allocated(device) - base) / 2**30 if base else 0.0
            row = {
                'frames': frames,
                'frames_per_pass': per_pass,
                'channels_last': channels_last,
                'compiled': fused,
                'ms': statistics.fmean(times),
                'first_call_s': first_s,
                'activation_gib': extra,
                'max_abs_diff': float((latents.float() - reference).abs().max()),
            }
            results.append(row)
            print(
                f'  {frames:>2} frames, {"all" if per_pass == 0 else per_pass:>3} per pass, '
                f'{"channels_last_3d" if channels_last else "contiguous":<16}'
                f'{", compiled norms" if fused else "":<16}: {row["ms"]:7.1f} ms, '
                f'activations {extra:5.2f} GiB, first call {first_s:5.1f} s, '
                f'max |d latent| {row["max_abs_diff"]:.3g}'
            )
    return results


def inputs_benchmark(engine: DreamZeroEngine, repeats: int = 20) -> dict:
    """The view preparation on the host and on the engine's device: time and uint8 agreement.

    Per frame count (1: a session's first call, 4: the others) it times the host path (crop,
    resize and stitch on the CPU, then the upload) and the device path (upload, then the same
    operations on the device); ``host`` is the time until the call returns, ``synced`` with
    the device caught up.  Agreement is counted on smooth noisy images, flat ones (every pixel
    200, which lands a hair below 200 in float32 before the truncation) and gradients.
    """
    from dreamzero_ros.engine.droid_inputs import prepare_views, to_model_video

    device, geometry, dtype = engine.device, engine.config.view, engine.config.torch_dtype
    cpu = torch.device('cpu')
    rows = {}
    print(f'\nview preparation ({", ".join(map(str, geometry.source_size))} -> stitched), ms')
    for frames in (1, 4):
        clips = random_observation(seed=frames, frames=frames).images
        for label, where in (('host', cpu), ('device', device)):

            def run(where: torch.device = where, clips: dict = clips) -> torch.Tensor:
                return to_model_video(prepare_views(clips, geometry, where), device, dtype)

            run()
            host = []
            for _ in range(repeats):
                if device.type == 'cuda':
                    torch.cuda.synchronize(device)
                begin = time.perf_counter()
                run()
                host.append((time.perf_counter() - begin) * 1e3)
            synced = _timed_ms(device, run, repeats)
            rows[f'{label}-{frames}'] = {
                'host_ms': statistics.median(host),
                'synced_ms': statistics.median(synced),
            }
            print(
                f'  {frames} frame(s) per view, prepared on the {label:<6}: '
                f'host {statistics.median(host):6.2f} ms, synced {statistics.median(synced):6.2f}'
                ' ms (medians)'
            )
    height, width = geometry.source_size
    flat = np.full((4, height, width, 3), 200, np.uint8)
    ramp = np.linspace(0, 255, width, dtype=np.float64)[None, None, :, None]
    ramp = np.broadcast_to(ramp, (4, height, width, 3)).astype(np.uint8)
    samples = {
        'smooth noisy': [random_observation(seed=s, frames=4).images for s in range(8)],
        'flat 200': [dict.fromkeys(DROID_CAMERAS, flat)],
        'gradient': [dict.fromkeys(DROID_CAMERAS, ramp)],
    }
    agreement = {}
    for name, clip_sets in samples.items():
        differ = total = largest = 0
        for clips in clip_sets:
            on_host = prepare_views(clips, geometry, cpu).int()
            on_device = prepare_views(clips, geometry, device).cpu().int()
            delta = (on_device - on_host).abs()
            differ += int((delta > 0).sum())
            total += delta.numel()
            largest = max(largest, int(delta.max()))
        agreement[name] = {'differing': differ, 'values': total, 'max_abs': largest}
        print(
            f'  {name:<12}: {differ} of {total} uint8 values differ between host and device '
            f'({differ / total:.2e}), by at most {largest}'
        )
    return {'timing': rows, 'agreement': agreement}


def gelu_benchmark(device: torch.device, repeats: int = 20) -> dict:
    """The DiT's FFN input product (3570 x 13824 x 5120) with GELU after it and in its epilogue.

    Times both (CUDA, bf16) and compares each with the float32 result of the same bf16 inputs.
    """
    if device.type != 'cuda':
        return {}
    from dreamzero_ros.engine.fast_blocks import _linear_gelu

    generator = torch.Generator(device).manual_seed(0)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        values = torch.randn(*shape, device=device, generator=generator) * scale
        return values.to(torch.bfloat16)

    x, weight, bias = randn(3570, 5120), randn(13824, 5120, scale=0.02), randn(13824, scale=0.1)
    exact = F.gelu(F.linear(x.float(), weight.float(), bias.float()), approximate='tanh')
    result = {}
    print('\nFFN input product 3570 x 13824 x 5120, bf16, with tanh GELU')
    for label, epilogue in (('separate GELU', False), ('GELU epilogue', True)):

        def call(epilogue: bool = epilogue) -> torch.Tensor:
            return _linear_gelu(x, (weight, None, bias), epilogue)

        out = call()
        _timed_ms(device, call, 5)
        times = _timed_ms(device, call, repeats)
        error = float((out.float() - exact).norm() / exact.norm())
        result[label] = {'ms': statistics.median(times), 'rel_error': error}
        print(f'  {label}: {statistics.median(times):.3f} ms (median), rel. error {error:.2e}')
    return result


def _graph_ms(device: torch.device, fn: Any, calls: int, repeats: int) -> float:
    """Median GPU milliseconds of one ``fn()``, replayed from a CUDA graph of ``calls`` calls."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm up outside the capture, on a side stream
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    return statistics.median(_timed_ms(device, graph.replay, repeats)) / calls


def qk_rope_benchmark(device: torch.device, repeats: int = 20) -> dict:
    """QK RMSNorm, rotary embedding and K/V cache write of one 14B block call, three ways.

    2 x 1785 tokens of 40 x 128 after the q/k/v product: eager torch (the reference), the same
    compiled (the fast runner before round 4) and the Triton kernel; GPU time per call (medians
    of a CUDA graph of 50 calls, so no launch overhead), the memory rate of the minimal traffic
    (q/k/v read once, q/k/v written once) and the differences from eager.
    """
    from dreamzero_ros.engine import qk_rope_kernel
    from dreamzero_ros.engine.fast_blocks import qk_norm_rope

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

    def torch_stage(qkv: torch.Tensor, k_out: torch.Tensor, v_out: torch.Tensor) -> torch.Tensor:
        """The fast runner's torch path (round 3)."""
        return qk_norm_rope(qkv, weight_q, weight_k, cos, sin, heads, eps, k_out, v_out)[0]

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
        ms = _graph_ms(device, call, 50, repeats)
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


def _repeat(fn: Any, args: tuple, count: int) -> None:
    for _ in range(count):
        fn(*args)


def fa3_benchmark(device: torch.device, repeats: int = 20) -> dict:
    """The DiT's attention calls through cuDNN and through FlashAttention-3.

    2 x 1785 queries, 40 heads of 128: self-attention over a new window's first context
    (2665 keys) up to a full window (7945), cross-attention over 512 text / 257 image tokens;
    median ms per call (host-timed, device-synchronised, over 10 back-to-back calls), TFLOP/s
    and each kernel's largest difference from float32 attention of the same bf16 inputs.
    """
    from dreamzero_ros.engine.attention import attention_kernel, sdpa

    if device.type != 'cuda':
        return {}
    batch, queries, heads, head_dim = 2, 1785, 40, 128
    generator = torch.Generator(device).manual_seed(0)

    def randn(length: int) -> torch.Tensor:
        shape = (batch, length, heads, head_dim)
        return torch.randn(*shape, device=device, generator=generator).bfloat16()

    print(f'\nattention, {batch} x {queries} queries, {heads} x {head_dim}: cuDNN vs FA3')
    result = {}
    for keys in (2665, 5305, 7945, 512, 257):
        q, k, v = randn(queries), randn(keys), randn(keys)
        exact = sdpa(q.float(), k.float(), v.float())
        flops = 4 * batch * heads * queries * keys * head_dim
        row = {}
        for name in ('cudnn', 'fa3'):
            with attention_kernel(name):
                out = sdpa(q, k, v)
                calls = functools.partial(_repeat, sdpa, (q, k, v), 10)
                times = _timed_ms(device, calls, repeats)
            ms = statistics.median(times) / 10
            error = float((out.float() - exact).abs().max())
            row[name] = {'ms': ms, 'tflops': flops / ms / 1e9, 'max_abs_vs_float32': error}
        result[keys] = row
        print(
            f'  {keys:>5} keys: '
            + ', '.join(
                f'{n} {r["ms"]:.4f} ms {r["tflops"]:.0f} TFLOP/s |d| {r["max_abs_vs_float32"]:.3g}'
                for n, r in row.items()
            )
            + f', fa3/cudnn {row["fa3"]["ms"] / row["cudnn"]["ms"]:.3f}'
        )
    return result


def run_schedule(
    engine: DreamZeroEngine, args: argparse.Namespace, rows: int, label: str, repeats: int
) -> dict:
    """Warm up, then time ``args.repeats`` chunks; print one line per chunk.

    Every variant sees the same observations (same seeds, a fresh session), so the actions of two
    variants are comparable chunk by chunk.
    """
    device = engine.device
    session = f'bench-{label}'
    engine.reset(session)
    step = 0
    actions: list[list[list[float]]] = []
    motion: list[float] = []

    def infer() -> Any:
        nonlocal step
        step += 1
        observation = random_observation(seed=step % 7, session_id=session, stamp=step / 15)
        chunk = engine.infer(observation)
        actions.append(chunk.actions.tolist())
        joints = np.asarray(observation.joint_position)
        motion.append(float(np.sqrt(np.mean((chunk.actions[:, :7] - joints) ** 2))))
        return chunk

    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    resident_gib = torch.cuda.memory_allocated(device) / 2**30 if device.type == 'cuda' else 0.0
    warm_start = time.perf_counter()
    first_chunk_s = 0.0
    for index in range(args.warmup):
        infer()
        if index == 0:
            first_chunk_s = time.perf_counter() - warm_start
    warmup_s = time.perf_counter() - warm_start
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    print(
        f'\n[{label}] warm-up {args.warmup} chunks: {warmup_s:.2f} s (first {first_chunk_s:.2f} s)'
        f'\n{"chunk":>5} {"frame":>5} {"new":>3} {"dit":>3} {"inputs":>7} {"encode":>8} '
        f'{"prefill":>8} {"denoise":>8} {"decode":>8} {"total":>8} {"TFLOP":>7} {"TFLOP/s":>8}'
        '  (ms)'
    )
    chunks = []
    for index in range(repeats):
        chunk = infer()
        stats = dict(engine.last_stats)
        prefill_flops, denoise_flops = chunk_flops(engine, stats, rows)
        t = chunk.timing_ms
        rate = denoise_flops / (t['denoise'] / 1e3) / 1e12 if t['denoise'] else 0.0
        row = {**stats, **t, 'tflop': (prefill_flops + denoise_flops) / 1e12, 'tflops': rate}
        chunks.append(row)
        print(
            f'{index:>5} {stats["start_frame"]:>5} {"y" if stats["new_window"] else "n":>3} '
            f'{stats["dit_calls"]:>3} {t["inputs"]:>7.1f} {t["encode"]:>8.1f} {t["prefill"]:>8.1f} '
            f'{t["denoise"]:>8.1f} {t["decode"]:>8.1f} {t["total"]:>8.1f} '
            f'{row["tflop"]:>7.3g} {rate:>8.3g}'
        )
    peak = peak_memory_gib(device)
    if args.profile and label in args.profile_variants:
        profile_chunk(infer, device, args.profile, label)
    engine.reset(session)
    return {
        'label': label,
        'warmup_s': warmup_s,
        'first_chunk_s': first_chunk_s,
        'chunks': chunks,
        'summary': summarise(chunks),
        'peak_memory_gib': peak,
        'resident_gib': resident_gib,
        'actions': actions,
        'motion_rms': motion,
    }


def profile_chunk(infer: Any, device: torch.device, path: str, label: str) -> None:
    """Run one more chunk under torch.profiler and append its kernel table to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == 'cuda':
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        infer()
    sort = 'cuda_time_total' if device.type == 'cuda' else 'cpu_time_total'
    table = prof.key_averages().table(sort_by=sort, row_limit=60, max_name_column_width=90)
    with open(path, 'a') as handle:
        handle.write(f'\n===== {label}: one chunk =====\n{table}\n')


def summarise(chunks: list[dict]) -> dict:
    """Mean timings of new-window and continuing chunks and over a window cycle."""
    summary = {}
    for name, group in (
        ('new_window', [c for c in chunks if c['new_window']]),
        ('continuing', [c for c in chunks if not c['new_window']]),
        ('all', chunks),
    ):
        if group:
            summary[name] = {
                key: statistics.fmean(c[key] for c in group)
                for key in (
                    *('inputs', 'encode', 'prefill', 'denoise', 'decode', 'total'),
                    *('tflops', 'tflop'),
                )
            }
            summary[name]['dit_calls'] = statistics.fmean(c['dit_calls'] for c in group)
            similarities = [s for c in group for s in c['step_similarities']]
            if similarities:
                summary[name]['similarity_mean'] = statistics.fmean(similarities)
                summary[name]['similarity_max'] = max(similarities)
            summary[name]['count'] = len(group)
    return summary


def action_difference(result: dict, reference: dict) -> dict:
    """Differences of two variants' actions over the same chunks (joint units: rad)."""
    a = np.asarray(result['actions'], dtype=np.float64)
    b = np.asarray(reference['actions'], dtype=np.float64)
    count = min(len(a), len(b))
    delta = a[:count] - b[:count]
    rms = float(np.sqrt(np.mean(delta**2)))
    motion = float(np.sqrt(np.mean(np.square(reference['motion_rms'][:count]))))
    return {
        'reference': reference['label'],
        'chunks': count,
        'max_abs': float(np.abs(delta).max()),
        'rms': rms,
        'rms_over_motion': rms / motion if motion else math.nan,
    }


def compare_actions(results: list[dict], configs: list[EngineConfig]) -> None:
    """Attach ``action_diff`` (and ``action_diff_fp8`` for FP8 variants) to each result.

    ``action_diff`` compares with the first variant of the same step-cache mode,
    ``action_diff_fp8`` with the variant that differs only in ``fp8_linear``.
    """
    for index, (result, config) in enumerate(zip(results, configs, strict=True)):
        for earlier in range(index):
            if configs[earlier].step_cache == config.step_cache:
                result['action_diff'] = action_difference(result, results[earlier])
                break
        if config.fp8_linear != 'off':
            twin = config.replace(fp8_linear='off')
            for earlier in range(index):
                if configs[earlier] == twin:
                    result['action_diff_fp8'] = action_difference(result, results[earlier])
                    break


def print_summary(result: dict, baseline: dict | None) -> None:
    """One line per chunk kind, plus the ratio of the mean total to the baseline's."""
    print(
        f'[{result["label"]}] peak memory {result["peak_memory_gib"]:.2f} GiB '
        f'(resident before the variant {result["resident_gib"]:.2f} GiB), '
        f'warm-up {result["warmup_s"]:.1f} s, first chunk {result["first_chunk_s"]:.1f} s'
    )
    for name, values in result['summary'].items():
        line = (
            f'[{result["label"]}] {name:>10} x{values["count"]}: total {values["total"]:.1f} ms '
            f'(inputs {values["inputs"]:.1f}, encode {values["encode"]:.1f}, '
            f'prefill {values["prefill"]:.1f}, '
            f'denoise {values["denoise"]:.1f}, decode {values["decode"]:.1f}), '
            f'{values["dit_calls"]:.2g} DiT calls, DiT {values["tflops"]:.3g} TFLOP/s'
        )
        if 'similarity_mean' in values:
            line += (
                f', step-cache similarity mean {values["similarity_mean"]:.3f} '
                f'max {values["similarity_max"]:.3f}'
            )
        if baseline is not None and name in baseline['summary']:
            line += f', {values["total"] / baseline["summary"][name]["total"]:.2f}x baseline'
        print(line)
    seen = set()
    for key in ('action_diff', 'action_diff_fp8'):
        diff = result.get(key)
        if diff and diff['reference'] not in seen:
            seen.add(diff['reference'])
            print(
                f'[{result["label"]}] actions vs {diff["reference"]} over {diff["chunks"]} chunks: '
                f'max |d| {diff["max_abs"]:.3g}, rms {diff["rms"]:.3g} '
                f'({diff["rms_over_motion"]:.3g} of the predicted motion)'
            )


def print_table(results: list[dict]) -> None:
    """A compact comparison of the variants (means over the timed chunks).

    ``other``: the part of ``total`` outside the timed stages (Python, session bookkeeping).
    ``d act``: the action difference from the FP8 twin, else from the first variant of the same
    step-cache mode (rms and max, rad).
    """
    print(
        f'\n{"variant":<16}{"dit":>4}{"inputs":>7}{"encode":>8}{"prefill":>8}{"denoise":>9}'
        f'{"decode":>7}{"other":>6}{"total":>8}{"ratio":>7}{"TFLOP/s":>8}{"peak":>6}{"warm":>6}'
        f'{"1st":>6}{"d act":>9}{"max":>8}\n{"":<16}{"":>4}{"ms":>7}{"ms":>8}{"ms":>8}{"ms":>9}'
        f'{"ms":>7}{"ms":>6}{"ms":>8}{"":>7}{"DiT":>8}{"GiB":>6}{"s":>6}{"s":>6}{"rms":>9}{"":>8}'
    )
    base = results[0]['summary']['all']['total']
    for result in results:
        a = result['summary']['all']
        parts = sum(a[key] for key in ('inputs', 'encode', 'prefill', 'denoise', 'decode'))
        diff = result.get('action_diff_fp8') or result.get('action_diff')
        print(
            f'{result["label"]:<16}{a["dit_calls"]:>4.2g}{a["inputs"]:>7.1f}{a["encode"]:>8.1f}'
            f'{a["prefill"]:>8.1f}{a["denoise"]:>9.1f}{a["decode"]:>7.1f}'
            f'{a["total"] - parts:>6.1f}{a["total"]:>8.1f}{a["total"] / base:>7.3f}'
            f'{a["tflops"]:>8.0f}{result["peak_memory_gib"]:>6.1f}{result["warmup_s"]:>6.1f}'
            f'{result["first_chunk_s"]:>6.1f}{(diff["rms"] if diff else 0.0):>9.2g}'
            f'{(diff["max_abs"] if diff else 0.0):>8.2g}'
        )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; under torchrun rank 1 serves the unconditional branch."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    world = int(os.environ.get('WORLD_SIZE', '1'))
    rank = int(os.environ.get('RANK', '0'))
    device = args.device
    if device == 'cuda':
        device = f'cuda:{int(os.environ.get("LOCAL_RANK", "0"))}'
    if world not in (1, 2):
        print('CFG parallel uses exactly 2 ranks', file=sys.stderr)
        return 2
    variants = parse_variants(args)
    base = EngineConfig.preset(
        args.preset,
        device=device,
        dtype=args.dtype,
        num_inference_steps=args.steps,
        cfg_scale=args.cfg_scale,
        step_cache=StepCacheConfig(dit_steps=args.dit_steps),
    )
    configs = [variant_config(base, settings, args.dit_steps) for _, settings in variants]
    layout = None
    if world == 2:
        from dreamzero_ros.engine import cfg_parallel

        if len(variants) != 1:
            print('CFG parallel runs one variant per launch', file=sys.stderr)
            return 2
        cfg_parallel.init_process_group(rank, world, device=device)
        if rank == 1:
            dit = cfg_parallel.load_worker_dit(
                device, args.dtype, preset=args.preset, seed=args.seed
            )
            cfg_parallel.run_worker(dit)
            dist.destroy_process_group()
            return 0
        layout = cfg_parallel.CfgParallelDriver()
    start = time.perf_counter()
    engine = DreamZeroEngine.from_config(configs[0], seed=args.seed, layout=layout)
    if engine.device.type == 'cuda':
        torch.cuda.synchronize(engine.device)
    build_s = time.perf_counter() - start
    rows = 1 if world == 2 or args.cfg_scale == 1.0 else 2
    params = {
        name: sum(p.numel() for p in module.parameters())
        for name, module in engine.modules.as_dict().items()
    }
    mode = 'CFG parallel (2 ranks)' if world == 2 else f'{rows} CFG row(s) batched'
    print(
        f'DreamZero engine benchmark: preset {args.preset}, {device}, {args.dtype}, {mode}, '
        f'{args.steps} steps, cfg {args.cfg_scale}, torch {torch.__version__}\n'
        f'parameters: ' + ', '.join(f'{k} {v / 1e6:.1f} M' for k, v in params.items()) + '\n'
        f'build (random weights on the device): {build_s:.1f} s'
    )
    extras: dict[str, Any] = {}
    for flag, name, bench in (
        (args.gelu, 'gelu', lambda: gelu_benchmark(engine.device)),
        (args.qk_rope, 'qk_rope', lambda: qk_rope_benchmark(engine.device)),
        (args.fa3, 'fa3', lambda: fa3_benchmark(engine.device)),
        (args.inputs, 'inputs', lambda: inputs_benchmark(engine)),
        (args.vae, 'vae', lambda: vae_benchmark(engine)),
    ):
        if flag:
            try:
                extras[name] = bench()
            except Exception:  # noqa: BLE001 - report and go on with the variants
                traceback.print_exc()
    results, ran, failed = [], [], []
    for (label, settings), config in zip(variants, configs, strict=True):
        elapsed = time.perf_counter() - start
        if args.time_budget and elapsed > args.time_budget:
            print(f'\n[{label}] skipped: {elapsed:.0f} s past the --time-budget')
            continue
        print(f'\n[{label}] settings: {settings or "reference"}')
        runner = engine
        if config != engine.config:
            runner = DreamZeroEngine(
                config, engine.modules, engine.tokenizer, engine.normalizer, layout
            )
        try:
            repeats = args.repeats
            if not results and args.baseline_repeats:
                repeats = args.baseline_repeats
            result = run_schedule(runner, args, rows, label, repeats)
        except Exception as error:  # noqa: BLE001 - report and go on with the other variants
            traceback.print_exc()
            print(f'\n[{label}] FAILED: {type(error).__name__}: {error}')
            failed.append(label)
            continue
        finally:
            if runner is not engine:
                runner.close()
            del runner
        result['settings'] = dict(settings)
        results.append(result)
        ran.append(config)
    compare_actions(results, ran)
    print()
    for result in results:
        print_summary(result, results[0] if result is not results[0] else None)
    if results:
        print_table(results)
    engine.close()
    if world == 2:
        dist.destroy_process_group()
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(
                {
                    'args': vars(args),
                    'build_s': build_s,
                    'params': params,
                    **extras,
                    'results': results,
                },
                handle,
                indent=2,
            )
    if failed:
        print(f'failed variants: {failed}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
