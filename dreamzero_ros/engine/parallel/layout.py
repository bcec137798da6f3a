# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the CFG branches and tensor-parallel shards of a multi-process engine run.

The world is a ``cfg x tp`` grid, global rank ``= cfg_rank * tp_size + tp_rank`` (1 or 2 CFG
branches): 2 ranks = CFG parallel, or TP 2 with batched CFG; 4 ranks = CFG 2 x TP 2.
:func:`setup_rank` builds the process groups, shards the DiT for tensor parallel
(:mod:`.tensor_parallel`) and gives the rank's :class:`~.denoise.BranchLayout`: with 2 CFG
ranks a :class:`CfgParallelLayout`, whose ranks exchange their velocities every DiT step.
The processes themselves (driver, workers, rendezvous) are :mod:`.cfg_parallel`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.parallel.tensor_parallel import join_group_, shard_dit_
from dreamzero_ros.engine.pipeline.denoise import BranchLayout
from dreamzero_ros.errors import CfgParallelError

__all__ = ['CfgParallelLayout', 'ParallelMesh', 'make_mesh', 'mesh_problem', 'setup_rank']


class CfgParallelLayout(BranchLayout):
    """One CFG branch per rank of a 2-rank group; velocities all-gathered every DiT step."""

    def __init__(
        self, group: dist.ProcessGroup | None = None, comm_device: torch.device | None = None
    ) -> None:
        super().__init__(use_cfg=True)
        if dist.get_world_size(group) != 2:
            raise CfgParallelError(f'CFG parallel needs 2 ranks, got {dist.get_world_size(group)}')
        self.group = group
        self.rank = dist.get_rank(group)
        self.comm_device = comm_device or torch.device('cpu')

    @property
    def local_branches(self) -> tuple[str, ...]:
        """Rank 0 of the group: the conditional branch; rank 1: the unconditional one."""
        return (self.branches[self.rank],)

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


def setup_rank(dit: CausalWanDiT, tp_size: int, use_cfg: bool, comm: torch.device):
    """Build the mesh, shard the DiT for tensor parallel, and return this rank's layout.

    A DiT built as this rank's shard (:func:`.tensor_parallel.shard_problem` checked that it is)
    joins its group; a whole one is cut first.
    """
    mesh = make_mesh(tp_size)
    if tp_size > 1:
        if dit.tensor_parallel is None:
            shard_dit_(dit, mesh.tp_rank, tp_size)
        join_group_(dit, mesh.tp_group)
    if mesh.cfg_size == 2:
        return CfgParallelLayout(mesh.cfg_group, comm)
    return BranchLayout(use_cfg)
