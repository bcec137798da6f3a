# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Multi-process engine: the driver rank, the worker ranks and their rendezvous.

Which rank computes what is :mod:`.parallel_layout`; this module runs the processes.

CFG parallel: with 2 CFG ranks, rank 0 runs the conditional branch (prompt) and the other the
unconditional one (negative prompt); each keeps its own K/V caches and cross-attention context per
session.  Every DiT step the two exchange their velocities with one ``all_gather`` (video and
action packed in one buffer); both compute the same CFG-combined video velocity and take the
conditional action velocity, so their schedulers and noisy samples stay identical step by step.
When the chunk's video is not wanted, both ranks know (from the broadcast chunk) that the last
DiT call needs the conditional branch only: rank 0 runs it alone, with no exchange, and the
unconditional rank idles (its own copy of the actions is then not the chunk's; only rank 0's
count).
Results equal the one-process batched run (:class:`~.denoise.ChunkDenoiser`)
to float tolerance.

Tensor parallel: ``tp_size`` ranks per branch each hold ``heads / tp_size`` attention heads and
``ffn_dim / tp_size`` FFN columns (:mod:`.tensor_parallel`) in a ``cfg x tp``
grid; the CFG exchange runs between the two ranks holding the same TP shard.

Driver/worker arrangement
    Rank 0 lives in the caller's process (the ROS node or the OpenPI bridge): its denoiser, or the
    engine (``DreamZeroEngine.from_pretrained(..., layout=driver)``), uses a
    :class:`ParallelDriver` as its branch layout.  Ranks >= 1 run :func:`run_worker` (console
    script ``dreamzero-engine-worker``).  Attaching the driver to a denoiser is a handshake: it
    sends the :class:`~.denoise.DenoiseConfig` (speed options and K/V cache
    precision included) and ``tp_size``; every rank checks the grid, that it built the same
    :class:`~.dit.DiTConfig` and, if it loaded a shard, that it is its own
    (:func:`~.tensor_parallel.shard_problem`); any refusal raises
    :class:`CfgParallelError` on every rank.  Then all ranks build the process groups and their
    shards join them (a whole DiT is cut first).  The driver's hooks broadcast, before rank 0
    runs its part:

    * ``infer``: session id + :class:`~.denoise.ChunkInputs` tensors (the
      prompt tensors only when the driver's prompt tensors changed);
    * ``close``: drop that session's state (caches, context);
    * ``shutdown``: leave the loop.

    Only rank 0 runs the encoders; workers hold just the DiT, each keeping per-session state.

    Start-up: launch ``dreamzero-engine-worker`` for ranks 1.. (:func:`spawn_worker`, or the launch
    file, with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), then
    :func:`connect_driver` on rank 0 and build the engine with that layout;
    :meth:`ParallelDriver.shutdown` ends the workers.

Backends: ``gloo`` (CPU tensors; used by the tests) or ``nccl`` (one GPU per rank).
"""

from __future__ import annotations

import argparse
from dataclasses import fields
import datetime
import enum
import os
from pathlib import Path
import socket
import subprocess
import sys

import torch
import torch.distributed as dist

from dreamzero_ros.cli_options import add_policy_source, new_parser
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.parallel.layout import mesh_problem, setup_rank
from dreamzero_ros.engine.parallel.tensor_parallel import shard_problem
from dreamzero_ros.engine.pipeline.denoise import (
    BranchLayout,
    ChunkDenoiser,
    ChunkInputs,
    DenoiseSession,
)
from dreamzero_ros.errors import CfgParallelError

__all__ = [
    'ParallelDriver',
    'announce_loaded',
    'connect_driver',
    'free_port',
    'init_process_group',
    'load_worker_dit',
    'loaded_key',
    'main',
    'run_worker',
    'spawn_worker',
]

_FLAG_FIELDS = ('new_window', 'need_video')
_TENSOR_FIELDS = tuple(f.name for f in fields(ChunkInputs) if f.name not in _FLAG_FIELDS)
_PROMPT_FIELDS = ('prompt_embeds', 'negative_prompt_embeds')


class _Command(enum.IntEnum):
    INFER = 1
    CLOSE = 2
    SHUTDOWN = 3


def _comm_device(dit: CausalWanDiT) -> torch.device:
    """Collectives take CPU tensors with gloo, the DiT's device otherwise."""
    return torch.device('cpu') if dist.get_backend() == 'gloo' else dit.device


class _Channel:
    """Rank 0 -> all ranks of the default group: a pickled header, then its tensors."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def send(self, header: dict, tensors: dict[str, torch.Tensor]) -> None:
        header = dict(header, tensors={k: (tuple(t.shape), t.dtype) for k, t in tensors.items()})
        dist.broadcast_object_list([header], src=0, device=self.device)
        for tensor in tensors.values():
            dist.broadcast(tensor.to(self.device).contiguous(), src=0)

    def receive(self) -> tuple[dict, dict[str, torch.Tensor]]:
        box: list = [None]
        dist.broadcast_object_list(box, src=0, device=self.device)
        header = box[0]
        tensors = {}
        for name, (shape, dtype) in header['tensors'].items():
            tensors[name] = torch.empty(shape, dtype=dtype, device=self.device)
            dist.broadcast(tensors[name], src=0)
        return header, tensors

    def agree(self, problem: str) -> None:
        """Share every rank's problem ('' for none); raise the first one anywhere."""
        statuses: list = [None] * dist.get_world_size()
        dist.all_gather_object(statuses, (dist.get_rank(), problem))
        failures = [f'rank {rank}: {text}' for rank, text in statuses if text]
        if failures:
            raise CfgParallelError('; '.join(failures))


class ParallelDriver(BranchLayout):
    """Rank 0's layout: give it to :class:`ChunkDenoiser` (or the engine) like any layout.

    Attaching to a denoiser performs the handshake with the workers (sampling config, DiT config,
    ``tp_size``), builds the ``cfg x tp`` mesh over the default group (``world / tp_size`` CFG
    branches, 1 or 2) and, if ``tp_size > 1``, joins the DiT's shard to its group (an engine
    built with this layout holds rank 0's shard only; a whole DiT is cut here).  Every chunk
    and session close is then forwarded to the workers before rank 0 computes its part.
    :meth:`shutdown` ends the worker loops.
    """

    def __init__(self, tp_size: int = 1) -> None:
        super().__init__()
        if dist.get_rank() != 0:
            raise CfgParallelError('the driver is rank 0; other ranks run run_worker()')
        self.tp_size = tp_size
        self._inner: BranchLayout | None = None
        self._channel: _Channel | None = None
        self._sent_prompts: dict[int, tuple[torch.Tensor | None, ...]] = {}
        self._closed = False

    @property
    def local_branches(self) -> tuple[str, ...]:
        """The branches rank 0 computes."""
        return self._inner.local_branches

    def combine(
        self, video: torch.Tensor, action: torch.Tensor, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """As the layout of rank 0's place in the mesh."""
        return self._inner.combine(video, action, batch)

    def attach(self, denoiser: ChunkDenoiser) -> None:
        """Handshake with the workers, build the mesh and shard; raise if any rank refuses."""
        if self._channel is not None:
            raise CfgParallelError('a parallel driver serves one denoiser')
        comm = _comm_device(denoiser.dit)
        self._channel = _Channel(comm)
        header = {'config': denoiser.config, 'dit_config': denoiser.dit.config}
        self._channel.send({**header, 'tp_size': self.tp_size}, {})
        try:
            self._channel.agree(
                mesh_problem(self.tp_size, denoiser.config.use_cfg)
                or shard_problem(denoiser.dit, self.tp_size, 0)
            )
        except CfgParallelError:
            self._closed = True
            raise
        self._inner = setup_rank(denoiser.dit, self.tp_size, denoiser.config.use_cfg, comm)
        self.branches = self._inner.branches

    def before_chunk(self, session: DenoiseSession, inputs: ChunkInputs) -> None:
        """Broadcast the chunk (prompts only when their tensors changed) to the workers."""
        self._check_open()
        prompts = (inputs.prompt_embeds, inputs.negative_prompt_embeds)
        sent = self._sent_prompts.get(session.session_id)
        reuse = sent is not None and all(a is b for a, b in zip(prompts, sent, strict=True))
        tensors = {
            name: getattr(inputs, name)
            for name in _TENSOR_FIELDS
            if getattr(inputs, name) is not None and not (reuse and name in _PROMPT_FIELDS)
        }
        header = {
            'command': _Command.INFER,
            'session': session.session_id,
            'new_window': inputs.new_window,
            'need_video': inputs.need_video,
            'reuse_prompts': reuse,
        }
        self._channel.send(header, tensors)
        self._sent_prompts[session.session_id] = prompts

    def on_close(self, session: DenoiseSession) -> None:
        """Drop the workers' copies of the session."""
        if self._closed or self._channel is None:
            return
        self._channel.send({'command': _Command.CLOSE, 'session': session.session_id}, {})
        self._sent_prompts.pop(session.session_id, None)

    def shutdown(self) -> None:
        """End the worker loops (the process group stays initialised); idempotent."""
        if not self._closed and self._inner is not None:
            self._channel.send({'command': _Command.SHUTDOWN}, {})
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise CfgParallelError('the parallel group was shut down')


def run_worker(dit: CausalWanDiT) -> int:
    """Serve a worker rank (>= 1) of the default group until shutdown; returns chunks run."""
    comm = _comm_device(dit)
    channel = _Channel(comm)
    header, _ = channel.receive()
    config, tp_size = header['config'], header['tp_size']
    problem = mesh_problem(tp_size, config.use_cfg) or shard_problem(
        dit, tp_size, dist.get_rank() % tp_size
    )
    if header['dit_config'] != dit.config:
        problem = f'DiT config {dit.config} != rank 0 {header["dit_config"]}'
    channel.agree(problem)
    denoiser = ChunkDenoiser(dit, config, setup_rank(dit, tp_size, config.use_cfg, comm))
    sessions: dict[int, DenoiseSession] = {}
    prompts: dict[int, dict[str, torch.Tensor]] = {}
    chunks = 0
    while True:
        header, tensors = channel.receive()
        command, sid = header['command'], header.get('session')
        if command == _Command.SHUTDOWN:
            return chunks
        if command == _Command.CLOSE:
            if sid in sessions:
                denoiser.close_session(sessions.pop(sid))
            prompts.pop(sid, None)
            continue
        if header['reuse_prompts']:
            tensors.update(prompts[sid])
        else:
            prompts[sid] = {k: tensors.get(k) for k in _PROMPT_FIELDS}
        values = {name: tensors.get(name) for name in _TENSOR_FIELDS}
        flags = {name: header[name] for name in _FLAG_FIELDS}
        inputs = ChunkInputs(**flags, **values)
        if sid not in sessions:
            sessions[sid] = denoiser.open_session(sid)
        denoiser.denoise_chunk(sessions[sid], inputs)
        chunks += 1


def init_process_group(
    rank: int,
    world_size: int,
    init_method: str = 'env://',
    backend: str | None = None,
    device: torch.device | str = 'cpu',
    timeout_s: float = 600.0,
) -> None:
    """Join the default process group.

    ``init_method`` is ``env://`` (``MASTER_ADDR``/``MASTER_PORT``) or ``tcp://host:port``; the
    backend defaults to ``nccl`` for a CUDA ``device`` and ``gloo`` otherwise.
    """
    device = torch.device(device)
    if backend is None:
        backend = 'nccl' if device.type == 'cuda' else 'gloo'
    if device.type == 'cuda':
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def connect_driver(
    master_addr: str,
    master_port: int,
    device: torch.device | str = 'cpu',
    world_size: int = 2,
    tp_size: int = 1,
    backend: str | None = None,
    timeout_s: float = 600.0,
) -> ParallelDriver:
    """Join the group as rank 0 (blocks until the workers join) and return the driver layout.

    ``world_size / tp_size`` is the number of CFG-parallel branches (1 or 2).
    """
    init_process_group(
        0, world_size, f'tcp://{master_addr}:{master_port}', backend, device, timeout_s
    )
    return ParallelDriver(tp_size)


def free_port(host: str = '127.0.0.1') -> int:
    """A currently free local TCP port (for a rendezvous)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def spawn_worker(
    master_addr: str,
    master_port: int,
    model_args: list[str],
    device: str = 'cpu',
    dtype: str = 'bfloat16',
    rank: int = 1,
    world_size: int = 2,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``dreamzero-engine-worker`` for ``rank`` as a child process (``env://`` rendezvous).

    ``model_args`` selects the weights: ``['--checkpoint', folder]`` (with
    ``['--base-checkpoint', base]`` for a LoRA-only checkpoint, ``['--encoder-dir', folder]``)
    or ``['--preset', name, '--seed', seed]``.
    """
    rendezvous = {
        'MASTER_ADDR': master_addr,
        'MASTER_PORT': str(master_port),
        'RANK': str(rank),
        'WORLD_SIZE': str(world_size),
    }
    command = [
        sys.executable, '-m', 'dreamzero_ros.engine.parallel.cfg_parallel',
        '--device', device, '--dtype', dtype, *model_args,
    ]  # fmt: skip
    return subprocess.Popen(command, env={**os.environ, **rendezvous, **(env or {})})


def loaded_key(rank: int) -> str:
    """Rendezvous-store key a worker sets once its weights are loaded, before it joins."""
    return f'dreamzero/worker_loaded/{rank}'


def announce_loaded(rank: int, timeout_s: float) -> None:
    """Set :func:`loaded_key` in the ``MASTER_ADDR:MASTER_PORT`` store.

    Rank 0 may wait for it (watching the worker processes) before it joins the group, so that a
    worker that fails while loading is noticed at once rather than after the join timeout.
    """
    store = dist.TCPStore(
        os.environ['MASTER_ADDR'],
        int(os.environ['MASTER_PORT']),
        is_master=False,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    store.set(loaded_key(rank), '1')


def load_worker_dit(
    device: torch.device | str,
    dtype: str,
    checkpoint: str | Path | None = None,
    preset: str = 'droid_14b',
    seed: int = 0,
    base_checkpoint: str | Path | None = None,
    encoder_dir: str | Path | None = None,
    fp8_linear: str = 'off',
    tp_rank: int = 0,
    tp_size: int = 1,
) -> CausalWanDiT:
    """The DiT a worker serves: from a checkpoint, or seeded random weights of a preset.

    With ``tp_size`` > 1 only its shard ``tp_rank`` is built and filled
    (:func:`.tensor_parallel.shard_dit_`); with ``fp8_linear`` its block linears are held in
    FP8 from the start, each quantized as it loads (after the cut, with the shard's own
    scales), so the worker holds neither the model-dtype DiT nor the other ranks' weights.

    The random DiT equals that of ``DreamZeroEngine.from_config(EngineConfig.<preset>(), seed)``
    on the same device type and dtype (cut the same way).  From a checkpoint (LoRA adapters
    merged, a LoRA-only one on ``base_checkpoint``), the other components are checked (strictly,
    as the engine does) but loaded only onto the ``meta`` device.
    """
    from dreamzero_ros.engine.checkpoint.upstream_config import read_config
    from dreamzero_ros.engine.checkpoint.weights import load_checkpoint
    from dreamzero_ros.engine.config import EngineConfig
    from dreamzero_ros.engine.memory.placement import build_dit, build_modules
    from dreamzero_ros.engine.speed.acceleration import AccelerationConfig

    if checkpoint is not None:
        config = read_config(checkpoint, device=str(device), dtype=dtype)
    else:
        config = EngineConfig.preset(preset, device=str(device), dtype=dtype)
    config = config.replace(acceleration=AccelerationConfig(fp8_linear=fp8_linear))
    dit = build_dit(config, None if checkpoint is not None else seed, tp_rank, tp_size)
    if checkpoint is None:
        return dit
    modules = build_modules(config.replace(device='meta')).as_dict()
    load_checkpoint(
        checkpoint, {**modules, 'dit': dit}, base=base_checkpoint, encoder_dir=encoder_dir
    )
    return dit


#: The engine options (:class:`~dreamzero_ros.engine.options.EngineOptions`) a worker takes
#: from rank 0.
WORKER_ENGINE_OPTIONS = (
    'device',
    'dtype',
    'base_checkpoint',
    'encoder_dir',
    'fp8_linear',
    'tensor_parallel',
)


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-engine-worker``."""
    from dreamzero_ros.engine.config import PRESETS
    from dreamzero_ros.engine.loader import add_engine_arguments

    parser = new_parser(
        'dreamzero-engine-worker',
        'Serve a worker rank of a multi-process DreamZero engine (CFG / tensor parallel) until '
        'rank 0 shuts it down. The rendezvous comes from RANK, WORLD_SIZE, MASTER_ADDR and '
        'MASTER_PORT (or --init-method). Rank 0 starts it with its own engine options.',
    )
    add_policy_source(
        parser,
        PRESETS,
        remote=False,
        preset_help='seeded random weights (--seed) of a preset architecture instead of a '
        'checkpoint (benchmarks)',
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of the --preset weights')
    add_engine_arguments(parser, WORKER_ENGINE_OPTIONS)
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
    """Console script ``dreamzero-engine-worker``: one worker rank of a CFG-parallel group."""
    from dreamzero_ros.engine.loader import resolve_device_dtype

    parser = build_parser()
    args = parser.parse_args(argv)
    rank = args.rank if args.rank is not None else int(os.environ.get('RANK', '1'))
    world_size = args.world_size or int(os.environ.get('WORLD_SIZE', '2'))
    if rank < 1:
        parser.error('workers are ranks >= 1; rank 0 is the engine (ParallelDriver)')
    device, dtype = resolve_device_dtype(args.device, args.dtype)
    dit = load_worker_dit(
        device,
        dtype,
        args.checkpoint,
        args.preset or 'droid_14b',
        args.seed,
        args.base_checkpoint or None,
        args.encoder_dir or None,
        args.fp8_linear,
        rank % args.tensor_parallel,
        args.tensor_parallel,
    )
    if args.init_method == 'env://':
        announce_loaded(rank, args.timeout)
    init_process_group(rank, world_size, args.init_method, args.backend, device, args.timeout)
    try:
        chunks = run_worker(dit)
    finally:
        dist.destroy_process_group()
    print(f'dreamzero-engine-worker rank {rank}: {chunks} chunks, shut down', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
