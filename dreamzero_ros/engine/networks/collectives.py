# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The one reduction of a tensor-parallel DiT: a sum over its group, identity without one.

Every path calls it (the eager block, the compiled block, the sharded QK norms): a functional
collective, which ``torch.compile`` traces into the block's graph.
"""

from __future__ import annotations

import torch
import torch.distributed._functional_collectives as funcol

__all__ = ['all_reduce_sum']


def all_reduce_sum(x: torch.Tensor, group: str | None) -> torch.Tensor:
    """The sum of ``x`` over the process group named ``group``; ``x`` itself when None."""
    if group is None:
        return x
    return funcol.all_reduce(x, 'sum', group)
