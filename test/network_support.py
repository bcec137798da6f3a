# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The network tests' state-dict helpers: key shapes, and seeded weights on any module."""

import torch


def shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """State-dict key -> shape."""
    return {key: tuple(value.shape) for key, value in module.state_dict().items()}


def seeded_weights(module: torch.nn.Module, ones: tuple[str, ...], seed: int = 0) -> dict:
    """N(0, 0.1) weights in key order, N(1, 0.1) for the keys ending in ``ones`` (norm scales)."""
    generator = torch.Generator().manual_seed(seed)
    return {
        key: torch.randn(value.shape, generator=generator) * 0.1
        + (1.0 if key.endswith(ones) else 0.0)
        for key, value in sorted(module.state_dict().items())
    }


def seeded(module: torch.nn.Module, ones: tuple[str, ...]) -> torch.nn.Module:
    """``module`` in eval mode holding :func:`seeded_weights` (seed 0)."""
    module.eval().load_state_dict(seeded_weights(module, ones))
    return module


def repeated_keys(prefix: str, count: int, block: dict) -> dict[str, tuple[int, ...]]:
    """The keys of ``count`` identical blocks: ``{prefix}.{i}.{name}`` -> shape, i in order."""
    return {f'{prefix}.{i}.{name}': shape for i in range(count) for name, shape in block.items()}
