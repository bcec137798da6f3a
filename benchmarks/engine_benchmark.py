# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-chunk latency of the DreamZero engine with random weights.

Builds the engine of a preset (default: the published 14B DROID architecture) directly on the
device in the target dtype with seeded random weights, feeds it a steady stream of DROID
observations of one session, and prints per chunk the inputs / encode / prefill / denoise /
decode / total milliseconds (``inputs``: cropping, resizing and stitching the camera views and
the upload), the DiT FLOPs computed (:mod:`engine_flops`), the DiT throughput of the denoising
loop, and the peak memory.  Chunks cycle through context windows (a new window every
``max_chunk_size`` chunks encodes the conditioning frame with CLIP and the VAE), so the summary
reports new-window and continuing chunks separately and their mean over a whole window cycle,
the per-chunk cost a robot sees.

Several variants (:mod:`engine_variants`: speed options and step-cache modes) run one after
another on the same weights and the same observations; the first is the baseline of the printed
ratios, and each variant's actions are compared with the first variant of the same step-cache
mode and, for an FP8 variant, with the variant that differs from it only in ``fp8_linear``
(:mod:`engine_report`).  ``--vae``, ``--inputs``, ``--gelu``, ``--qk-rope``, ``--fa3`` and
``--fp8-gemm`` first run one micro-benchmark each (``micro_*.py``).

One process runs both CFG branches as one batch.  Under ``torchrun --nproc_per_node 2`` rank 0
runs the conditional branch and rank 1 the unconditional one (CFG parallel, one variant per
launch; NCCL on GPUs, gloo on the CPU); rank 0 prints.  With ``--tensor-parallel N`` each CFG
branch's DiT is split over N of the ranks (``nproc = N``: batched CFG; ``2 N``: CFG parallel
too).  Every rank prints its peak memory, rank 0 also the engine's estimate of its need.
``--device cuda`` puts rank i on GPU i; a device with an index (``cuda:0``) puts every rank on
that one, which with ``--backend gloo`` runs the ranks on a single GPU: each rank's memory and
the sharded code on the GPU, not the speed (gloo copies every all-reduce through the host).

Examples::

    python benchmarks/engine_benchmark.py                       # 14B, 1 GPU, bf16
    python benchmarks/engine_benchmark.py --step-cache full static dynamic
    python benchmarks/engine_benchmark.py --variants eager attention compile dynamic fp8 fp8-dynamic
    torchrun --nproc_per_node 2 benchmarks/engine_benchmark.py  # 14B, CFG parallel on 2 GPUs
    torchrun --nproc_per_node 2 benchmarks/engine_benchmark.py --tensor-parallel 2
    torchrun --nproc_per_node 2 benchmarks/engine_benchmark.py --tensor-parallel 2 \
        --device cuda:0 --backend gloo --variants fp8     # both ranks on one GPU
    python benchmarks/engine_benchmark.py --preset tiny --device cpu --warmup 1 --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback
from typing import Any

from bench_options import benchmark_parser, engine_options
from bench_timing import peak_memory_gib
from engine_chunks import run_schedule
from engine_report import compare_actions, print_summary, print_table
from engine_variants import parse_variants, variant_config
from micro_fa3_attention import fa3_benchmark
from micro_fp8_gemm import fp8_gemm_benchmark
from micro_gelu_epilogue import gelu_benchmark
from micro_qk_rope import qk_rope_benchmark
from micro_vae_encoder import vae_benchmark
from micro_view_preparation import inputs_benchmark
import torch
import torch.distributed as dist

from dreamzero_ros.engine.config import EngineConfig, Sampling
from dreamzero_ros.engine.memory.estimate import GIB, estimate_memory
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine
from dreamzero_ros.engine.step_cache import StepCacheConfig
from dreamzero_ros.engine.workers.driver import ParallelDriver
from dreamzero_ros.engine.workers.protocol import init_process_group
from dreamzero_ros.engine.workers.worker import load_worker_dit, run_worker


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (see ``--help``)."""
    parser = benchmark_parser(
        'engine_benchmark.py',
        __doc__.split('\n\n')[0],
        ('device', 'dtype', 'num_threads', 'tensor_parallel'),
    )
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
        help='engine settings to compare (see engine_variants.py); overrides --step-cache '
        '(default: one variant per --step-cache)',
    )
    parser.add_argument(
        '--attention', default='cudnn', help='attention_backend of the named variants'
    )
    parser.add_argument('--fp8', default='rowwise', help='fp8_linear of the named FP8 variants')
    parser.add_argument(
        '--profile',
        metavar='FILE',
        help='append torch.profiler kernel tables to this file (default: no profile)',
    )
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
    parser.add_argument('--cfg-scale', type=float, default=5.0, help='classifier-free guidance')
    parser.add_argument(
        '--backend',
        choices=('gloo', 'nccl'),
        help='under torchrun: the process group backend (default: nccl on GPUs, else gloo)',
    )
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
    parser.add_argument(
        '--fp8-gemm',
        action='store_true',
        help='first time the DiT linears in bf16 and FP8 (rowwise, tensorwise) at its token counts',
    )
    parser.add_argument('--seed', type=int, default=0, help='weight seed')
    parser.add_argument(
        '--json', metavar='FILE', help='also write the results to this JSON file (default: none)'
    )
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line's options."""
    return build_parser().parse_args(argv)


