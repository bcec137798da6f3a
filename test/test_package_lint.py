# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Ament-style lint: ruff (flake8 + pep257 rules), formatting, copyright headers, Python 3.10."""

from pathlib import Path
import shutil
import subprocess
import sys

from package_support import python_sources
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ['dreamzero_ros', 'launch', 'test', 'benchmarks', 'scripts', 'setup.py']
# ROS 2 Humble runs Python 3.10. Excluded: vermin's false findings here, torch's ``Tensor.long()``
# taken for Python 2's ``long``, and ``compression.zstd`` (3.14), imported only where present
# (``backports.zstd`` otherwise).
VERMIN = ['--target=3.10-', '--violations', '--eval-annotations', '--no-tips']
VERMIN += ['--exclude', 'long', '--exclude', 'compression', '--exclude', 'compression.zstd']
COPYRIGHT = '# Copyright 2026 The dreamzero_ros Authors'
LICENSE = '# SPDX-License-Identifier: Apache-2.0'


def _tool(name: str) -> list[str]:
    tool = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(tool).exists():
        pytest.skip(f'{name} is not installed')
    return [tool]


def _ruff() -> list[str]:
    return _tool('ruff')


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


def test_code_runs_on_python_3_10():
    """The oldest Python of a supported distribution (Humble) runs every source file."""
    result = subprocess.run(
        [*_tool('vermin'), *VERMIN, *_existing(LINTED)], cwd=ROOT, capture_output=True, text=True
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
