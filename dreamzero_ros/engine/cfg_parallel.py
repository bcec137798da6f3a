# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""CFG parallel: the two classifier-free-guidance branches on two processes (torch.distributed).

Rank 0 runs the conditional branch (prompt), rank 1 the unconditional one (negative prompt); each
keeps its own K/V caches and cross-attention context per session.  Every DiT step, the ranks
exchange their velocities with one ``all_gather`` (video and action packed into one buffer) and
both compute the same CFG-combined video velocity and take the conditional action velocity, so
their schedulers and noisy samples stay identical step by step.  The results equal those of the
one-process batched run (:class:`~dreamzero_ros.engine.denoise.ChunkDenoiser`) to float tolerance.

Driver/worker arrangement
    Rank 0 lives in the caller's process (the ROS node or the OpenPI bridge): its denoiser (or
    the engine, ``DreamZeroEngine.from_pretrained(..., layout=driver)``) uses a
    :class:`CfgParallelDriver` as its branch layout.  The driver's hooks forward every chunk and
    session close to the worker before rank 0 runs its own branch.  Rank 1 runs
    :func:`run_worker` (console script ``dreamzero-engine-worker``), which obeys broadcast
    commands:

    * ``infer``: session id + :class:`~dreamzero_ros.engine.denoise.ChunkInputs` tensors (prompt
      tensors are sent only when the driver's prompt tensors changed);
    * ``close``: drop that session's state (caches, context);
    * ``shutdown``: leave the loop.

    Only rank 0 runs the encoders; workers hold just the DiT.  Attaching the driver to a denoiser
    is a handshake: it sends the :class:`~dreamzero_ros.engine.denoise.DenoiseConfig`, and the
    worker checks that it built the same :class:`~dreamzero_ros.engine.dit.DiTConfig`; a worker
    that cannot serve says why and the driver raises :class:`CfgParallelError`.

    Start-up: launch ``dreamzero-engine-worker`` (:func:`spawn_worker`, or the launch file, with
    ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), then :func:`connect_driver` on
    rank 0 and build the engine with that layout; :meth:`CfgParallelDriver.shutdown` ends the
    worker.

Backends: ``gloo`` (CPU tensors; used by the tests) or ``nccl`` (one GPU per rank).

Tensor parallel (next step; designed, not built)
    A second mesh dimension ``tp`` splits attention heads across ranks within each CFG branch
    (4 GPUs = cfg 2 x tp 2).  Per block: ``q, k, v`` (self and cross, ``k_img, v_img``) become
    column-parallel linears holding ``heads / tp`` heads; QK RMSNorm normalises over the full
    ``dim``, so each rank all-reduces its partial sum of squares (a ``(B, L, 1)`` tensor) before
    scaling its slice (the norm weights are sliced like the heads); attention needs no
    communication (whole heads are local) and the K/V cache holds only local heads (memory / tp);
    ``o`` is row-parallel and its output is all-reduced (sum) before the gated residual;
    ``ffn.0`` is column-parallel, ``ffn.2`` row-parallel plus an all-reduce.  Embeddings, time
    projections, modulations, the head and the action/state MLPs stay replicated (they are <3% of
    the FLOPs).  That is 3 all-reduces of ``(B, L, dim)`` and 2 tiny ones per block.  Checkpoint
    loading slices ``q/k/v/k_img/v_img/ffn.0`` weights by rows (biases too) and ``o/ffn.2`` by
    columns (biases added once, on tp rank 0).  The CFG exchange above then runs between tp-peers
    of the two branches (one all-gather per tp rank pair), after the tp all-reduces.
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

from .denoise import BranchLayout, ChunkDenoiser, ChunkInputs, DenoiseSession
from .dit import CausalWanDiT

__all__ = [
    'CfgParallelDriver',
    'CfgParallelError',
    'CfgParallelLayout',
    'connect_driver',
    'free_port',
    'init_process_group',
    'load_worker_dit',
    'main',
    'run_worker',
    'spawn_worker',
]

_TENSOR_FIELDS = tuple(f.name for f in fields(ChunkInputs) if f.name != 'new_window')
_PROMPT_FIELDS = ('prompt_embeds', 'negative_prompt_embeds')


class CfgParallelError(RuntimeError):
    """The CFG-parallel group cannot work (a worker failed or was configured differently)."""


class _Command(enum.IntEnum):
    INFER = 1
    CLOSE = 2
    SHUTDOWN = 3


class CfgParallelLayout(BranchLayout):
    """One CFG branch per rank; velocities of both branches all-gathered every DiT step."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        super().__init__(use_cfg=True)
        if dist.get_world_size(group) != 2:
            raise CfgParallelError(f'CFG parallel needs 2 ranks, got {dist.get_world_size(group)}')
        self.group = group
        self.rank = dist.get_rank(group)
        self.comm_device = torch.device('cpu')

    @property
    def local_branches(self) -> tuple[str, ...]:
        """Rank 0: the conditional branch; rank 1: the unconditional one."""
        return (self.branches[self.rank],)

    def attach(self, denoiser: ChunkDenoiser) -> None:
        """Collectives run on the CPU for gloo, on the DiT's device otherwise."""
        gloo = dist.get_backend(self.group) == 'gloo'
        self.comm_device = torch.device('cpu') if gloo else denoiser.dit.device

    def combine(
        self, video: torch.Tensor, action: torch.Tensor, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """All-gather this rank's velocities; return (video_cond, video_uncond, action_cond)."""
        packed = torch.cat([video.flatten(), action.flatten()]).to(self.comm_device)
        gathered = [torch.empty_like(packed) for _ in range(2)]
        dist.all_gather(gathered, packed, group=self.group)
        cond, uncond = (g.to(video.device) for g in gathered)
        n = video.numel()
        return cond[:n].view_as(video), uncond[:n].view_as(video), cond[n:].view_as(action)


class _Channel:
    """Rank 0 -> workers: a pickled header, then the tensors it announces, by broadcast."""

    def __init__(self, layout: CfgParallelLayout) -> None:
        self.layout = layout
        group = layout.group
        self.src = 0 if group is None else dist.get_global_rank(group, 0)

    def send(self, header: dict, tensors: dict[str, torch.Tensor]) -> None:
        group, device = self.layout.group, self.layout.comm_device
        header = dict(header, tensors={k: (tuple(t.shape), t.dtype) for k, t in tensors.items()})
        dist.broadcast_object_list([header], src=self.src, group=group, device=device)
        for tensor in tensors.values():
            dist.broadcast(tensor.to(device).contiguous(), src=self.src, group=group)

    def receive(self) -> tuple[dict, dict[str, torch.Tensor]]:
        group, device = self.layout.group, self.layout.comm_device
        box: list = [None]
        dist.broadcast_object_list(box, src=self.src, group=group, device=device)
        header = box[0]
        tensors = {}
        for name, (shape, dtype) in header['tensors'].items():
            tensors[name] = torch.empty(shape, dtype=dtype, device=device)
            dist.broadcast(tensors[name], src=self.src, group=group)
        return header, tensors

    def gather_status(self, ok: bool, message: str) -> list[tuple[bool, str]]:
        statuses: list = [None] * dist.get_world_size(self.layout.group)
        dist.all_gather_object(statuses, (ok, message), group=self.layout.group)
        return statuses


class CfgParallelDriver(CfgParallelLayout):
    """Rank 0's layout: give it to :class:`ChunkDenoiser` (or the engine) like any layout.

    Attaching to a denoiser performs the handshake with the worker; every chunk and session
    close is then forwarded to it before rank 0 runs its own branch.  Call :meth:`shutdown` to
    end the worker loop.
    """

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        super().__init__(group)
        if self.rank != 0:
            raise CfgParallelError('the driver is rank 0; other ranks run run_worker()')
        self._channel = _Channel(self)
        self._sent_prompts: dict[int, tuple[torch.Tensor | None, ...]] = {}
        self._attached = False
        self._closed = False

    def attach(self, denoiser: ChunkDenoiser) -> None:
        """Send the sampling config, check the worker's DiT config; raise if it refuses."""
        if self._attached:
            raise CfgParallelError('a CFG-parallel driver serves one denoiser')
        super().attach(denoiser)
        self._channel.send({'config': denoiser.config, 'dit_config': denoiser.dit.config}, {})
        failures = [m for ok, m in self._channel.gather_status(True, '') if not ok]
        if failures:
            self._closed = True
            raise CfgParallelError(f'CFG-parallel worker refused: {failures[0]}')
        self._attached = True

    def before_chunk(self, session: DenoiseSession, inputs: ChunkInputs) -> None:
        """Broadcast the chunk (prompts only when their tensors changed) to the worker."""
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
            'reuse_prompts': reuse,
        }
        self._channel.send(header, tensors)
        self._sent_prompts[session.session_id] = prompts

    def on_close(self, session: DenoiseSession) -> None:
        """Drop the worker's copy of the session."""
        if self._closed:
            return
        self._channel.send({'command': _Command.CLOSE, 'session': session.session_id}, {})
        self._sent_prompts.pop(session.session_id, None)

    def shutdown(self) -> None:
        """End the worker loop (the process group stays initialised); idempotent."""
        if not self._closed and self._attached:
            self._channel.send({'command': _Command.SHUTDOWN}, {})
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise CfgParallelError('the CFG-parallel group was shut down')


def run_worker(dit: CausalWanDiT, group: dist.ProcessGroup | None = None) -> int:
    """Serve rank 1 of a CFG-parallel group until shutdown; returns the number of chunks run."""
    layout = CfgParallelLayout(group)
    layout.comm_device = torch.device('cpu') if dist.get_backend(group) == 'gloo' else dit.device
    channel = _Channel(layout)
    header, _ = channel.receive()
    problem = ''
    if header['dit_config'] != dit.config:
        problem = f'rank {layout.rank} DiT config {dit.config} != rank 0 {header["dit_config"]}'
    channel.gather_status(not problem, problem)
    if problem:
        raise CfgParallelError(problem)
    denoiser = ChunkDenoiser(dit, header['config'], layout)
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
        inputs = ChunkInputs(new_window=header['new_window'], **values)
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
    backend: str | None = None,
    timeout_s: float = 600.0,
) -> CfgParallelDriver:
    """Join the group as rank 0 (blocks until the workers join) and return the driver layout."""
    init_process_group(
        0, world_size, f'tcp://{master_addr}:{master_port}', backend, device, timeout_s
    )
    return CfgParallelDriver()


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

    ``model_args`` selects the weights: ``['--checkpoint', folder]`` or
    ``['--random-weights', seed, '--preset', name]``.
    """
    rendezvous = {
        'MASTER_ADDR': master_addr,
        'MASTER_PORT': str(master_port),
        'RANK': str(rank),
        'WORLD_SIZE': str(world_size),
    }
    command = [
        sys.executable, '-m', 'dreamzero_ros.engine.cfg_parallel',
        '--device', device, '--dtype', dtype, *model_args,
    ]  # fmt: skip
    return subprocess.Popen(command, env={**os.environ, **rendezvous, **(env or {})})


def load_worker_dit(
    device: torch.device | str,
    dtype: str,
    checkpoint: str | Path | None = None,
    preset: str = 'droid_14b',
    seed: int = 0,
) -> CausalWanDiT:
    """The DiT a worker serves: from a checkpoint, or seeded random weights of a preset.

    The random DiT equals that of ``DreamZeroEngine.from_config(EngineConfig.<preset>(), seed)``
    on the same device type and dtype.  From a checkpoint, the other components are checked
    (strictly, as the engine does) but loaded only onto the ``meta`` device.
    """
    from .checkpoint import load_weights, randomize_, skip_init
    from .config import EngineConfig
    from .pipeline import build_modules

    if checkpoint is not None:
        config = EngineConfig.from_pretrained(checkpoint, device=str(device), dtype=dtype)
    else:
        config = EngineConfig.preset(preset, device=str(device), dtype=dtype)
    with skip_init(device, config.torch_dtype):
        dit = CausalWanDiT(config.dit)
    dit.eval().requires_grad_(False)
    if checkpoint is None:
        return randomize_(dit, seed)
    modules = build_modules(config.replace(device='meta')).as_dict()
    load_weights(checkpoint, {**modules, 'dit': dit})
    return dit


def main(argv: list[str] | None = None) -> int:
    """Console script ``dreamzero-engine-worker``: one worker rank of a CFG-parallel group."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-engine-worker',
        description='Serve the unconditional CFG branch of a DreamZero engine (rank 1) until rank '
        '0 shuts it down. The rendezvous comes from RANK, WORLD_SIZE, MASTER_ADDR and '
        'MASTER_PORT (or --init-method).',
    )
    parser.add_argument('--device', default='cpu', help='torch device of this rank')
    parser.add_argument('--dtype', default='bfloat16', help='bfloat16, float16 or float32')
    weights = parser.add_mutually_exclusive_group(required=True)
    weights.add_argument('--checkpoint', help='checkpoint folder (DreamZero-DROID layout)')
    weights.add_argument(
        '--random-weights', type=int, metavar='SEED', help='seeded random weights (benchmarks)'
    )
    parser.add_argument('--preset', default='droid_14b', help='preset for --random-weights')
    parser.add_argument('--init-method', default='env://', help='rendezvous (default env://)')
    parser.add_argument('--rank', type=int, help='this rank (default: $RANK)')
    parser.add_argument('--world-size', type=int, help='ranks in the group (default: $WORLD_SIZE)')
    parser.add_argument('--backend', choices=('gloo', 'nccl'), help='default: by --device')
    parser.add_argument('--timeout', type=float, default=600.0, help='collective timeout (s)')
    args = parser.parse_args(argv)
    rank = args.rank if args.rank is not None else int(os.environ.get('RANK', '1'))
    world_size = args.world_size or int(os.environ.get('WORLD_SIZE', '2'))
    if rank < 1:
        parser.error('workers are ranks >= 1; rank 0 is the engine (CfgParallelDriver)')
    dit = load_worker_dit(
        args.device, args.dtype, args.checkpoint, args.preset, args.random_weights or 0
    )
    init_process_group(rank, world_size, args.init_method, args.backend, args.device, args.timeout)
    try:
        chunks = run_worker(dit)
    finally:
        dist.destroy_process_group()
    print(f'dreamzero-engine-worker rank {rank}: {chunks} chunks, shut down', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
