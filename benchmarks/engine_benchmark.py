# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-chunk latency of the DreamZero engine with random weights.

Builds the engine of a preset (default: the published 14B DROID architecture) directly on the
device in the target dtype with seeded random weights, feeds it a steady stream of DROID
observations of one session, and prints per chunk the encode / prefill / denoise / decode /
total milliseconds, the DiT FLOPs actually computed (counted analytically from the shapes), the
DiT throughput of the denoising loop, and the peak memory.  Chunks cycle through context windows
(a new window every ``max_chunk_size`` chunks encodes the conditioning frame with CLIP and the
VAE), so the summary reports new-window and continuing chunks separately and their mean over a
whole window cycle, the per-chunk cost a robot sees.

One process: both CFG branches as one batch.  Under ``torchrun --nproc_per_node 2`` rank 0 runs
the conditional branch and rank 1 the unconditional one (CFG parallel); rank 0 prints.

Examples::

    python benchmarks/engine_benchmark.py                       # 14B, 1 GPU, bf16
    python benchmarks/engine_benchmark.py --step-cache full static dynamic
    torchrun --nproc_per_node 2 benchmarks/engine_benchmark.py  # 14B, CFG parallel on 2 GPUs
    python benchmarks/engine_benchmark.py --preset tiny --device cpu --warmup 1 --repeats 3
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.dit import DiTConfig
from dreamzero_ros.engine.step_cache import StepCacheConfig
from dreamzero_ros.engine.testing import random_observation


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
    denoise = stats['dit_calls'] * dit_call_flops(
        dit, CallShape(per_block, dit.register_tokens, start), text, image
    )
    return rows * prefill, rows * denoise


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
        choices=('full', 'static', 'dynamic'),
        help='DiT step schedule(s); several run one after another on the same weights and '
        'are compared with the first',
    )
    parser.add_argument('--dit-steps', type=int, default=8, help='DiT steps of the static cache')
    parser.add_argument('--cfg-scale', type=float, default=5.0)
    parser.add_argument('--warmup', type=int, default=2, help='chunks before timing')
    parser.add_argument('--repeats', type=int, default=8, help='timed chunks per schedule')
    parser.add_argument('--seed', type=int, default=0, help='weight seed')
    parser.add_argument('--threads', type=int, help='torch CPU threads')
    parser.add_argument('--json', help='also write the results to this JSON file')
    return parser.parse_args(argv)


def run_schedule(engine: DreamZeroEngine, args: argparse.Namespace, rows: int, label: str) -> dict:
    """Warm up, then time ``args.repeats`` chunks; print one line per chunk."""
    device = engine.device
    session = f'bench-{label}'
    engine.reset(session)
    step = 0

    def observation() -> object:
        nonlocal step
        step += 1
        return random_observation(seed=step % 7, session_id=session, stamp=step / 15)

    warm_start = time.perf_counter()
    for _ in range(args.warmup):
        engine.infer(observation())
    warmup_s = time.perf_counter() - warm_start
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    print(
        f'\n[{label}] warm-up {args.warmup} chunks: {warmup_s:.2f} s\n'
        f'{"chunk":>5} {"frame":>5} {"new":>3} {"dit":>3} {"encode":>8} {"prefill":>8} '
        f'{"denoise":>8} {"decode":>8} {"total":>8} {"TFLOP":>7} {"TFLOP/s":>8}  (ms)'
    )
    chunks = []
    for index in range(args.repeats):
        chunk = engine.infer(observation())
        stats = dict(engine.last_stats)
        prefill_flops, denoise_flops = chunk_flops(engine, stats, rows)
        t = chunk.timing_ms
        rate = denoise_flops / (t['denoise'] / 1e3) / 1e12 if t['denoise'] else 0.0
        row = {**stats, **t, 'tflop': (prefill_flops + denoise_flops) / 1e12, 'tflops': rate}
        chunks.append(row)
        print(
            f'{index:>5} {stats["start_frame"]:>5} {"y" if stats["new_window"] else "n":>3} '
            f'{stats["dit_calls"]:>3} {t["encode"]:>8.1f} {t["prefill"]:>8.1f} '
            f'{t["denoise"]:>8.1f} {t["decode"]:>8.1f} {t["total"]:>8.1f} '
            f'{row["tflop"]:>7.3g} {rate:>8.3g}'
        )
    return {
        'label': label,
        'warmup_s': warmup_s,
        'chunks': chunks,
        'summary': summarise(chunks),
        'peak_memory_gib': peak_memory_gib(device),
    }


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
                for key in ('encode', 'prefill', 'denoise', 'decode', 'total', 'tflops')
            }
            summary[name]['count'] = len(group)
    return summary


