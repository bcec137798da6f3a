# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A worker rank (>= 1): the console script ``dreamzero-engine-worker``.

It loads the DiT its engine options describe (its tensor-parallel shard only, FP8 from the start
where they ask for it), announces that it has loaded, joins the default group, answers rank 0's
handshake and serves its commands (:mod:`.protocol`) until shut down.  Rank 0 starts it with its
own options on the command line (:mod:`.launch`); the handshake refuses options that differ
where every rank must share them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import sys

import torch
import torch.distributed as dist

from dreamzero_ros.cli_options import add_policy_source, new_parser
from dreamzero_ros.console import EXIT_RESOURCE
from dreamzero_ros.engine.checkpoint.upstream_config import read_config
from dreamzero_ros.engine.checkpoint.weights import load_checkpoint
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.loader import RANDOM_PRESETS, add_engine_arguments
from dreamzero_ros.engine.memory.placement import build_dit, build_modules
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.options import EngineOptions, check_device
from dreamzero_ros.engine.parallel.mesh import mesh_problem
from dreamzero_ros.engine.parallel.tensor_parallel import shard_problem
from dreamzero_ros.engine.pipeline.denoise import ChunkDenoiser, ChunkInputs, DenoiseSession
from dreamzero_ros.engine.workers.driver import setup_rank
from dreamzero_ros.engine.workers.protocol import (
    FLAG_FIELDS,
    PROMPT_FIELDS,
    TENSOR_FIELDS,
    Channel,
    Command,
    announce_loaded,
    comm_device,
    init_process_group,
    options_problem,
)
from dreamzero_ros.errors import DeviceUnavailableError

__all__ = ['build_parser', 'load_worker_dit', 'main', 'run_worker']


def load_worker_dit(
    options: EngineOptions,
    checkpoint: str | Path | None = None,
    preset: str = 'droid_14b',
    seed: int = 0,
    tp_rank: int = 0,
) -> CausalWanDiT:
    """The DiT a worker serves: from a checkpoint, or seeded random weights of a preset.

    Of ``options``: ``device``, ``dtype``; with ``tensor_parallel`` > 1 only shard ``tp_rank``
    is built and filled (:func:`.tensor_parallel.shard_dit_`); with ``fp8_linear`` its block
    linears are held in FP8 from the start, each quantized as it loads (after the cut, with the
    shard's own scales), so the worker holds neither the model-dtype DiT nor the other ranks'
    weights; ``base_checkpoint`` and ``encoder_dir`` as the engine reads them.

    The random DiT equals that of ``DreamZeroEngine.from_config(EngineConfig.<preset>(), seed)``
    on the same device type and dtype (cut the same way).  From a checkpoint (LoRA adapters
    merged, a LoRA-only one on its base), the other components are checked (strictly, as the
    engine does) but loaded only onto the ``meta`` device.
    """
    options = options.resolved()
    tp_size = options.tensor_parallel
    if checkpoint is not None:
        config = read_config(checkpoint, options)
    else:
        config = EngineConfig.preset(preset, options=options)
    dit = build_dit(config, None if checkpoint is not None else seed, tp_rank, tp_size)
    if checkpoint is None:
        return dit
    modules = build_modules(config.on('meta')).as_dict()
    load_checkpoint(
        checkpoint,
        {**modules, 'dit': dit},
        base=options.base_checkpoint or None,
        encoder_dir=options.encoder_dir or None,
    )
    return dit


