# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Interface packages a test needs but no wheel provides, built with rosidl on first use.

``control_msgs_env()`` builds ``test/interfaces/control_msgs`` (control_msgs/action/GripperCommand
and FollowJointTrajectory with the fields ros-controls/control_msgs defines) with colcon from the
venv's ROS 2 wheels, the recipe of scripts/build_interfaces.sh, into ``build/test_interfaces``
(reused while the definition and the venv are unchanged), and returns the environment a process
needs to import it; ``interface_env('tf2_msgs')`` does the same for ``test/interfaces/tf2_msgs``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[1]
INTERFACES = REPO / 'test' / 'interfaces'


def control_msgs_env() -> dict[str, str]:
    """Environment variables (PYTHONPATH, LD_LIBRARY_PATH) that make control_msgs importable."""
    return interface_env('control_msgs')


def interface_env(package: str) -> dict[str, str]:
    """Environment variables that make the test interface package ``package`` importable."""
    source = INTERFACES / package
    digest = hashlib.sha256(  # one build per definition and venv (ROS 2 distribution)
        sys.prefix.encode()
        + b''.join(path.read_bytes() for path in sorted(source.rglob('*')) if path.is_file())
    ).hexdigest()[:12]
    base = REPO / 'build' / 'test_interfaces' / digest
    install = base / 'install'
    venv = Path(sys.executable).parent.parent
    if not (install / 'lib' / f'lib{package}__rosidl_generator_c.so').exists():
        env = {
            **os.environ,
            'AMENT_PREFIX_PATH': str(venv),
            'CMAKE_PREFIX_PATH': str(venv),
            'PATH': f'{venv / "bin"}:{os.environ["PATH"]}',
        }
        result = subprocess.run(
            [str(venv / 'bin' / 'colcon'), '--log-base', str(base / 'log'), 'build',
             '--base-paths', str(source), '--build-base', str(base / 'build'),
             '--install-base', str(install), '--merge-install',
             '--event-handlers', 'console_cohesion-', 'console_stderr-',
             '--cmake-args', '-DBUILD_TESTING=OFF', f'-DPython3_EXECUTABLE={sys.executable}'],
            env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if result.returncode != 0:
            pytest.fail(f'building the test {package} failed:\n{result.stdout[-3000:]}')
    site = install / 'lib' / f'python{sys.version_info.major}.{sys.version_info.minor}'
    return {
        'PYTHONPATH': os.pathsep.join(
            [str(site / 'site-packages'), *filter(None, [os.environ.get('PYTHONPATH')])]
        ),
        'LD_LIBRARY_PATH': os.pathsep.join(
            [str(install / 'lib'), *filter(None, [os.environ.get('LD_LIBRARY_PATH')])]
        ),
    }
