# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Triton, when installed, and where the engine's hand-written Triton kernels can run.

CUDA builds of torch bring Triton; CPU-only installs usually lack it and keep the torch paths.
Under ``TRITON_INTERPRET=1`` (read by Triton when a kernel is defined, i.e. when its module is
imported) the kernels run on the CPU through Triton's interpreter, which the tests use.
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs
    triton = None
    tl = None

__all__ = ['INTERPRETED', 'available', 'tl', 'triton']

#: Whether the kernels defined at this import run in Triton's CPU interpreter.
INTERPRETED = os.environ.get('TRITON_INTERPRET') == '1'


def available(device: torch.device) -> bool:
    """Whether the engine's Triton kernels can run on ``device``."""
    if triton is None:
        return False
    return device.type == 'cuda' or INTERPRETED
