# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``cfg x tp`` grid of a multi-process engine, and the CFG branches' velocity exchange.

The world is a ``cfg x tp`` grid, global rank ``= cfg_rank * tp_size + tp_rank`` (1 or 2 CFG
branches): 2 ranks = CFG parallel, or TP 2 with batched CFG; 4 ranks = CFG 2 x TP 2.
:func:`make_mesh` builds the process groups; with 2 CFG branches the two ranks holding the same
tensor-parallel shard exchange their velocities every DiT step (:func:`gather_branches`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ['ParallelMesh', 'gather_branches', 'make_mesh', 'mesh_problem']


@dataclass(frozen=True)
class ParallelMesh:
    """A rank's place in the ``cfg x tp`` grid of the default group (rank = cfg * tp + t)."""

    cfg_size: int
    tp_size: int
    cfg_rank: int
    tp_rank: int
    cfg_group: dist.ProcessGroup | None  # this shard's two branch ranks (None: the world)
    tp_group: dist.ProcessGroup | None  # this branch's tensor-parallel ranks


def mesh_problem(tp_size: int, use_cfg: bool) -> str:
    """Why the default group cannot form ``cfg x tp`` ranks ('' if it can)."""
    world = dist.get_world_size()
    if tp_size < 1 or world % tp_size or world // tp_size not in (1, 2):
        return f'{world} ranks do not form (1 or 2 CFG branches) x {tp_size} tensor-parallel ranks'
    if world // tp_size == 2 and not use_cfg:
        return 'CFG parallel needs cfg_scale != 1'
    return ''


def make_mesh(tp_size: int) -> ParallelMesh:
    """Create the process groups; collective: every rank calls it with the same ``tp_size``."""
    world, rank = dist.get_world_size(), dist.get_rank()
    cfg_size = world // tp_size
    cfg_rank, tp_rank = divmod(rank, tp_size)
    cfg_group = tp_group = None
    if tp_size > 1:
        for c in range(cfg_size):
            group = dist.new_group([c * tp_size + t for t in range(tp_size)])
            tp_group = group if c == cfg_rank else tp_group
        if cfg_size > 1:
            for t in range(tp_size):
                group = dist.new_group([t, tp_size + t])
                cfg_group = group if t == tp_rank else cfg_group
    return ParallelMesh(cfg_size, tp_size, cfg_rank, tp_rank, cfg_group, tp_group)


def gather_branches(
    video: torch.Tensor,
    action: torch.Tensor,
    group: dist.ProcessGroup | None,
    comm_device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(video_cond, video_uncond, action_cond)``: both CFG ranks' velocities, all-gathered.

    Each of the two ranks of ``group`` passes the velocities of its own branch (rank 0: the
    conditional one); video and action travel in one buffer through ``comm_device``.
    """
    packed = torch.cat([video.flatten(), action.flatten()]).to(comm_device)
    gathered = [torch.empty_like(packed) for _ in range(2)]
    dist.all_gather(gathered, packed, group=group)
    cond, uncond = (g.to(video.device) for g in gathered)
    n = video.numel()
    return cond[:n].view_as(video), uncond[:n].view_as(video), cond[n:].view_as(action)
