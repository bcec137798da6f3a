# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Ament-style lint: ruff (flake8 + pep257 rules), formatting, and copyright headers."""

from pathlib import Path
import shutil
import subprocess
import sys

from package_support import python_sources
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ['dreamzero_ros', 'launch', 'test', 'benchmarks', 'scripts', 'setup.py']
COPYRIGHT = '# Copyright 2026 The dreamzero_ros Authors'
LICENSE = '# SPDX-License-Identifier: Apache-2.0'


def _ruff() -> list[str]:
    ruff = shutil.which('ruff') or str(Path(sys.executable).with_name('ruff'))
    if not Path(ruff).exists():
        pytest.skip('ruff is not installed')
    return [ruff]


def _existing(paths: list[str]) -> list[str]:
    return [path for path in paths if (ROOT / path).exists()]


def test_ruff_check_passes():
    result = subprocess.run(
        [*_ruff(), 'check', *_existing(LINTED)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = subprocess.run(
        [*_ruff(), 'format', '--check', *_existing(LINTED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_python_file_carries_the_copyright_header():
    sources = [ROOT / 'setup.py']
    for folder in _existing(LINTED):
        sources.extend(python_sources(folder))
    lacking = [
        str(path.relative_to(ROOT))
        for path in sources
        if path.is_file() and path.read_text().splitlines()[:2] != [COPYRIGHT, LICENSE]
    ]
    assert not lacking, f'files without the two-line copyright header: {lacking}'
