# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Networks built without running initialisers, and filled with seeded random weights."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
import contextlib
import math
from typing import Any

import torch
from torch import nn

from dreamzero_ros.engine.networks.fp8 import Fp8Linear

__all__ = ['randomize_', 'skip_init']

_INIT_FUNCTIONS = (
    'uniform_',
    'normal_',
    'trunc_normal_',
    'constant_',
    'ones_',
    'zeros_',
    'eye_',
    'dirac_',
    'xavier_uniform_',
    'xavier_normal_',
    'kaiming_uniform_',
    'kaiming_normal_',
    'orthogonal_',
)


@contextlib.contextmanager
def skip_init(device: torch.device | str, dtype: torch.dtype) -> Iterator[None]:
    """Build modules directly on ``device`` in ``dtype`` without running weight initialisers.

    Parameters are left uninitialised (to be loaded or randomised afterwards); buffers that
    modules compute from explicit dtypes are built as usual.  Construction therefore costs one
    allocation of the model in its final dtype and no init work.
    """
    saved = {name: getattr(nn.init, name) for name in _INIT_FUNCTIONS}
    previous_dtype = torch.get_default_dtype()

    def keep(tensor: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return tensor

    try:
        for name in _INIT_FUNCTIONS:
            setattr(nn.init, name, keep)
        torch.set_default_dtype(dtype)
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(previous_dtype)
        for name, function in saved.items():
            setattr(nn.init, name, function)


@torch.no_grad()
def randomize_(module: nn.Module, seed: int, parts: Mapping[str, Any] | None = None) -> nn.Module:
    """Fill every parameter with seeded values of a sane scale, on its own device, in place.

    Matrices and convolutions ``N(0, 1/fan_in)``; norm gains ``1 + N(0, 0.1)``; other vectors
    ``N(0, 0.02)``.  The same seed, device type and dtype give the same weights; an
    :class:`~.fp8.Fp8Linear` gets the quantized model-dtype values of the same draw.  A
    parameter named in ``parts`` (a tensor-parallel shard's: key -> its
    :class:`~.tensor_parallel.ShardPart`, whose ``full_shape`` is drawn and ``take`` keeps the
    part) gets its part of the whole tensor's draw.
    """
    parts = parts or {}
    generator: dict[torch.device, torch.Generator] = {}
    seen: set[int] = set()
    for prefix, owner in module.named_modules():
        for leaf, param in owner.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            device = param.device
            if device not in generator:
                generator[device] = torch.Generator(device).manual_seed(seed)
            part = parts.get(f'{prefix}.{leaf}' if prefix else leaf)
            shape = part.full_shape if part is not None else tuple(param.shape)
            if leaf == 'gamma' or (leaf == 'weight' and len(shape) == 1):
                mean, std = 1.0, 0.1
            elif len(shape) >= 2:
                mean, std = 0.0, math.prod(shape[1:]) ** -0.5
            else:
                mean, std = 0.0, 0.02
            values = torch.randn(shape, generator=generator[device], device=device) * std + mean
            if part is not None:
                values = part.take(values)
            if isinstance(owner, Fp8Linear) and leaf == 'weight':
                owner.load_(values)
            else:
                param.copy_(values)
    return module
