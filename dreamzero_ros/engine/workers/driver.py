# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rank 0's side of a multi-process engine, and the branch layout of every rank.

CFG parallel: with 2 CFG ranks, rank 0 runs the conditional branch (prompt) and the other the
unconditional one (negative prompt); each keeps its own K/V caches and cross-attention context per
session.  Every DiT step the two exchange their velocities (:func:`.mesh.gather_branches`); both
compute the same CFG-combined video velocity and take the conditional action velocity, so their
schedulers and noisy samples stay identical step by step.  When the chunk's video is not
wanted, both ranks know (from the broadcast chunk) that the last DiT call needs the conditional
branch only: rank 0 runs it alone, with no exchange, and the unconditional rank idles (its own
copy of the actions is then not the chunk's; only rank 0's count).  Results equal the
one-process batched run (:class:`~.denoise.ChunkDenoiser`) to float tolerance.

Tensor parallel: ``tp_size`` ranks per branch each hold ``heads / tp_size`` attention heads and
``ffn_dim / tp_size`` FFN columns (:mod:`.tensor_parallel`) in a ``cfg x tp`` grid
(:mod:`.mesh`); the CFG exchange runs between the two ranks holding the same TP shard.

Rank 0 lives in the caller's process (the ROS node or the OpenPI bridge): its engine
(``DreamZeroEngine.from_pretrained(..., layout=driver)``) uses a :class:`ParallelDriver` as its
branch layout, which forwards every chunk and session close to the workers (:mod:`.protocol`)
before rank 0 computes its part.  Only rank 0 runs the encoders; workers hold just the DiT.
Backends: ``gloo`` (CPU tensors; used by the tests) or ``nccl`` (one GPU per rank).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.parallel.mesh import gather_branches, make_mesh, mesh_problem
from dreamzero_ros.engine.parallel.tensor_parallel import join_group_, shard_dit_, shard_problem
from dreamzero_ros.engine.pipeline.denoise import (
    BranchLayout,
    ChunkDenoiser,
    ChunkInputs,
    DenoiseSession,
)
from dreamzero_ros.engine.workers.protocol import (
    PROMPT_FIELDS,
    TENSOR_FIELDS,
    Channel,
    Command,
    comm_device,
    init_process_group,
)
from dreamzero_ros.errors import CfgParallelError

__all__ = ['CfgParallelLayout', 'ParallelDriver', 'connect_driver', 'setup_rank']


class CfgParallelLayout(BranchLayout):
    """One CFG branch per rank of a 2-rank group; velocities all-gathered every DiT step."""

    def __init__(
        self, group: dist.ProcessGroup | None = None, comm: torch.device | None = None
    ) -> None:
        super().__init__(use_cfg=True)
        if dist.get_world_size(group) != 2:
            raise CfgParallelError(f'CFG parallel needs 2 ranks, got {dist.get_world_size(group)}')
        self.group = group
        self.rank = dist.get_rank(group)
        self.comm_device = comm or torch.device('cpu')

    @property
    def local_branches(self) -> tuple[str, ...]:
        """Rank 0 of the group: the conditional branch; rank 1: the unconditional one."""
        return (self.branches[self.rank],)

    def combine(
        self, video: torch.Tensor, action: torch.Tensor, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """All-gather this rank's velocities; return (video_cond, video_uncond, action_cond)."""
        return gather_branches(video, action, self.group, self.comm_device)


def setup_rank(dit: CausalWanDiT, tp_size: int, use_cfg: bool, comm: torch.device) -> BranchLayout:
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


class ParallelDriver(BranchLayout):
    """Rank 0's layout: give it to :class:`ChunkDenoiser` (or the engine) like any layout.

    Attaching to a denoiser performs the handshake with the workers (:mod:`.protocol`), builds
    the ``cfg x tp`` mesh over the default group (``world / tp_size`` CFG branches, 1 or 2) and,
    if ``tp_size > 1``, joins the DiT's shard to its group (an engine built with this layout
    holds rank 0's shard only; a whole DiT is cut here).  Every chunk and session close is then
    forwarded to the workers before rank 0 computes its part.  :meth:`shutdown` ends the worker
    loops.
    """

    def __init__(self, tp_size: int = 1) -> None:
        super().__init__()
        if dist.get_rank() != 0:
            raise CfgParallelError('the driver is rank 0; other ranks run a worker')
        self.tp_size = tp_size
        self._inner: BranchLayout | None = None
        self._channel: Channel | None = None
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
        comm = comm_device(denoiser.dit.device)
        self._channel = Channel(comm)
        header = {
            'sampling': denoiser.sampling,
            'compile_backend': denoiser.compile_backend,
            'options': denoiser.options.engine_fields(),
            'dit_config': denoiser.dit.config,
            'tp_size': self.tp_size,
        }
        self._channel.send(header, {})
        use_cfg = denoiser.sampling.use_cfg
        try:
            self._channel.agree(
                mesh_problem(self.tp_size, use_cfg) or shard_problem(denoiser.dit, self.tp_size, 0)
            )
        except CfgParallelError:
            self._closed = True
            raise
        self._inner = setup_rank(denoiser.dit, self.tp_size, use_cfg, comm)
        self.branches = self._inner.branches

    def before_chunk(self, session: DenoiseSession, inputs: ChunkInputs) -> None:
        """Broadcast the chunk (prompts only when their tensors changed) to the workers."""
        self._check_open()
        prompts = (inputs.prompt_embeds, inputs.negative_prompt_embeds)
        sent = self._sent_prompts.get(session.session_id)
        reuse = sent is not None and all(a is b for a, b in zip(prompts, sent, strict=True))
        tensors = {
            name: getattr(inputs, name)
            for name in TENSOR_FIELDS
            if getattr(inputs, name) is not None and not (reuse and name in PROMPT_FIELDS)
        }
        header = {
            'command': Command.INFER,
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
        self._channel.send({'command': Command.CLOSE, 'session': session.session_id}, {})
        self._sent_prompts.pop(session.session_id, None)

    def shutdown(self) -> None:
        """End the worker loops (the process group stays initialised); idempotent."""
        if not self._closed and self._inner is not None:
            self._channel.send({'command': Command.SHUTDOWN}, {})
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise CfgParallelError('the parallel group was shut down')


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
