# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Loading the engine: the one path of the policy node, the OpenPI server, replay and the demo.

:func:`load_engine` loads a checkpoint folder, or random weights of a preset written in the real
layout (:func:`.random_checkpoint.write_random_checkpoint`) and read back through the same
loader, with the device, dtype and speed options a user chooses.  Command-line tools add those
options with :func:`add_engine_arguments` and pass :func:`engine_arguments` of the parsed
namespace (its parallel options, ``cfg_parallel``, ``tensor_parallel``, ``worker_gpus`` and
``worker_timeout``, go to :func:`~dreamzero_ros.core.engine_workers.load_from_arguments`, which
starts the worker ranks); :func:`cached_random_checkpoint` keeps a preset's random checkpoint for
reuse.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
import os
from pathlib import Path
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from dreamzero_ros.engine.options import (
    AUTO,
    ENGINE_OPTION_SECTIONS,
    EngineOptions,
    engine_option_specs,
)
from dreamzero_ros.parameter_schema import add_arguments

if TYPE_CHECKING:  # the engine's modules import torch: loaded when an engine is
    from dreamzero_ros.engine.memory.options import MemoryConfig
    from dreamzero_ros.engine.pipeline.denoise import BranchLayout
    from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine
    from dreamzero_ros.engine.speed.acceleration import AccelerationConfig

__all__ = [
    'RANDOM_PRESETS',
    'add_engine_arguments',
    'cached_random_checkpoint',
    'engine_arguments',
    'load_engine',
    'resolve_device_dtype',
]

#: Presets that can be served with random weights (the 14B one would take minutes to write).
RANDOM_PRESETS = ('tiny', 'small')


def resolve_device_dtype(device: str | None, dtype: str | None) -> tuple[str, str]:
    """The device and dtype an engine runs with, given either or neither.

    ``device``, or (None or ``auto``) CUDA where present, else the CPU; ``dtype``, or bfloat16
    on CUDA and float32 on the CPU (where bfloat16 kernels are slow).
    """
    import torch

    device = None if device == AUTO else device
    dtype = None if dtype == AUTO else dtype
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    dtype = dtype or ('float32' if torch.device(device).type == 'cpu' else 'bfloat16')
    return device, dtype


def load_engine(
    checkpoint: str | Path | None = None,
    *,
    preset: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    step_cache: str | None = None,
    acceleration: AccelerationConfig | None = None,
    memory: MemoryConfig | None = None,
    memory_budget: int | None = None,
    num_threads: int = 0,
    layout: BranchLayout | None = None,
    max_sessions: int | None = None,
    base_checkpoint: str | Path | None = None,
    encoder_dir: str | Path | None = None,
    embodiment_tag: str | None = None,
    embodiment_file: str | Path | None = None,
    prompt_template: str | None = None,
) -> DreamZeroEngine:
    """The DreamZero engine of a checkpoint folder, or of random weights of ``preset``.

    Args:
        checkpoint: checkpoint folder (the published layout); None to use ``preset``.
        preset: ``tiny`` or ``small``: random weights, written to a temporary folder in the real
            layout and loaded from it.
        device: torch device; None picks CUDA where present (:func:`resolve_device_dtype`).
        dtype: compute dtype; None picks bfloat16 on CUDA and float32 on the CPU.
        step_cache: ``full``, ``static`` or ``dynamic``; None keeps the default (``static``).
        acceleration: compilation, FP8 linears and attention kernel; None: the reference path.
        memory: encoder placement and K/V cache precision; None: everything on the device.
        memory_budget: device bytes the engine may use; None: the free memory of a CUDA
            device.  A configuration whose estimated need exceeds it is refused before loading
            (:class:`~dreamzero_ros.errors.DeviceMemoryError`).
        num_threads: torch CPU threads; 0 lets torch decide.
        layout: CFG branch layout (:mod:`.cfg_parallel` gives the multi-process one: this
            process is then rank 0).
        max_sessions: sessions kept at once; None keeps the default (4).
        base_checkpoint: the checkpoint a LoRA-only ``checkpoint`` was trained on.
        encoder_dir: folder of the Wan2.1 encoder files, for a checkpoint without encoders.
        embodiment_tag: the embodiment, where the checkpoint's ``metadata.json`` holds several.
        embodiment_file: an embodiment file (YAML), for a checkpoint without
            ``experiment_cfg/`` or to replace its description.
        prompt_template: the prompt template, for an embodiment upstream knows none for.

    """
    import torch

    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
    from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

    if (checkpoint is None) == (preset is None):
        raise ValueError('give either a checkpoint folder or a preset')
    if num_threads > 0:
        torch.set_num_threads(num_threads)
    device, dtype = resolve_device_dtype(device, dtype)
    settings: dict[str, Any] = {
        'base_checkpoint': base_checkpoint,
        'encoder_dir': encoder_dir,
        'embodiment_tag': embodiment_tag,
        'embodiment_file': embodiment_file,
        'prompt_template': prompt_template,
    }
    if step_cache is not None:
        settings['step_cache'] = step_cache
    if acceleration is not None:
        settings['acceleration'] = acceleration
    if memory is not None:
        settings['memory'] = memory
    settings['memory_budget'] = memory_budget
    if max_sessions is not None:
        settings['max_sessions'] = max_sessions
    if checkpoint is not None:
        return DreamZeroEngine.from_pretrained(
            checkpoint, device=device, dtype=dtype, layout=layout, **settings
        )
    if preset not in RANDOM_PRESETS:
        raise ValueError(f'random weights come in presets {RANDOM_PRESETS}, not {preset!r}')
    with tempfile.TemporaryDirectory(prefix=f'dreamzero-{preset}-') as folder:
        write_random_checkpoint(folder, preset=preset)
        return DreamZeroEngine.from_pretrained(
            folder, device=device, dtype=dtype, layout=layout, **settings
        )


def cached_random_checkpoint(cache_dir: Path, preset: str) -> tuple[Path, bool]:
    """The random-weight checkpoint of ``preset`` in ``cache_dir``, written on first use.

    Returns the folder and whether this call wrote it.  Concurrent first uses are safe: each
    writes a private folder and renames it into place; a loser of the race discards its copy.
    """
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = cache_dir / f'random-{preset}'
    if (folder / 'experiment_cfg' / 'conf.yaml').is_file():
        return folder, False
    if folder.exists():  # written by an earlier version, without experiment_cfg/conf.yaml
        shutil.rmtree(folder, ignore_errors=True)
    partial = cache_dir / f'.random-{preset}.{os.getpid()}.partial'
    write_random_checkpoint(partial, preset=preset)
    try:
        partial.rename(folder)
    except OSError:  # another process wrote it first
        shutil.rmtree(partial)
        return folder, False
    return folder, True


def add_engine_arguments(
    parser: argparse.ArgumentParser, names: Collection[str] | None = None
) -> None:
    """Add the engine options (:class:`.options.EngineOptions`), in sections, to ``parser``.

    ``names``: the options to add (field names, e.g. ``device``); None: every one.

    Raises:
        ValueError: a name that is no engine option.

    """
    specs = {spec.name: spec for spec in engine_option_specs()}
    unknown = sorted(set(names or ()) - set(specs))
    if unknown:
        raise ValueError(f'no engine options {unknown}')
    for title, section in ENGINE_OPTION_SECTIONS.items():
        shown = [specs[name] for name in section if names is None or name in names]
        if shown:
            add_arguments(parser.add_argument_group(title), shown)


def engine_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`load_engine` keyword arguments from options added by :func:`add_engine_arguments`."""
    return EngineOptions.from_arguments(args).load_arguments()
