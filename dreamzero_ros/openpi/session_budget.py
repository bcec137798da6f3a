# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""How many sessions a served policy can hold at once, by default.

On a GPU each session keeps its own K/V caches (about 13 GiB for the 14B model in bfloat16 with
batched CFG), so the default capacity is what fits in the memory left once the model is loaded,
after a reserve for the activations of one chunk. Elsewhere (the CPU, a remote engine) it is the
policy's own session store size.
"""

from __future__ import annotations

from typing import Any

#: Capacity when the policy tells nothing about its sessions (the engine's default store size).
DEFAULT_SESSIONS = 4
#: Most sessions a default ever grants.
MAX_DEFAULT_SESSIONS = 8
#: Share of the device kept free for the activations of a chunk, and its floor in bytes.
ACTIVATION_RESERVE_FRACTION = 0.15
MIN_ACTIVATION_RESERVE = 2 * 2**30


def sessions_that_fit(free_bytes: int, total_bytes: int, per_session_bytes: int) -> int:
    """Sessions whose caches fit in ``free_bytes`` after the activation reserve; 1 to 8."""
    reserve = max(ACTIVATION_RESERVE_FRACTION * total_bytes, MIN_ACTIVATION_RESERVE)
    fitting = int((free_bytes - reserve) // max(per_session_bytes, 1))
    return max(1, min(MAX_DEFAULT_SESSIONS, fitting))


def default_max_sessions(policy: Any) -> int:
    """The session capacity to serve ``policy`` with when none is configured.

    A policy on a CUDA device that reports ``session_memory_bytes()`` gets
    :func:`sessions_that_fit` of the device's free memory, never more than its own store
    (``max_sessions``); any other policy its ``max_sessions``, or 4.
    """
    store = int(getattr(policy, 'max_sessions', DEFAULT_SESSIONS))
    per_session = getattr(policy, 'session_memory_bytes', None)
    device = getattr(policy, 'device', None)
    if per_session is None or getattr(device, 'type', None) != 'cuda':
        return store
    import torch

    free, total = torch.cuda.mem_get_info(device)
    return min(store, sessions_that_fit(free, total, per_session()))


def server_sessions(policy: Any, max_sessions: int | None, reserved: int) -> int:
    """The server's session capacity: ``max_sessions``, else what the GPU holds.

    Raises:
        ValueError: the policy keeps fewer sessions than that besides ``reserved`` ones (those
            used outside the server).

    """
    store = getattr(policy, 'max_sessions', None)
    available = None if store is None else store - reserved
    if available is not None and available < 1:
        raise ValueError(f'the policy keeps {store} sessions, all reserved ({reserved})')
    if max_sessions is not None:
        if available is not None and max_sessions > available:
            raise ValueError(
                f'max_sessions {max_sessions} is more than the policy keeps for the server '
                f'({store} less {reserved} reserved): it would drop sessions of open connections'
            )
        return max_sessions
    default = default_max_sessions(policy)
    return default if available is None else min(default, available)
