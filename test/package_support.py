# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The package's own Python sources, without the interface modules generated into it."""

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Generated in place by scripts/build_interfaces.sh (git-ignored), not written by us.
GENERATED = (ROOT / 'dreamzero_ros' / 'msg', ROOT / 'dreamzero_ros' / 'action')


def python_sources(folder: str) -> list[Path]:
    """The ``.py`` files under ``folder`` (relative to the checkout), generated modules left out."""
    return sorted(
        path
        for path in (ROOT / folder).rglob('*.py')
        if not any(path.is_relative_to(generated) for generated in GENERATED)
    )


def console_scripts() -> dict[str, str]:
    """Script name -> ``module:function``, as setup.cfg declares them (pip and colcon read it)."""
    config = configparser.ConfigParser()
    config.read(ROOT / 'setup.cfg')
    lines = config['options.entry_points']['console_scripts'].strip().splitlines()
    return dict((part.strip() for part in line.split('=', 1)) for line in lines)
