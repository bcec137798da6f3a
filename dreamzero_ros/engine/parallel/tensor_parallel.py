# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Tensor parallel for the causal DiT: attention heads and FFN columns split across ranks.

:func:`shard_dit_` cuts a :class:`~.dit.CausalWanDiT` down to the shard of
one rank, in place, either when it is whole (loaded or randomised identically on every rank) or
before it holds any value (built on the ``meta`` device, then loaded or randomised tensor by
tensor: the rank never holds the other ranks' weights):

* ``q, k, v`` of self-attention and ``q, k, v, k_img, v_img`` of cross-attention keep the rows
  of this rank's ``num_heads / tp`` heads (column-parallel linears; attention itself needs no
  communication because every head is whole on one rank, and the K/V cache holds local heads);
* QK RMSNorm normalises over the full ``dim``: each rank all-reduces its partial sum of squares
  (a ``(B, L, 1)`` float32 tensor) and scales its slice of the norm weight;
* ``o`` keeps the matching columns (row-parallel); its output is all-reduced (sum), the bias is
  added by rank 0 only;
* ``ffn.0`` keeps ``ffn_dim / tp`` rows, ``ffn.2`` the matching columns plus an all-reduce.

The shard records, per tensor, the :class:`ShardPart` it holds of the full one, so that a
checkpoint (:mod:`.weights`) or a seeded initialisation (:func:`.layout.randomize_`) fills it
with the full model's values; FP8 block linears (:mod:`.fp8`) are quantized after the cut, each
rank's shard with its own scales.  :func:`join_group_` then gives the shard its process group.

Embeddings, time projections, modulations, the video head and the action/state MLPs stay
replicated (a few percent of the FLOPs).  Per block that is three all-reduces of ``(B, L, dim)``
and four tiny ones; outputs equal the unsharded model's up to float summation order.  Every
one is :func:`.collectives.all_reduce_sum` over the group: the DiT block calls it after its
row-parallel linears (:attr:`~.dit_block.DiTBlock.tp_group`), the sharded QK norms on their
statistics; eager and compiled blocks alike (a functional collective, which ``torch.compile``
traces).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import torch
from torch import nn
import torch.distributed as dist

from dreamzero_ros.engine.networks.collectives import all_reduce_sum
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.dit_block import RMSNorm
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.fp8 import Fp8Linear

__all__ = [
    'ShardPart',
    'ShardedRMSNorm',
    'TensorParallelShard',
    'join_group_',
    'shard_dit_',
    'shard_problem',
    'split_problem',
]


@dataclass(frozen=True)
class ShardPart:
    """What a rank holds of a full tensor: ``start:stop`` along ``dim``, or zeros.

    ``dim`` 0 (rows) or 1 (columns); None for zeros of the full shape (the bias of a
    row-parallel linear on ranks other than 0, which rank 0 adds).
    """

    full_shape: tuple[int, ...]
    dim: int | None
    start: int = 0
    stop: int = 0

    def take(self, full: torch.Tensor) -> torch.Tensor:
        """The rank's part of ``full`` (a tensor of :attr:`full_shape`): a view, or zeros."""
        if self.dim is None:
            return torch.zeros_like(full)
        return full.narrow(self.dim, self.start, self.stop - self.start)


@dataclass(frozen=True)
class TensorParallelShard:
    """A DiT's tensor-parallel shard: rank ``rank`` of ``size``.

    ``parts``: DiT state-dict key -> the :class:`ShardPart` of every tensor cut from the full
    model (the others are whole).  ``group``: the tensor-parallel process group, once
    :func:`join_group_` gave it one.
    """

    rank: int
    size: int
    parts: Mapping[str, ShardPart] = field(default_factory=dict, repr=False, compare=False)
    group: dist.ProcessGroup | None = None

    @property
    def group_name(self) -> str:
        """The group's name, as functional collectives take it."""
        if self.group is None:
            raise RuntimeError('the DiT shard has not joined its tensor-parallel group yet')
        return self.group.group_name


def split_problem(config: DiTConfig, tp_size: int) -> str:
    """Why a DiT of ``config`` cannot split over ``tp_size`` ranks ('' if it can)."""
    if tp_size < 1 or config.num_heads % tp_size or config.ffn_dim % tp_size:
        return (
            f'{config.num_heads} attention heads and FFN width {config.ffn_dim} do not split '
            f'over {tp_size} tensor-parallel ranks'
        )
    return ''


def _holds_fp8(dit: CausalWanDiT) -> bool:
    return any(isinstance(module, Fp8Linear) for module in dit.blocks.modules())


def shard_problem(dit: CausalWanDiT, tp_size: int, tp_rank: int) -> str:
    """Why ``dit`` cannot serve as shard ``tp_rank`` of ``tp_size`` ('' if it can).

    A whole DiT can (it is cut when it joins), unless its block linears are already FP8: they
    were quantized whole, and each rank must quantize its own shard.  A shard must be that one.
    """
    problem = split_problem(dit.config, tp_size)
    if problem:
        return problem
    shard = dit.tensor_parallel
    if shard is not None and (shard.rank, shard.size) != (tp_rank, tp_size):
        return (
            f'the DiT was built as tensor-parallel shard {shard.rank} of {shard.size}, the '
            f'group makes this rank shard {tp_rank} of {tp_size}'
        )
    if shard is None and tp_size > 1 and _holds_fp8(dit):
        return (
            'the DiT holds FP8 block linears quantized whole; under tensor parallel each rank '
            'quantizes its own shard: build it for its shard (dreamzero-engine-worker '
            '--tensor-parallel)'
        )
    return ''


