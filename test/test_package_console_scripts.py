# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every console script declared in setup.cfg is installed and answers --help."""

from pathlib import Path
import subprocess

from package_support import console_scripts
import pytest
from script_paths import installed_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = console_scripts()


def test_setup_declares_the_main_entry_points():
    assert {'dreamzero-demo', 'dreamzero-replay', 'dreamzero-openpi-server'} <= set(SCRIPTS)


@pytest.mark.parametrize('script', sorted(SCRIPTS))
def test_console_script_prints_help(script):
    result = subprocess.run(
        [installed_script(script), '--help'], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert 'usage' in result.stdout.lower(), result.stdout
