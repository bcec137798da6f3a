# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

r"""Peak device memory and chunk time of engine memory variants, each under emulated GPU sizes.

Each variant (``label:key=value,...``; keys: the speed options ``compile``, ``fp8_linear``,
``attention_backend``, the memory options ``text_encoder``, ``image_encoder``, ``kv_cache``,
and ``cfg_scale``) is built afresh with the same seeded random weights, under a cap on the
device memory the allocator may take (``torch.cuda.set_per_process_memory_fraction``; ``0``:
no cap) that emulates a smaller GPU, and runs ``--warmup`` + ``--repeats`` chunks of one
session on the same observations.  Printed per run: whether it ran or ran out of memory (and
where), the build time, the weights resident after the build, the peak allocated and reserved
memory from the build to the last chunk, the engine's own estimate
(:func:`~dreamzero_ros.engine.memory.estimate.estimate_memory`), the time of a prompt encode
(the text encoder where the variant keeps it), the first chunk, the mean chunk over the timed
ones (whole context windows with ``--repeats`` a multiple of 4), its ratio to the reference
variant (``--reference``, default the first) and the action difference from it.

``cfg_scale=1`` runs one CFG row: the memory of rank 0 of CFG parallel (two GPUs, one branch
each), whose actions differ from CFG 5 by design and are not compared.

Example (H200; the 32 GB and 24 GB classes)::

    python benchmarks/memory_benchmark.py --caps 0 30 22.5 --variants \\
        bf16:compile=true fp8:compile=true,fp8_linear=rowwise \\
        gpu32:compile=true,fp8_linear=rowwise,text_encoder=offload,kv_cache=fp8
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
import traceback
from typing import Any

from bench_options import benchmark_parser
import numpy as np
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.memory.estimate import GIB, estimate_memory
from dreamzero_ros.engine.options import EngineOptions, resolve_device_dtype
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

#: The engine options a variant sets (the rest are the base's).
_OPTIONS = (
    'compile',
    'fp8_linear',
    'attention_backend',
    'compile_cache',
    'text_encoder',
    'image_encoder',
    'kv_cache',
)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (see ``--help``)."""
    parser = benchmark_parser('memory_benchmark.py', __doc__.split('\n\n')[0], ('device',))
    parser.add_argument('--variants', nargs='+', required=True, help='label:key=value,...')
    parser.add_argument(
        '--caps', nargs='+', type=float, default=[0.0], help='GiB caps to run each variant under'
    )
    parser.add_argument(
        '--runs',
        nargs='*',
        default=[],
        help='only these label@cap runs (e.g. gpu32@30); default every variant x cap',
    )
    parser.add_argument(
        '--reference',
        help='variant the ratios and actions compare with (default: the first)',
    )
    parser.add_argument(
        '--pairs',
        nargs='*',
        default=[],
        help='label:other pairs whose actions are also compared (e.g. kvfp8:fp8)',
    )
    parser.add_argument('--warmup', type=int, default=2, help='chunks before timing')
    parser.add_argument('--repeats', type=int, default=4, help='timed chunks per run')
    parser.add_argument('--seed', type=int, default=0, help='weight seed')
    parser.add_argument('--time-budget', type=float, default=0.0, help='seconds; 0: no limit')
    parser.add_argument(
        '--json', metavar='FILE', help='also write the results to this JSON file (default: none)'
    )
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line's options; the device resolved (``auto``)."""
    args = build_parser().parse_args(argv)
    args.device = resolve_device_dtype(args.device, 'bfloat16')[0]
    return args


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ('true', 'on', 'yes'):
        return True
    if lowered in ('false', 'no'):
        return False
    try:
        return float(text)
    except ValueError:
        return text