class ShardedRMSNorm(nn.Module):
    """RMSNorm over a dimension split across ranks; holds this rank's weight slice.

    Its ``group`` (the name of the tensor-parallel process group) is set when the shard joins
    its group (:func:`join_group_`); before, it refuses to run.
    """

    def __init__(self, weight: torch.Tensor, full_dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.full_dim = full_dim
        self.eps = eps
        self.group: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` (this rank's channels) by the RMS over all ranks' channels."""
        if self.group is None:
            raise RuntimeError('the DiT shard has not joined its tensor-parallel group yet')
        xf = x.float()
        squares = all_reduce_sum(xf.pow(2).sum(dim=-1, keepdim=True), self.group)
        normed = xf * torch.rsqrt(squares / self.full_dim + self.eps)
        return normed.type_as(x) * self.weight


class _Cutter:
    """Cuts parameters to one rank's part and records each :class:`ShardPart` by its key."""

    def __init__(self) -> None:
        self.parts: dict[str, ShardPart] = {}

    def cut(
        self, owner: nn.Module, name: str, key: str, dim: int | None, span: tuple[int, int]
    ) -> torch.Tensor:
        full = getattr(owner, name)
        part = ShardPart(tuple(full.shape), dim, *span)
        self.parts[key] = part
        kept = nn.Parameter(part.take(full).clone(), requires_grad=False)
        setattr(owner, name, kept)
        return kept

    def rows(self, linear: nn.Linear, key: str, span: tuple[int, int]) -> None:
        """Column-parallel: keep the output rows ``span`` (weight and bias)."""
        self.cut(linear, 'weight', f'{key}.weight', 0, span)
        self.cut(linear, 'bias', f'{key}.bias', 0, span)
        linear.out_features = span[1] - span[0]

    def columns(self, linear: nn.Linear, key: str, span: tuple[int, int], bias: bool) -> None:
        """Row-parallel: keep the input columns ``span``; the bias only with ``bias``."""
        self.cut(linear, 'weight', f'{key}.weight', 1, span)
        if not bias:
            self.cut(linear, 'bias', f'{key}.bias', None, (0, 0))
        linear.in_features = span[1] - span[0]

    def norm(self, owner: nn.Module, name: str, key: str, span: tuple[int, int], dim: int) -> None:
        norm = getattr(owner, name)
        if isinstance(norm, RMSNorm):
            weight = self.cut(norm, 'weight', f'{key}.weight', 0, span)
            setattr(owner, name, ShardedRMSNorm(weight.data, dim, norm.eps))


@torch.no_grad()
def shard_dit_(dit: CausalWanDiT, rank: int, size: int) -> CausalWanDiT:
    """Keep shard ``rank`` of ``size`` of ``dit`` (in place, on any device) and return it.

    Before it computes, the shard needs its group (:func:`join_group_`).  A DiT whose block
    linears are FP8 already is refused: each rank quantizes its own shard, never a cut of the
    whole model's FP8 weights.
    """
    if dit.tensor_parallel is not None:
        raise ValueError('the DiT is already sharded')
    c = dit.config
    problem = split_problem(c, size)
    if problem or not 0 <= rank < size:
        raise ValueError(problem or f'rank {rank} is not among {size} tensor-parallel ranks')
    if _holds_fp8(dit):
        raise ValueError('the DiT holds FP8 block linears: shard it before quantizing them')
    width = c.num_heads // size * c.head_dim
    attn = (rank * width, (rank + 1) * width)
    ffn_width = c.ffn_dim // size
    ffn = (rank * ffn_width, (rank + 1) * ffn_width)
    cutter = _Cutter()
    for index, block in enumerate(dit.blocks):
        for name, projections, norms in (
            ('self_attn', ('q', 'k', 'v'), ('norm_q', 'norm_k')),
            ('cross_attn', ('q', 'k', 'v', 'k_img', 'v_img'), ('norm_q', 'norm_k', 'norm_k_img')),
        ):
            key = f'blocks.{index}.{name}'
            attention = getattr(block, name)
            for projection in projections:
                cutter.rows(getattr(attention, projection), f'{key}.{projection}', attn)
            for norm in norms:
                cutter.norm(attention, norm, f'{key}.{norm}', attn, c.dim)
            cutter.columns(attention.o, f'{key}.o', attn, bias=rank == 0)
            attention.num_heads = c.num_heads // size
        cutter.rows(block.ffn[0], f'blocks.{index}.ffn.0', ffn)
        cutter.columns(block.ffn[2], f'blocks.{index}.ffn.2', ffn, bias=rank == 0)
    dit.tensor_parallel = TensorParallelShard(rank, size, cutter.parts)
    return dit


def join_group_(dit: CausalWanDiT, group: dist.ProcessGroup) -> None:
    """Give the shard ``dit`` its tensor-parallel ``group`` (once), so that it computes.

    Every block then sums the outputs of its row-parallel linears (``o``, cross-attention
    ``o``, ``ffn.2``) over the group, and the sharded QK norms their statistics.  ``group``
    must hold ``size`` ranks, this one at the shard's rank.
    """
    shard = dit.tensor_parallel
    if shard is None or shard.group is not None:
        raise ValueError('only a shard that has not joined a group yet can join one')
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    if (rank, size) != (shard.rank, shard.size):
        raise ValueError(f'shard {shard.rank} of {shard.size} cannot be rank {rank} of {size}')
    for block in dit.blocks:
        block.tp_group = group.group_name
        for module in block.modules():
            if isinstance(module, ShardedRMSNorm):
                module.group = group.group_name
    dit.tensor_parallel = replace(shard, group=group)