def run_worker(dit: CausalWanDiT, options: EngineOptions) -> int:
    """Serve a worker rank (>= 1) of the default group until shutdown; returns chunks run."""
    comm = comm_device(dit.device)
    channel = Channel(comm)
    header, _ = channel.receive()
    sampling, tp_size = header['sampling'], header['tp_size']
    problem = (
        options_problem(options, header['options'])
        or mesh_problem(tp_size, sampling.use_cfg)
        or shard_problem(dit, tp_size, dist.get_rank() % tp_size)
    )
    if header['dit_config'] != dit.config:
        problem = f'DiT config {dit.config} != rank 0 {header["dit_config"]}'
    channel.agree(problem)
    layout = setup_rank(dit, tp_size, sampling.use_cfg, comm)
    denoiser = ChunkDenoiser(dit, sampling, options, layout, header['compile_backend'])
    sessions: dict[int, DenoiseSession] = {}
    prompts: dict[int, dict[str, torch.Tensor]] = {}
    chunks = 0
    while True:
        header, tensors = channel.receive()
        command, sid = header['command'], header.get('session')
        if command == Command.SHUTDOWN:
            return chunks
        if command == Command.CLOSE:
            if sid in sessions:
                denoiser.close_session(sessions.pop(sid))
            prompts.pop(sid, None)
            continue
        if header['reuse_prompts']:
            tensors.update(prompts[sid])
        else:
            prompts[sid] = {k: tensors.get(k) for k in PROMPT_FIELDS}
        values = {name: tensors.get(name) for name in TENSOR_FIELDS}
        flags = {name: header[name] for name in FLAG_FIELDS}
        inputs = ChunkInputs(**flags, **values)
        if sid not in sessions:
            sessions[sid] = denoiser.open_session(sid)
        denoiser.denoise_chunk(sessions[sid], inputs)
        chunks += 1


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-engine-worker``."""
    parser = new_parser(
        'dreamzero-engine-worker',
        'Serve a worker rank of a multi-process DreamZero engine (CFG / tensor parallel) until '
        'rank 0 shuts it down. The rendezvous comes from RANK, WORLD_SIZE, MASTER_ADDR and '
        'MASTER_PORT (or --init-method). Rank 0 starts it with its own engine options; the '
        'ranks refuse to start where they differ (but for the device).',
    )
    add_policy_source(
        parser,
        RANDOM_PRESETS,
        remote=False,
        preset_help='seeded random weights (--seed) of a preset architecture instead of a '
        'checkpoint (benchmarks)',
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of the --preset weights')
    add_engine_arguments(parser)
    group = parser.add_argument_group('rendezvous')
    group.add_argument('--init-method', default='env://', help='torch.distributed rendezvous')
    group.add_argument('--rank', type=int, help='this rank (default: $RANK, else 1)')
    group.add_argument(
        '--world-size', type=int, help='ranks in the group (default: $WORLD_SIZE, else 2)'
    )
    group.add_argument(
        '--backend',
        choices=('gloo', 'nccl'),
        help='process group backend (default: nccl on CUDA devices, else gloo)',
    )
    group.add_argument(
        '--timeout',
        type=float,
        default=600.0,
        metavar='SECONDS',
        help="collective timeout: the longest wait for rank 0's next command",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console script ``dreamzero-engine-worker``: one worker rank of a multi-process engine."""
    parser = build_parser()
    args = parser.parse_args(argv)
    rank = args.rank if args.rank is not None else int(os.environ.get('RANK', '1'))
    world_size = args.world_size or int(os.environ.get('WORLD_SIZE', '2'))
    if rank < 1:
        parser.error('workers are ranks >= 1; rank 0 is the engine (ParallelDriver)')
    options = EngineOptions.from_arguments(args)
    try:
        check_device(options.device, '--device')  # this rank's own, in one line
    except DeviceUnavailableError as error:
        print(f'dreamzero-engine-worker: error: {error}', file=sys.stderr)
        return EXIT_RESOURCE
    options = options.resolved()
    if options.num_threads > 0:
        torch.set_num_threads(options.num_threads)
    dit = load_worker_dit(
        options,
        args.checkpoint,
        args.preset or 'droid_14b',
        args.seed,
        rank % options.tensor_parallel,
    )
    if args.init_method == 'env://':
        announce_loaded(rank, args.timeout)
    init_process_group(
        rank, world_size, args.init_method, args.backend, options.device, args.timeout
    )
    try:
        chunks = run_worker(dit, options)
    finally:
        dist.destroy_process_group()
    print(f'dreamzero-engine-worker rank {rank}: {chunks} chunks, shut down', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
