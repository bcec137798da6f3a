# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Write a new output folder under a temporary name and give it its real name only when done.

An interrupted or failed write (Ctrl-C, a damaged input) leaves no folder that looks finished:
the work happens in ``.<name>.partial-<pid>/<name>`` beside the target (the inner folder keeps
the real name, which rosbag2 gives its files), moved into place on success and removed on
failure. A later run removes partial folders whose writer is gone
(:mod:`dreamzero_ros.partial_folders`).
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
from pathlib import Path
import shutil

from dreamzero_ros.errors import BagError
from dreamzero_ros.partial_folders import partial_folder, remove_stale_partials

__all__ = ['remove_stale_partials', 'staged_folder']


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