def variant_config(base: EngineConfig, spec: str) -> tuple[str, EngineConfig]:
    """``(label, config)`` of ``label:key=value,...``."""
    label, _, body = spec.partition(':')
    settings = {}
    for item in filter(None, body.split(',')):
        key, _, value = item.partition('=')
        if key not in (*_OPTIONS, 'cfg_scale'):
            raise SystemExit(f'unknown setting {key!r} in {spec!r}')
        settings[key] = _value(value)
    cfg_scale = float(settings.pop('cfg_scale', base.sampling.cfg_scale))
    config = base.replace(
        options=dataclasses.replace(base.options, **settings),
        sampling=dataclasses.replace(base.sampling, cfg_scale=cfg_scale),
    )
    return label, config


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _memory(device: torch.device) -> dict[str, float]:
    if device.type != 'cuda':
        return {'allocated': 0.0, 'peak': 0.0, 'reserved': 0.0}
    return {
        'allocated': torch.cuda.memory_allocated(device) / GIB,
        'peak': torch.cuda.max_memory_allocated(device) / GIB,
        'reserved': torch.cuda.max_memory_reserved(device) / GIB,
    }


def _is_oom(error: BaseException) -> bool:
    return 'out of memory' in str(error).lower() or isinstance(error, torch.OutOfMemoryError)


def run_variant(
    label: str, config: EngineConfig, cap: float, args: argparse.Namespace
) -> dict[str, Any]:
    """Build the variant under ``cap`` GiB, run its chunks; the figures of the run."""
    device = torch.device(config.device)
    if device.type == 'cuda' and device.index is None:
        device = torch.device('cuda', torch.cuda.current_device())
    _free(device)
    if device.type == 'cuda':
        total = torch.cuda.get_device_properties(device).total_memory / GIB
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total) if cap else 1.0, device)
    result: dict[str, Any] = {
        'label': label,
        'cap_gib': cap,
        'estimate_gib': estimate_memory(config).total / GIB,
        'cfg_scale': config.sampling.cfg_scale,
        'stage': 'build',
    }
    engine = None
    try:
        start = time.perf_counter()
        engine = DreamZeroEngine.from_config(config, seed=args.seed)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        result['build_s'] = time.perf_counter() - start
        result['resident_gib'] = _memory(device)['allocated']
        result['compile_cache'] = str(engine.compile_cache)
        times, actions = [], []
        for step in range(args.warmup + args.repeats):
            result['stage'] = f'chunk {step}'
            observation = random_observation(seed=step % 7, session_id='m', stamp=step / 15)
            chunk = engine.infer(observation)
            if step == 0:
                result['first_chunk_s'] = chunk.timing_ms['total'] / 1e3
            if step >= args.warmup:
                times.append(chunk.timing_ms['total'])
            actions.append(chunk.actions.tolist())
        result['stage'] = 'prompt encode'
        start = time.perf_counter()
        engine.encode_prompt('put the marker in the cup and close the drawer')
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        result['prompt_encode_ms'] = (time.perf_counter() - start) * 1e3
        result['chunk_ms'] = statistics.fmean(times) if times else 0.0
        result['actions'] = actions
        result['stage'] = 'done'
        result['status'] = 'ran'
    except Exception as error:  # noqa: BLE001 - an OOM is a result; others are printed too
        result['status'] = 'OOM' if _is_oom(error) else f'failed: {type(error).__name__}'
        if not _is_oom(error):
            traceback.print_exc()
        result['error'] = str(error).splitlines()[0][:200]
    finally:
        result.update({f'{k}_gib': v for k, v in _memory(device).items() if k != 'allocated'})
        if engine is not None:
            engine.close()
        del engine
        _free(device)
    return result


def _compare(result: dict, reference: dict) -> None:
    if 'actions' not in result or 'actions' not in reference or result is reference:
        return
    a, b = np.asarray(result['actions']), np.asarray(reference['actions'])
    count = min(len(a), len(b))
    delta = a[:count] - b[:count]
    result['action_rms'] = float(np.sqrt(np.mean(delta**2)))
    result['action_max'] = float(np.abs(delta).max())


