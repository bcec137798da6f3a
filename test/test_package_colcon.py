# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""colcon builds the ament_python package and installs its launch, config, data and scripts."""

from pathlib import Path
import shutil
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def install_base(tmp_path_factory) -> Path:
    colcon = shutil.which('colcon') or str(Path(sys.executable).with_name('colcon'))
    if not Path(colcon).exists():
        pytest.skip('colcon is not installed (pip install colcon-common-extensions)')
    work = tmp_path_factory.mktemp('colcon')
    result = subprocess.run(
        [
            colcon,
            '--log-base',
            str(work / 'log'),
            'build',
            '--base-paths',
            str(ROOT),
            '--packages-select',
            'dreamzero_ros',
            '--build-base',
            str(work / 'build'),
            '--install-base',
            str(work / 'install'),
            '--event-handlers',
            'console_direct-',
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return work / 'install' / 'dreamzero_ros'


def test_launch_and_config_are_installed_into_share(install_base):
    share = install_base / 'share' / 'dreamzero_ros'
    assert (share / 'package.xml').is_file()
    assert (share / 'launch' / 'dreamzero.launch.py').is_file()
    installed = {path.name for path in (share / 'config').glob('*.yaml')}
    assert installed == {path.name for path in (ROOT / 'config').glob('*.yaml')}
    assert installed, 'no config/*.yaml installed'
    packaged = list(install_base.glob('lib/python3*/site-packages/dreamzero_ros/embodiments'))
    embodiments = {path.name for path in packaged[0].glob('*.yaml')} if packaged else set()
    source = ROOT / 'dreamzero_ros' / 'embodiments'
    assert embodiments == {path.name for path in source.glob('*.yaml')} and embodiments
    index = install_base / 'share' / 'ament_index' / 'resource_index' / 'packages'
    assert (index / 'dreamzero_ros').is_file()


def test_console_scripts_land_in_lib_for_ros2_run(install_base):
    scripts = {path.name for path in (install_base / 'lib' / 'dreamzero_ros').iterdir()}
    assert {'dreamzero-demo', 'dreamzero-replay', 'dreamzero-openpi-server'} <= scripts
