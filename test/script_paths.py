# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the package's console scripts are, whether or not the venv is on PATH."""

from pathlib import Path
import shutil
import sys

import pytest


def installed_script(name: str) -> str:
    """The path of console script ``name``: beside this interpreter first, then on PATH."""
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f'{name} is not installed; run pip install -e .')
    return found
