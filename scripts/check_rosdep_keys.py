# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Check that every rosdep key of package.xml resolves on each ROS 2 distribution.

Reads a checkout of ros/rosdistro (or a snapshot of it, ``--write-snapshot``): a key resolves on a
distribution when the distribution file releases a package of that name (rosdep installs
``ros-<distro>-<key>``), or when rosdep/base.yaml or rosdep/python.yaml give it packages on every
platform the distribution is released for (``release_platforms``: the Ubuntu, Debian and RHEL
versions). The optional keys (imported only where installed, not declared) are checked the same
way, so that they behave alike on each distribution. Exits 1 naming every key that does not
resolve, with the distribution and platform.

Usage: check_rosdep_keys.py ROSDISTRO [--distro humble jazzy kilted] [--package-xml PATH]
       [--write-snapshot FOLDER]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
import shutil
import sys
import xml.etree.ElementTree as ElementTree

import yaml

ROOT = Path(__file__).resolve().parents[1]
DISTROS = ('humble', 'jazzy', 'kilted')
#: Named in package.xml's comment; imported only where installed.
OPTIONAL_KEYS = ('control_msgs', 'cv_bridge')
DEPEND_TAGS = (
    'depend', 'build_depend', 'buildtool_depend', 'build_export_depend', 'exec_depend',
    'test_depend', 'doc_depend',
)  # fmt: skip
ROSDEP_FILES = ('rosdep/base.yaml', 'rosdep/python.yaml')
#: Keys of a platform entry that name an installer rather than a platform version.
INSTALLERS = {'apt', 'pip', 'dnf', 'yum', 'source', 'packages'}


def package_keys(package_xml: Path) -> list[str]:
    """Every dependency key of a package.xml, in order, without repeats."""
    root = ElementTree.parse(package_xml).getroot()
    keys = [element.text.strip() for tag in DEPEND_TAGS for element in root.iter(tag)]
    return list(dict.fromkeys(keys))


def _load(path: Path) -> dict:
    with path.open() as stream:
        return yaml.safe_load(stream) or {}


def released_packages(distribution: dict) -> dict[str, str]:
    """Package name -> repository name of every package the distribution file releases."""
    packages = {}
    for name, repository in (distribution.get('repositories') or {}).items():
        release = (repository or {}).get('release')
        if release and release.get('version'):
            for package in release.get('packages') or [name]:
                packages[package] = name
    return packages


def platforms(distribution: dict) -> list[tuple[str, str]]:
    """(operating system, version) pairs the distribution is released for."""
    return [
        (system, str(version))
        for system, versions in (distribution.get('release_platforms') or {}).items()
        for version in versions
    ]


def _has_packages(value: object) -> bool:
    if isinstance(value, dict):
        if 'packages' in value:
            return bool(value['packages'])
        return any(_has_packages(value[key]) for key in value if key in INSTALLERS)
    return bool(value)


def system_resolves(entry: dict, system: str, version: str) -> bool:
    """Whether a rosdep entry gives packages for one platform (per-version entries, ``*``)."""
    value = (entry or {}).get(system)
    if isinstance(value, dict) and not INSTALLERS & value.keys():
        value = value.get(version, value.get('*'))
    return _has_packages(value)


class Rosdistro:
    """The files of a rosdistro checkout this check reads."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index = _load(folder / 'index-v4.yaml')['distributions']
        self.rules: dict[str, dict] = {}
        for name in ROSDEP_FILES:
            self.rules.update(_load(folder / name))

    def distribution(self, distro: str) -> dict:
        """The distribution file of ``distro``, as the index names it."""
        if distro not in self.index:
            raise SystemExit(f'{distro}: not in the rosdistro index of {self.folder}')
        return _load(self.folder / self.index[distro]['distribution'][0])

    def unresolved(self, distro: str, keys: Iterable[str]) -> list[str]:
        """Why each key that does not resolve on ``distro`` does not ('key: reason')."""
        distribution = self.distribution(distro)
        released = released_packages(distribution)
        problems = []
        for key in keys:
            if key in released:
                continue
            if key not in self.rules:
                problems.append(f'{key}: neither released in {distro} nor a rosdep rule')
                continue
            missing = [
                f'{system} {version}'
                for system, version in platforms(distribution)
                if not system_resolves(self.rules[key], system, version)
            ]
            if missing:
                problems.append(f'{key}: no packages for {", ".join(missing)}')
        return problems

    def write_snapshot(self, out: Path, distros: Iterable[str], keys: list[str]) -> None:
        """The entries this check reads for ``keys``, in the layout of a rosdistro checkout."""
        header = (
            '# Entries of ros/rosdistro (BSD 3-Clause, Copyright (c) Open Source Robotics\n'
            '# Foundation, Inc.; LICENSE beside) that scripts/check_rosdep_keys.py reads, written\n'
            '# by its --write-snapshot from a checkout (which: docs/ros_distributions.md).\n'
        )
        distros = list(distros)
        index = {'distributions': {}, 'type': 'index', 'version': 4}
        for distro in distros:
            path = f'{distro}/distribution.yaml'
            index['distributions'][distro] = {'distribution': [path]}
            distribution = self.distribution(distro)
            released = released_packages(distribution)
            repositories = {
                released[key]: {
                    'release': {
                        'packages': sorted(
                            package
                            for package, repo in released.items()
                            if repo == released[key] and package in keys
                        ),
                        'version': distribution['repositories'][released[key]]['release'][
                            'version'
                        ],
                    }
                }
                for key in keys
                if key in released
            }
            snapshot = {
                'release_platforms': distribution.get('release_platforms'),
                'repositories': repositories,
                'type': 'distribution',
                'version': 2,
            }
            _dump(out / path, header, snapshot)
        _dump(out / 'index-v4.yaml', header, index)
        shutil.copy(self.folder / 'LICENSE', out / 'LICENSE')
        for name in ROSDEP_FILES:
            rules = _load(self.folder / name)
            _dump(out / name, header, {key: rules[key] for key in keys if key in rules})


def _dump(path: Path, header: str, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(data, sort_keys=True, default_flow_style=False))


def main(argv: list[str] | None = None) -> int:
    """Check (or snapshot) the keys; 0 when every key resolves on every distribution."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('rosdistro', type=Path, help='a checkout of ros/rosdistro (or snapshot)')
    parser.add_argument('--distro', nargs='+', default=list(DISTROS))
    parser.add_argument('--package-xml', type=Path, default=ROOT / 'package.xml')
    parser.add_argument('--write-snapshot', type=Path, metavar='FOLDER')
    options = parser.parse_args(argv)
    rosdistro = Rosdistro(options.rosdistro)
    keys = package_keys(options.package_xml)
    if options.write_snapshot:
        rosdistro.write_snapshot(options.write_snapshot, options.distro, keys + list(OPTIONAL_KEYS))
        print(
            f'snapshot of {len(keys) + len(OPTIONAL_KEYS)} keys written to {options.write_snapshot}'
        )
        return 0
    failed = False
    for distro in options.distro:
        problems = rosdistro.unresolved(distro, keys)
        optional = rosdistro.unresolved(distro, OPTIONAL_KEYS)
        for problem in problems + [f'{p} (optional)' for p in optional]:
            print(f'{distro}: {problem}')
        failed = failed or bool(problems or optional)
        if not problems and not optional:
            optional_names = ', '.join(OPTIONAL_KEYS)
            print(f'{distro}: all {len(keys)} keys resolve, and the optional {optional_names}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
