# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Triton for the engine's kernels, where it is installed (import this only where one runs).

Triton is optional: ``triton`` and ``tl`` are None on CPU-only installs, where the torch paths
run instead.  :func:`kernel_runs_on` says whether a kernel can run on a device: CUDA, or any
device under ``TRITON_INTERPRET=1`` (Triton's CPU interpreter, used by the tests).
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the torch path runs instead
    triton = tl = None

__all__ = ['INTERPRETED', 'kernel_runs_on', 'tl', 'triton']

#: Triton decides when a kernel is defined (at its module's import) whether it runs interpreted.
INTERPRETED = os.environ.get('TRITON_INTERPRET') == '1'


def kernel_runs_on(device: torch.device) -> bool:
    """Whether a Triton kernel can run on ``device``."""
    if triton is None:
        return False
    return device.type == 'cuda' or INTERPRETED
