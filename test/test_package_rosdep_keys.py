# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every rosdep key of package.xml resolves on Humble, Jazzy and Kilted, the optional ones too.

Checked by scripts/check_rosdep_keys.py against test/rosdistro_snapshot, the entries of
ros/rosdistro it reads (docs/ros_distributions.md says from which commit, and how to renew it).
"""

from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'scripts' / 'check_rosdep_keys.py'
SNAPSHOT = ROOT / 'test' / 'rosdistro_snapshot'
sys.path.insert(0, str(SCRIPT.parent))

import check_rosdep_keys  # noqa: E402


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(SNAPSHOT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_key_resolves_on_humble_jazzy_and_kilted():
    result = _check()
    renew = 'a new key? renew the snapshot (docs/ros_distributions.md, rosdep keys)'
    assert result.returncode == 0, result.stdout + result.stderr + renew
    keys = len(check_rosdep_keys.package_keys(ROOT / 'package.xml'))
    assert result.stdout.splitlines() == [
        f'{distro}: all {keys} keys resolve, and the optional control_msgs, cv_bridge'
        for distro in ('humble', 'jazzy', 'kilted')
    ]


def test_a_key_that_no_distribution_has_is_named(tmp_path):
    manifest = (ROOT / 'package.xml').read_text()
    extra = '<exec_depend>python3-no-such-module</exec_depend>\n  <exec_depend>rclpy</exec_depend>'
    package_xml = tmp_path / 'package.xml'
    package_xml.write_text(manifest.replace('<exec_depend>rclpy</exec_depend>', extra, 1))
    result = _check('--package-xml', str(package_xml))
    assert result.returncode == 1
    assert [line for line in result.stdout.splitlines() if 'no-such' in line] == [
        f'{distro}: python3-no-such-module: neither released in {distro} nor a rosdep rule'
        for distro in ('humble', 'jazzy', 'kilted')
    ]


def test_a_rule_counts_only_for_the_platform_versions_it_covers():
    rule = {'ubuntu': {'*': ['python3-thing'], 'jammy': None}, 'rhel': {'pip': {'packages': []}}}
    assert check_rosdep_keys.system_resolves(rule, 'ubuntu', 'noble')
    assert not check_rosdep_keys.system_resolves(rule, 'ubuntu', 'jammy')
    assert not check_rosdep_keys.system_resolves(rule, 'rhel', '9')
    assert not check_rosdep_keys.system_resolves(rule, 'debian', 'bookworm')
    assert check_rosdep_keys.system_resolves({'debian': ['python3-thing']}, 'debian', 'bookworm')


@pytest.mark.parametrize('distro', ['humble', 'jazzy', 'kilted'])
def test_a_key_missing_on_one_platform_of_a_distribution_is_named(distro):
    rosdistro = check_rosdep_keys.Rosdistro(SNAPSHOT)
    rosdistro.rules['python3-yaml'] = {'ubuntu': ['python3-yaml']}  # Ubuntu only
    platforms = check_rosdep_keys.platforms(rosdistro.distribution(distro))
    others = [f'{system} {version}' for system, version in platforms if system != 'ubuntu']
    assert rosdistro.unresolved(distro, ['python3-yaml', 'rclpy']) == [
        f'python3-yaml: no packages for {", ".join(others)}'
    ]