def _micro_benchmarks(args: argparse.Namespace, engine: DreamZeroEngine) -> dict[str, Any]:
    """The micro-benchmarks the options ask for (a failure is printed, not fatal)."""
    extras: dict[str, Any] = {}
    for flag, name, bench in (
        (args.gelu, 'gelu', lambda: gelu_benchmark(engine.device)),
        (args.qk_rope, 'qk_rope', lambda: qk_rope_benchmark(engine.device)),
        (args.fa3, 'fa3', lambda: fa3_benchmark(engine.device)),
        (args.fp8_gemm, 'fp8_gemm', lambda: fp8_gemm_benchmark(engine.device)),
        (args.inputs, 'inputs', lambda: inputs_benchmark(engine)),
        (args.vae, 'vae', lambda: vae_benchmark(engine)),
    ):
        if flag:
            try:
                extras[name] = bench()
            except Exception:  # noqa: BLE001 - report and go on with the variants
                traceback.print_exc()
    return extras


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; under torchrun ranks >= 1 are workers (CFG / tensor parallel)."""
    args = parse_args(argv)
    options = engine_options(args)  # resolved
    if options.num_threads:
        torch.set_num_threads(options.num_threads)
    world = int(os.environ.get('WORLD_SIZE', '1'))
    rank = int(os.environ.get('RANK', '0'))
    device = options.device
    if device == 'cuda':  # one GPU per rank; an explicit index puts every rank on it
        device = f'cuda:{int(os.environ.get("LOCAL_RANK", "0"))}'
    tp = options.tensor_parallel
    if tp < 1 or world % tp or world // tp not in (1, 2):
        print(
            f'{world} ranks are not (1 or 2 CFG branches) x --tensor-parallel {tp}',
            file=sys.stderr,
        )
        return 2
    branches = world // tp
    variants = parse_variants(args)
    base = EngineConfig.preset(
        args.preset,
        options=dataclasses.replace(options, device=device),
        sampling=Sampling(
            num_inference_steps=args.steps,
            cfg_scale=args.cfg_scale,
            step_cache_tuning=StepCacheConfig(dit_steps=args.dit_steps),
        ),
    )
    configs = [variant_config(base, settings, args.dit_steps) for _, settings in variants]
    layout = None
    if world > 1:
        if len(variants) != 1:
            print('CFG / tensor parallel runs one variant per launch', file=sys.stderr)
            return 2
        init_process_group(rank, world, backend=args.backend, device=device)
        if rank >= 1:
            worker_options = configs[0].options
            dit = load_worker_dit(
                worker_options, preset=args.preset, seed=args.seed, tp_rank=rank % tp
            )
            chunks = run_worker(dit, worker_options)
            dist.destroy_process_group()
            work = (
                'both CFG rows'
                if branches == 1
                else ('the conditional branch', 'the unconditional branch')[rank // tp]
            )
            shard = f', shard {rank % tp} of {tp}' if tp > 1 else ''
            peak = peak_memory_gib(torch.device(device))
            print(f'rank {rank}: {chunks} chunks of {work}{shard}, peak {peak:.2f} GiB', flush=True)
            return 0
        layout = ParallelDriver(tp)
    start = time.perf_counter()
    engine = DreamZeroEngine.from_config(configs[0], seed=args.seed, layout=layout)
    if engine.device.type == 'cuda':
        torch.cuda.synchronize(engine.device)
    build_s = time.perf_counter() - start
    rows = 1 if branches == 2 or args.cfg_scale == 1.0 else 2
    params = {
        name: sum(p.numel() for p in module.parameters())
        for name, module in engine.modules.as_dict().items()
    }
    mode = 'CFG parallel (2 ranks)' if branches == 2 else f'{rows} CFG row(s) batched'
    if tp > 1:
        mode += f', tensor parallel {tp} ({world} ranks; DiT TFLOP/s: a branch over its {tp})'
    print(
        f'DreamZero engine benchmark: preset {args.preset}, {device}, {options.dtype}, {mode}, '
        f'{args.steps} steps, cfg {args.cfg_scale}, torch {torch.__version__}\n'
        f'parameters: ' + ', '.join(f'{k} {v / 1e6:.1f} M' for k, v in params.items()) + '\n'
        f'build (random weights on the device): {build_s:.1f} s; rank 0 estimate '
        f'{estimate_memory(configs[0], rows, tp).total / GIB:.2f} GiB'
    )
    extras = _micro_benchmarks(args, engine)
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
                config, engine.modules, engine.tokenizer, engine.embodiment, layout
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
        report = {'args': vars(args), 'build_s': build_s, 'params': params, **extras}
        with open(args.json, 'w') as handle:
            json.dump({**report, 'results': results}, handle, indent=2)
    if failed:
        print(f'failed variants: {failed}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