def print_summary(result: dict, baseline: dict | None) -> None:
    """One line per chunk kind, plus the ratio of the mean total to the baseline's."""
    print(f'[{result["label"]}] peak memory {result["peak_memory_gib"]:.2f} GiB')
    for name, values in result['summary'].items():
        line = (
            f'[{result["label"]}] {name:>10} x{values["count"]}: total {values["total"]:.1f} ms '
            f'(encode {values["encode"]:.1f}, prefill {values["prefill"]:.1f}, '
            f'denoise {values["denoise"]:.1f}, decode {values["decode"]:.1f}), '
            f'DiT {values["tflops"]:.3g} TFLOP/s'
        )
        if baseline is not None and name in baseline['summary']:
            line += f', {values["total"] / baseline["summary"][name]["total"]:.2f}x baseline'
        print(line)


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
    base = EngineConfig.preset(
        args.preset,
        device=device,
        dtype=args.dtype,
        num_inference_steps=args.steps,
        cfg_scale=args.cfg_scale,
        step_cache=StepCacheConfig(mode=args.step_cache[0], dit_steps=args.dit_steps),
    )
    layout = None
    if world == 2:
        from dreamzero_ros.engine import cfg_parallel

        if len(args.step_cache) != 1:
            print('CFG parallel runs one step-cache schedule per launch', file=sys.stderr)
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
    build_start = time.perf_counter()
    engine = DreamZeroEngine.from_config(base, seed=args.seed, layout=layout)
    if engine.device.type == 'cuda':
        torch.cuda.synchronize(engine.device)
    build_s = time.perf_counter() - build_start
    rows = 1 if world == 2 or args.cfg_scale == 1.0 else 2
    params = {
        name: sum(p.numel() for p in module.parameters())
        for name, module in engine.modules.as_dict().items()
    }
    mode = 'CFG parallel (2 ranks)' if world == 2 else f'{rows} CFG row(s) batched'
    print(
        f'DreamZero engine benchmark: preset {args.preset}, {device}, {args.dtype}, {mode}, '
        f'{args.steps} steps, cfg {args.cfg_scale}\n'
        f'parameters: ' + ', '.join(f'{k} {v / 1e6:.1f} M' for k, v in params.items()) + '\n'
        f'build (random weights on the device): {build_s:.1f} s'
    )
    results = []
    for schedule in args.step_cache:
        config = base.replace(step_cache=StepCacheConfig(mode=schedule, dit_steps=args.dit_steps))
        runner = engine
        if schedule != args.step_cache[0]:
            runner = DreamZeroEngine(
                config, engine.modules, engine.tokenizer, engine.normalizer, layout
            )
        label = schedule if schedule != 'static' else f'static-{args.dit_steps}'
        results.append(run_schedule(runner, args, rows, label))
    print()
    for result in results:
        print_summary(result, results[0] if result is not results[0] else None)
    engine.close()
    if world == 2:
        dist.destroy_process_group()
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(
                {'args': vars(args), 'build_s': build_s, 'params': params, 'results': results},
                handle,
                indent=2,
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
