# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What rank 0 and the worker ranks say to each other, and how they meet.

Start-up: a worker loads its weights, sets :func:`loaded_key` in rank 0's rendezvous store
(:func:`announce_loaded`) and joins the default process group (:func:`init_process_group`).
Rank 0 then sends, over a :class:`Channel` (a pickled header, then its tensors, broadcast from
rank 0), a handshake: its sampling, its DiT's config, ``tp_size`` and its engine options; every
rank answers with its problem ('' for none, :meth:`Channel.agree`), among them options that
differ from rank 0's where every rank must share them (:func:`options_problem`).  Then one
:class:`Command` per message:

* ``INFER``: session id, the chunk's flags and its :class:`~.denoise.ChunkInputs` tensors (the
  prompt tensors only when they changed);
* ``CLOSE``: drop that session's state (caches, context);
* ``SHUTDOWN``: leave the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
import datetime
import enum
import os
import socket

import torch
import torch.distributed as dist

from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.denoise import ChunkInputs
from dreamzero_ros.errors import CfgParallelError

__all__ = [
    'FLAG_FIELDS',
    'PER_RANK_OPTIONS',
    'PROMPT_FIELDS',
    'TENSOR_FIELDS',
    'Channel',
    'Command',
    'announce_loaded',
    'comm_device',
    'free_port',
    'init_process_group',
    'loaded_key',
    'options_problem',
]

#: :class:`ChunkInputs` fields sent in the header; the others are tensors.
FLAG_FIELDS = ('new_window', 'need_video')
TENSOR_FIELDS = tuple(f.name for f in fields(ChunkInputs) if f.name not in FLAG_FIELDS)
#: Tensor fields sent only when rank 0's tensors changed.
PROMPT_FIELDS = ('prompt_embeds', 'negative_prompt_embeds')
#: Engine options each rank has its own value of; every other one every rank shares.
PER_RANK_OPTIONS = frozenset({'device', 'worker_gpus', 'num_threads'})


class Command(enum.IntEnum):
    """What a message after the handshake asks the workers to do."""

    INFER = 1
    CLOSE = 2
    SHUTDOWN = 3


class Channel:
    """Rank 0 -> all ranks of the default group: a pickled header, then its tensors."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def send(self, header: dict, tensors: dict[str, torch.Tensor]) -> None:
        """Broadcast ``header`` and ``tensors`` (rank 0)."""
        header = dict(header, tensors={k: (tuple(t.shape), t.dtype) for k, t in tensors.items()})
        dist.broadcast_object_list([header], src=0, device=self.device)
        for tensor in tensors.values():
            dist.broadcast(tensor.to(self.device).contiguous(), src=0)

    def receive(self) -> tuple[dict, dict[str, torch.Tensor]]:
        """The next header and its tensors (ranks >= 1)."""
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


def comm_device(dit_device: torch.device) -> torch.device:
    """Collectives take CPU tensors with gloo, the DiT's device otherwise."""
    return torch.device('cpu') if dist.get_backend() == 'gloo' else dit_device


def options_problem(own: EngineOptions, rank0: Mapping[str, object]) -> str:
    """Why this rank's options cannot serve rank 0's (its :meth:`~.EngineOptions.engine_fields`).

    '' when every option but :data:`PER_RANK_OPTIONS` has rank 0's value.
    """
    mine = own.engine_fields()
    differing = sorted(
        name for name in mine if name not in PER_RANK_OPTIONS and mine[name] != rank0[name]
    )
    if not differing:
        return ''
    shown = ', '.join(f'{name} {mine[name]!r} (rank 0: {rank0[name]!r})' for name in differing)
    return f'engine options differ from rank 0: {shown}'


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


def free_port(host: str = '127.0.0.1') -> int:
    """A currently free local TCP port (for a rendezvous)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def loaded_key(rank: int) -> str:
    """Rendezvous-store key a worker sets once its weights are loaded, before it joins."""
    return f'dreamzero/worker_loaded/{rank}'


def announce_loaded(rank: int, timeout_s: float) -> None:
    """Set :func:`loaded_key` in the ``MASTER_ADDR:MASTER_PORT`` store.

    Rank 0 waits for it (watching the worker processes) before it joins the group, so that a
    worker that fails while loading is noticed at once rather than after the join timeout.
    """
    store = dist.TCPStore(
        os.environ['MASTER_ADDR'],
        int(os.environ['MASTER_PORT']),
        is_master=False,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    store.set(loaded_key(rank), '1')