def print_table(results: list[dict], reference: dict | None) -> None:
    """One row per run."""
    print(
        f'\n{"run":<22}{"cap":>6}{"status":>8}{"build":>7}{"weights":>8}{"peak":>7}{"resvd":>7}'
        f'{"estim":>7}{"prompt":>8}{"1st":>6}{"chunk":>8}{"ratio":>7}{"d act":>9}{"max":>8}\n'
        f'{"":<22}{"GiB":>6}{"":>8}{"s":>7}{"GiB":>8}{"GiB":>7}{"GiB":>7}{"GiB":>7}{"ms":>8}'
        f'{"s":>6}{"ms":>8}{"":>7}{"rms":>9}{"":>8}'
    )
    base = reference.get('chunk_ms') if reference else None
    for r in results:
        ratio = r.get('chunk_ms', 0) / base if base and r.get('chunk_ms') else 0.0
        status = r['status'] if r['status'] == 'ran' else r['status'][:8]
        print(
            f'{r["label"] + "@" + format(r["cap_gib"], "g"):<22}{r["cap_gib"]:>6.1f}{status:>8}'
            f'{r.get("build_s", 0):>7.1f}{r.get("resident_gib", 0):>8.1f}{r["peak_gib"]:>7.1f}'
            f'{r["reserved_gib"]:>7.1f}{r["estimate_gib"]:>7.1f}'
            f'{r.get("prompt_encode_ms", 0):>8.0f}'
            f'{r.get("first_chunk_s", 0):>6.1f}{r.get("chunk_ms", 0):>8.1f}{ratio:>7.3f}'
            f'{r.get("action_rms", 0):>9.2g}{r.get("action_max", 0):>8.2g}'
        )
        if r['status'] != 'ran':
            print(f'    {r["status"]} at {r["stage"]}: {r.get("error", "")}')


def main(argv: list[str] | None = None) -> int:
    """Run every variant under every cap (or the chosen runs)."""
    args = parse_args(argv)
    base = EngineConfig.preset(
        args.preset, options=EngineOptions(device=args.device, dtype='bfloat16')
    )
    variants = [variant_config(base, spec) for spec in args.variants]
    runs = [(label, config, cap) for label, config in variants for cap in args.caps]
    if args.runs:
        runs = [r for r in runs if f'{r[0]}@{r[2]:g}' in args.runs]
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'
    print(
        f'DreamZero memory benchmark: preset {args.preset} on {name}, torch {torch.__version__}, '
        f'{args.warmup} + {args.repeats} chunks per run'
    )
    start = time.perf_counter()
    results = []
    for label, config, cap in runs:
        if args.time_budget and time.perf_counter() - start > args.time_budget:
            print(f'[{label}@{cap:g}] skipped: past the --time-budget')
            continue
        print(f'[{label}@{cap:g}] {config.options} cfg {config.sampling.cfg_scale}')
        result = run_variant(label, config, cap, args)
        print(
            f'[{label}@{cap:g}] {result["status"]}: peak {result["peak_gib"]:.2f} GiB, '
            f'reserved {result["reserved_gib"]:.2f}, estimate {result["estimate_gib"]:.2f}, '
            f'chunk {result.get("chunk_ms", 0):.1f} ms, first chunk '
            f'{result.get("first_chunk_s", 0):.1f} s, compile cache {result.get("compile_cache")}',
            flush=True,
        )
        results.append(result)
    reference = next(
        (r for r in results if r['label'] == (args.reference or results[0]['label'])), None
    )
    for result in results:
        if reference is not None and result['cfg_scale'] == reference['cfg_scale']:
            _compare(result, reference)
    print_table(results, reference)
    by_label = {r['label']: r for r in results if 'actions' in r}
    for pair in args.pairs:
        label, _, other = pair.partition(':')
        if label in by_label and other in by_label:
            twin = dict(by_label[label])
            _compare(twin, by_label[other])
            print(
                f'actions {label} vs {other}: rms {twin.get("action_rms", 0):.3g}, '
                f'max {twin.get("action_max", 0):.3g}'
            )
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump({'args': vars(args), 'results': results}, handle, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
