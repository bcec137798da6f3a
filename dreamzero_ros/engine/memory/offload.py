# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Modules kept on the host and streamed to the device part by part while they run.

:func:`stream_parts_` leaves a module's parameters on the host (pinned when the device is a
GPU) and gives each listed part a pre-hook that copies that part's tensors to the device and a
hook that drops the copies after it ran, so the device holds one part at a time.  Lookup tables
(:func:`host_lookup_`) stay on the host and run there: their indices go to the host and their
rows come back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

__all__ = ['host_lookup_', 'stream_parts_', 'streamed_device']


def streamed_device(module: nn.Module) -> torch.device | None:
    """The device ``module`` is streamed to by :func:`stream_parts_`, or None."""
    return getattr(module, '_streamed_to', None)


def _host_tensors(part: nn.Module, skip: set[int], pin: bool) -> list[tuple[nn.Module, str, bool]]:
    """Pin the part's tensors in place; ``(owner, name, is_parameter)`` of each.

    Tensors of the modules in ``skip`` (by id: parts nested in this one) are left out.
    """
    entries = []
    for owner in part.modules():
        if id(owner) in skip:
            continue
        for table, is_param in ((owner._parameters, True), (owner._buffers, False)):
            for name, tensor in table.items():
                if tensor is None:
                    continue
                if pin and not tensor.is_pinned():
                    pinned = tensor.detach().pin_memory()
                    table[name] = nn.Parameter(pinned, requires_grad=False) if is_param else pinned
                entries.append((owner, name, is_param))
    return entries


def stream_parts_(module: nn.Module, parts: Iterable[nn.Module], device: torch.device) -> None:
    """Run each of ``parts`` (submodules of ``module``, which is on the host) on ``device``.

    Before a part runs, its parameters and buffers are copied to ``device`` (asynchronously
    from pinned memory on a GPU); after it ran, the copies are dropped and the host tensors put
    back.  A part that holds other parts streams only its own tensors (the nested parts stream
    theirs as they run).  Other tensors of ``module`` stay on the host.
    """
    pin = device.type == 'cuda'
    parts = list(parts)
    for part in parts:
        inside = {id(m) for m in part.modules()}
        skip = {
            id(m)
            for other in parts
            if other is not part and id(other) in inside
            for m in other.modules()
        }
        entries = _host_tensors(part, skip, pin)
        saved: dict[tuple[int, str], Any] = {}

        def load(
            _part: nn.Module, _args: Any, entries: list = entries, saved: dict = saved
        ) -> None:
            for owner, name, is_param in entries:
                table = owner._parameters if is_param else owner._buffers
                host = table[name]
                saved[id(owner), name] = host
                table[name] = host.to(device, non_blocking=True)

        def unload(
            _part: nn.Module, _args: Any, _out: Any, entries: list = entries, saved: dict = saved
        ) -> None:
            for owner, name, is_param in entries:
                table = owner._parameters if is_param else owner._buffers
                table[name] = saved.pop((id(owner), name))

        part.register_forward_pre_hook(load)
        part.register_forward_hook(unload)
    module._streamed_to = device


def host_lookup_(table: nn.Module, device: torch.device) -> None:
    """Run the lookup ``table`` (e.g. an ``nn.Embedding``) on the host for inputs of ``device``."""

    def to_host(_table: nn.Module, args: tuple) -> tuple:
        return tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)

    def to_device(_table: nn.Module, _args: Any, out: torch.Tensor) -> torch.Tensor:
        return out.to(device, non_blocking=False)

    table.register_forward_pre_hook(to_host)
    table.register_forward_hook(to_device)
