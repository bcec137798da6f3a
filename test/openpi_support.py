# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the OpenPI bridge tests: the reference client's interpreter, scripts, clips."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / 'scripts'
#: Overrides where the openpi-client interpreter is looked for.
OPENPI_PYTHON_ENV = 'OPENPI_CLIENT_PYTHON'


def openpi_python() -> str:
    """The Python of the venv holding the reference openpi-client; skips the test if absent."""
    candidates = [os.environ.get(OPENPI_PYTHON_ENV)] if os.environ.get(OPENPI_PYTHON_ENV) else []
    candidates += [str(REPO / '.venv-openpi/bin/python'), '/work/venv-openpi/bin/python']
    for candidate in candidates:
        if Path(candidate).is_file():
            return candidate
    pytest.skip(
        'reference openpi-client venv not found (scripts/bootstrap.sh creates .venv-openpi; '
        f'or set {OPENPI_PYTHON_ENV}); looked at ' + ', '.join(candidates)
    )


def run_openpi(args: list[str], timeout: float = 120.0) -> dict:
    """Run a script with the openpi-client interpreter and return its JSON output."""
    result = subprocess.run(
        [openpi_python(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, 'PYTHONPATH': ''},
    )
    assert result.returncode == 0, f'{args[0]} failed:\n{result.stdout}\n{result.stderr}'
    return json.loads(result.stdout.strip().splitlines()[-1])


def droid_frames(num_frames: int) -> dict:
    """``camera -> (T, 180, 320, 3)`` uint8: the real DROID clips where present, else synthetic."""
    from dreamzero_ros.droid_clips import demo_clips

    clips, _ = demo_clips(num_frames)
    return clips
