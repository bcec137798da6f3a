# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Write a new output folder under a temporary name and give it its real name only when done.

An interrupted or failed write (Ctrl-C, a damaged input) leaves no folder that looks finished:
the work happens in ``.<name>.partial-<pid>/<name>`` beside the target (the inner folder keeps
the real name, which rosbag2 gives its files), moved into place on success and removed on
failure. A later run removes partial folders whose writer is gone
(:mod:`dreamzero_ros.partial_folders`). An existing folder is updated the same way
(:func:`staged_update`): a copy of hard links, changed, then swapped in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
import os
from pathlib import Path
import shutil

from dreamzero_ros.errors import BagError
from dreamzero_ros.partial_folders import partial_folder, remove_stale_partials

__all__ = ['remove_stale_partials', 'staged_folder', 'staged_update']


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """Yield a path to write the folder ``target`` at; ``target`` exists only after success.

    Raises:
        BagError: ``target`` exists already.

    """
    if target.exists():
        raise BagError(f'{target} exists; choose a new folder name')
    remove_stale_partials(target)
    partial = partial_folder(target)
    partial.mkdir(parents=True)
    try:
        yield partial / target.name
        if (partial / target.name).exists():
            (partial / target.name).rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


@contextlib.contextmanager
def staged_update(target: Path, linked: Callable[[Path], bool]) -> Iterator[Path]:
    """Yield a copy of the existing folder ``target`` to change; it replaces ``target`` on success.

    The files for which ``linked(relative path)`` is true are hard links to the originals
    (never to be written to: add new files and rewrite the others); the rest is not copied. On
    failure ``target`` is left as it was.

    Raises:
        BagError: ``target`` is not a folder.

    """
    if not target.is_dir():
        raise BagError(f'{target} is not a folder')
    remove_stale_partials(target)
    partial = partial_folder(target)
    partial.mkdir(parents=True)
    old = partial / f'{target.name}.old'
    try:
        staged = partial / target.name
        for path in sorted(target.rglob('*')):
            relative = path.relative_to(target)
            if path.is_file() and linked(relative):
                (staged / relative).parent.mkdir(parents=True, exist_ok=True)
                os.link(path, staged / relative)
        staged.mkdir(exist_ok=True)
        yield staged
        target.rename(old)
        try:
            staged.rename(target)
        except OSError:
            old.rename(target)
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
