# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Loading the engine: the one path of the policy node, the OpenPI server, replay and the demo.

:func:`load_engine` loads a checkpoint folder, or random weights of a preset written in the real
layout (:func:`.random_checkpoint.write_random_checkpoint`) and read back through the same
loader, with the :class:`~.options.EngineOptions` a user chose, handed over whole.  Command-line
tools add the options with :func:`add_engine_arguments` and read them back with
:meth:`.options.EngineOptions.from_arguments` (:func:`.workers.launch.load_from_arguments` loads
the engine a command line names, on the ranks it asks for); :func:`cached_random_checkpoint`
keeps a preset's random checkpoint for reuse.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
from pathlib import Path
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from dreamzero_ros.engine.options import (
    ENGINE_OPTION_SECTIONS,
    EngineOptions,
    engine_option_specs,
)
from dreamzero_ros.parameter_schema import add_arguments
from dreamzero_ros.partial_folders import partial_folder, remove_stale_partials

if TYPE_CHECKING:  # the engine's modules import torch: loaded when an engine is
    from dreamzero_ros.engine.pipeline.denoise import BranchLayout
    from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

__all__ = [
    'RANDOM_PRESETS',
    'add_engine_arguments',
    'cached_random_checkpoint',
    'load_engine',
]

#: Presets that can be served with random weights (the 14B one would take minutes to write).
RANDOM_PRESETS = ('tiny', 'small')


def load_engine(
    checkpoint: str | Path | None = None,
    options: EngineOptions | None = None,
    *,
    preset: str | None = None,
    layout: BranchLayout | None = None,
    **changes: Any,
) -> DreamZeroEngine:
    """The DreamZero engine of a checkpoint folder, or of random weights of ``preset``.

    Args:
        checkpoint: checkpoint folder (the published layout); None to use ``preset``.
        options: the engine options, whole (:class:`~.options.EngineOptions`; its ``auto``
            device and dtype resolved here); None: the defaults.  A configuration whose
            estimated memory need exceeds the device's free memory (or ``memory_budget_gib``)
            is refused before loading (:class:`~dreamzero_ros.errors.DeviceMemoryError`).
        preset: ``tiny`` or ``small``: random weights, written to a temporary folder in the real
            layout and loaded from it.
        layout: CFG branch layout (the worker ranks' driver, :mod:`.workers.driver`: this
            process is then rank 0).
        changes: other :class:`~.config.EngineConfig` fields, e.g. ``max_sessions``.

    """
    import torch

    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
    from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

    if (checkpoint is None) == (preset is None):
        raise ValueError('give either a checkpoint folder or a preset')
    options = (options or EngineOptions()).resolved()
    if options.num_threads > 0:
        torch.set_num_threads(options.num_threads)
    if checkpoint is not None:
        return DreamZeroEngine.from_pretrained(checkpoint, options, layout, **changes)
    if preset not in RANDOM_PRESETS:
        raise ValueError(f'random weights come in presets {RANDOM_PRESETS}, not {preset!r}')
    with tempfile.TemporaryDirectory(prefix=f'dreamzero-{preset}-') as folder:
        write_random_checkpoint(folder, preset=preset)
        return DreamZeroEngine.from_pretrained(folder, options, layout, **changes)


def cached_random_checkpoint(cache_dir: Path, preset: str) -> tuple[Path, bool]:
    """The random-weight checkpoint of ``preset`` in ``cache_dir``, written on first use.

    Returns the folder and whether this call wrote it.  Concurrent first uses are safe: each
    writes a private folder and renames it into place; a loser of the race discards its copy.
    An interrupt (Ctrl-C) or an error while writing leaves no partial folder, and one left by a
    killed writer is removed by the next (:mod:`dreamzero_ros.partial_folders`).
    """
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = cache_dir / f'random-{preset}'
    if (folder / 'experiment_cfg' / 'conf.yaml').is_file():
        return folder, False
    if folder.exists():  # incomplete (no experiment_cfg/conf.yaml): written again
        shutil.rmtree(folder, ignore_errors=True)
    remove_stale_partials(folder)
    partial = partial_folder(folder)
    try:
        write_random_checkpoint(partial, preset=preset)
        try:
            partial.rename(folder)
        except OSError:  # another process wrote it first
            return folder, False
        return folder, True
    finally:  # nothing left once renamed; else the partial copy, whatever ended the write
        shutil.rmtree(partial, ignore_errors=True)


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
