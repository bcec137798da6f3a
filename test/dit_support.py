# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""One DiT call as the engine makes it, shared by the speed-option tests."""

import torch


@torch.no_grad()
def run_call(dit, x, runner=None):
    """Prefill ``x['clean']`` into a fresh 2-row cache, then one denoising call on ``x['noisy']``.

    Returns the call's output and the cache.
    """
    cache = dit.new_cache(2)
    dit.prefill(*x['clean'], x['context'], cache, 0, runner)
    out = dit(
        *x['noisy'],
        x['timestep'],
        x['context'],
        cache,
        1,
        x['action'],
        x['timestep_action'],
        x['state'],
        runner,
    )
    return out, cache
