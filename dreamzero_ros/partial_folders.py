# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Folders being written under a temporary name beside their target, and those left behind.

A folder written in place could be taken for a finished one after an interrupt. Writers work in
:func:`partial_folder` (``.<name>.partial-<pid>`` beside the target) and rename it into place
when done; a writer that was killed before it could clean up leaves its partial folder, which
the next writer removes (:func:`remove_stale_partials`: those whose process no longer runs).
"""

from __future__ import annotations

import os
from pathlib import Path
import shutil

__all__ = ['partial_folder', 'remove_stale_partials']

_PARTIAL = '.partial-'


def partial_folder(target: Path) -> Path:
    """Where this process writes ``target`` before renaming it into place."""
    return target.parent / f'.{target.name}{_PARTIAL}{os.getpid()}'


def remove_stale_partials(target: Path) -> list[Path]:
    """Remove partial folders of ``target`` whose writing process no longer runs."""
    removed = []
    for path in target.parent.glob(f'.{target.name}{_PARTIAL}*'):
        pid = path.name.rsplit(_PARTIAL, 1)[1]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
