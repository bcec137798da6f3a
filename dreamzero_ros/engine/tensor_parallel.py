# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Tensor parallel for the causal DiT: attention heads and FFN columns split across ranks.

:func:`shard_dit_` turns a full :class:`~dreamzero_ros.engine.dit.CausalWanDiT` (loaded or
randomised identically on every rank of ``group``) into this rank's shard, in place:

* ``q, k, v`` of self-attention and ``q, k, v, k_img, v_img`` of cross-attention keep the rows
  of this rank's ``num_heads / tp`` heads (column-parallel linears; attention itself needs no
  communication because every head is whole on one rank, and the K/V cache holds local heads);
* QK RMSNorm normalises over the full ``dim``: each rank all-reduces its partial sum of squares
  (a ``(B, L, 1)`` float32 tensor) and scales its slice of the norm weight;
* ``o`` keeps the matching columns (row-parallel); its output is all-reduced (sum), the bias is
  added by rank 0 only;
* ``ffn.0`` keeps ``ffn_dim / tp`` rows, ``ffn.2`` the matching columns plus an all-reduce.

Embeddings, time projections, modulations, the video head and the action/state MLPs stay
replicated (a few percent of the FLOPs).  Per block that is three all-reduces of ``(B, L, dim)``
and four tiny ones; outputs equal the unsharded model's up to float summation order.  The
all-reduces run in forward hooks, so the DiT code is the same with and without sharding.
The sharded DiT records its :class:`TensorParallelShard`; the fast block processor
(:mod:`.fast_blocks`), which reads the weights directly, does the same reductions itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
import torch.distributed as dist

from .dit import CausalWanDiT, DiTConfig, RMSNorm

__all__ = ['ShardedRMSNorm', 'TensorParallelShard', 'shard_dit_', 'split_problem']


@dataclass(frozen=True)
class TensorParallelShard:
    """The tensor-parallel shard of a DiT: rank ``rank`` of ``size`` in ``group``."""

    rank: int
    size: int
    group: dist.ProcessGroup | None  # None: the default group

    @property
    def group_name(self) -> str:
        """The group's name, as functional collectives take it."""
        return (self.group or dist.group.WORLD).group_name


def split_problem(config: DiTConfig, tp_size: int) -> str:
    """Why a DiT of ``config`` cannot split over ``tp_size`` ranks ('' if it can)."""
    if tp_size < 1 or config.num_heads % tp_size or config.ffn_dim % tp_size:
        return (
            f'{config.num_heads} attention heads and FFN width {config.ffn_dim} do not split '
            f'over {tp_size} tensor-parallel ranks'
        )
    return ''


class ShardedRMSNorm(nn.Module):
    """RMSNorm over a dimension split across ``group``; holds this rank's weight slice."""

    def __init__(
        self, weight: torch.Tensor, full_dim: int, eps: float, group: dist.ProcessGroup | None
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.full_dim = full_dim
        self.eps = eps
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` (this rank's channels) by the RMS over all ranks' channels."""
        xf = x.float()
        squares = xf.pow(2).sum(dim=-1, keepdim=True)
        dist.all_reduce(squares, group=self.group)
        normed = xf * torch.rsqrt(squares / self.full_dim + self.eps)
        return normed.type_as(x) * self.weight


def _all_reduce_output(group: dist.ProcessGroup | None):
    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(output, group=group)
        return output

    return hook


def _keep_rows(linear: nn.Linear, rows: slice) -> None:
    linear.weight = nn.Parameter(linear.weight[rows].clone(), requires_grad=False)
    linear.bias = nn.Parameter(linear.bias[rows].clone(), requires_grad=False)
    linear.out_features = linear.weight.shape[0]


def _keep_columns(
    linear: nn.Linear, columns: slice, keep_bias: bool, group: dist.ProcessGroup | None
) -> None:
    linear.weight = nn.Parameter(linear.weight[:, columns].clone(), requires_grad=False)
    linear.in_features = linear.weight.shape[1]
    if not keep_bias:
        linear.bias = nn.Parameter(torch.zeros_like(linear.bias), requires_grad=False)
    linear.register_forward_hook(_all_reduce_output(group))


def _shard_norm(owner: nn.Module, name: str, rows: slice, full_dim: int, group) -> None:
    norm = getattr(owner, name)
    if isinstance(norm, RMSNorm):
        sharded = ShardedRMSNorm(norm.weight[rows].clone(), full_dim, norm.eps, group)
        setattr(owner, name, sharded)


@torch.no_grad()
def shard_dit_(dit: CausalWanDiT, group: dist.ProcessGroup | None) -> CausalWanDiT:
    """Keep this rank's tensor-parallel shard of ``dit`` (in place) and return it."""
    if dit.tensor_parallel is not None:
        raise ValueError('the DiT is already sharded')
    tp, rank = dist.get_world_size(group), dist.get_rank(group)
    c = dit.config
    problem = split_problem(c, tp)
    if problem:
        raise ValueError(problem)
    heads = c.num_heads // tp
    width = heads * c.head_dim
    attn_rows = slice(rank * width, (rank + 1) * width)
    ffn_width = c.ffn_dim // tp
    ffn_rows = slice(rank * ffn_width, (rank + 1) * ffn_width)
    for block in dit.blocks:
        for attn, projections, norms in (
            (block.self_attn, ('q', 'k', 'v'), ('norm_q', 'norm_k')),
            (
                block.cross_attn,
                ('q', 'k', 'v', 'k_img', 'v_img'),
                ('norm_q', 'norm_k', 'norm_k_img'),
            ),
        ):
            for name in projections:
                _keep_rows(getattr(attn, name), attn_rows)
            for name in norms:
                _shard_norm(attn, name, attn_rows, c.dim, group)
            _keep_columns(attn.o, attn_rows, rank == 0, group)
            attn.num_heads = heads
        _keep_rows(block.ffn[0], ffn_rows)
        _keep_columns(block.ffn[2], ffn_rows, rank == 0, group)
    dit.tensor_parallel = TensorParallelShard(rank, tp, group)
    return dit
