# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every console script declared in setup.py is installed and answers --help."""

import ast
from pathlib import Path
import subprocess

import pytest
from script_paths import installed_script

ROOT = Path(__file__).resolve().parents[1]


def _declared_console_scripts() -> dict[str, str]:
    tree = ast.parse((ROOT / 'setup.py').read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == 'entry_points':
            entry_points = ast.literal_eval(node.value)
            return dict(
                (part.strip() for part in line.split('=', 1))
                for line in entry_points['console_scripts']
            )
    raise AssertionError('setup.py declares no entry_points')


SCRIPTS = _declared_console_scripts()


def test_setup_declares_the_main_entry_points():
    assert {'dreamzero-demo', 'dreamzero-replay', 'dreamzero-openpi-server'} <= set(SCRIPTS)


@pytest.mark.parametrize('script', sorted(SCRIPTS))
def test_console_script_prints_help(script):
    result = subprocess.run(
        [installed_script(script), '--help'], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert 'usage' in result.stdout.lower(), result.stdout
