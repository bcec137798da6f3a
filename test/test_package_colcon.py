# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A workspace with the checkout in src/: a plain colcon finds one package and builds all of it.

The install holds the messages and action with the hand-written package beside them, the share
files, and the console scripts where ``ros2 run`` and launch_ros look; sourcing it is enough to
run the node's executable and use the interfaces.
"""

import os
from pathlib import Path
import re
import shutil
import subprocess
import sys

from package_support import console_scripts
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent


def _colcon() -> str:
    colcon = shutil.which('colcon') or str(Path(sys.executable).with_name('colcon'))
    if not Path(colcon).exists():
        pytest.skip('colcon is not installed (pip install colcon-common-extensions)')
    return colcon


def _env() -> dict[str, str]:
    """The wheels' prefix, as a sourced ROS 2 install would give (VIRTUAL_ENV: CMake's Python)."""
    return {
        **os.environ,
        'AMENT_PREFIX_PATH': str(VENV),
        'CMAKE_PREFIX_PATH': str(VENV),
        'VIRTUAL_ENV': str(VENV),
        'PATH': f'{VENV / "bin"}:{os.environ["PATH"]}',
    }


@pytest.fixture(scope='module')
def workspace(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp('ws')
    (work / 'src').mkdir()
    (work / 'src' / 'dreamzero_ros').symlink_to(ROOT, target_is_directory=True)
    return work


@pytest.fixture(scope='module')
def install(workspace) -> Path:
    result = subprocess.run(
        [_colcon(), 'build', '--event-handlers', 'console_direct-'],
        cwd=workspace, env=_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = workspace / 'log' / 'latest_build' / 'dreamzero_ros' / 'stderr.log'
    details = log.read_text() if log.exists() else ''
    assert result.returncode == 0, result.stdout[-3000:] + details[-3000:]
    return workspace / 'install'


def test_plain_colcon_list_finds_exactly_the_package(workspace):
    result = subprocess.run(
        [_colcon(), 'list'], cwd=workspace, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['dreamzero_ros', 'src/dreamzero_ros', '(ros.ament_cmake)']


def test_share_holds_manifest_launch_config_and_interfaces(install):
    share = install / 'dreamzero_ros' / 'share' / 'dreamzero_ros'
    assert (share / 'package.xml').read_text() == (ROOT / 'package.xml').read_text()
    assert (share / 'launch' / 'dreamzero.launch.py').is_file()
    installed = {path.name for path in (share / 'config').glob('*.yaml')}
    assert installed == {path.name for path in (ROOT / 'config').glob('*.yaml')} and installed
    for kind, suffix in (('msg', '.msg'), ('action', '.action')):
        sources = {path.name for path in (ROOT / kind).glob(f'*{suffix}')}
        assert sources and sources <= {path.name for path in (share / kind).iterdir()}
        assert {Path(name).stem + '.idl' for name in sources} <= {
            path.name for path in (share / kind).iterdir()
        }
    index = install / 'dreamzero_ros' / 'share' / 'ament_index' / 'resource_index'
    assert (index / 'packages' / 'dreamzero_ros').is_file()
    interfaces = (index / 'rosidl_interfaces' / 'dreamzero_ros').read_text().split()
    assert {'msg/ActionChunk.msg', 'msg/PolicyStatus.msg', 'action/RunTask.action'} <= set(
        interfaces
    )


def test_python_package_holds_code_data_and_generated_modules(install):
    (package,) = install.glob('dreamzero_ros/lib/python3*/site-packages/dreamzero_ros')
    assert (package / '__init__.py').read_text() == (ROOT / 'dreamzero_ros/__init__.py').read_text()
    source = ROOT / 'dreamzero_ros' / 'embodiments'
    embodiments = {path.name for path in (package / 'embodiments').glob('*.yaml')}
    assert embodiments == {path.name for path in source.glob('*.yaml')} and embodiments
    assert (package / 'ros' / 'policy_node.py').is_file()
    assert (package / 'msg' / '_action_chunk.py').is_file()
    assert (package / 'action' / '_run_task.py').is_file()


def test_console_scripts_are_executables_in_lib_for_ros2_run(install):
    lib = install / 'dreamzero_ros' / 'lib' / 'dreamzero_ros'
    scripts = {path.name for path in lib.iterdir()}
    assert scripts == set(console_scripts())
    assert {'dreamzero-policy-node', 'dreamzero-sim-arm', 'dreamzero-demo'} <= scripts
    assert all(os.access(lib / name, os.X_OK) for name in scripts)


_CHECK = """
import sys

from ament_index_python.packages import get_package_prefix
from rclpy.serialization import deserialize_message, serialize_message

import dreamzero_ros
from dreamzero_ros.action import RunTask
from dreamzero_ros.msg import ActionChunk, PolicyStatus
from dreamzero_ros.ros import policy_node

goal = RunTask.Goal(instruction='stack the blocks', time_limit=12.5)
assert deserialize_message(serialize_message(goal), RunTask.Goal) == goal
generated = [sys.modules[kind.__module__] for kind in (RunTask, ActionChunk, PolicyStatus)]
for module in (dreamzero_ros, policy_node, *generated):
    print(module.__file__)
print(get_package_prefix('dreamzero_ros'))
"""


def test_sourced_install_provides_the_interfaces_code_and_executables(install, tmp_path):
    """What launch_ros's ExecutableInPackage and ``ros2 run`` do, after ``source``."""
    prefix = install / 'dreamzero_ros'
    check = tmp_path / 'check.py'
    check.write_text(_CHECK)
    shell = (
        f'source {install}/local_setup.bash && {sys.executable} {check}'
        f' && {prefix}/lib/dreamzero_ros/dreamzero-policy-node --help'
    )
    result = subprocess.run(
        ['bash', '-c', shell], cwd=tmp_path, env=_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    *modules, package_prefix = lines[:6]  # 5 modules, then the prefix
    assert Path(package_prefix) == prefix
    assert all(Path(path).is_relative_to(prefix) for path in modules), modules
    assert 'usage' in '\n'.join(lines[6:]).lower()


def test_colcon_test_says_which_checks_it_runs_and_why(install):
    """The package checks run, not the whole suite, and colcon test says so where it shows it."""
    workspace = install.parent
    build = workspace / 'build' / 'dreamzero_ros'
    listed = subprocess.run(
        ['ctest', '-N'], cwd=build, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    tests = re.findall(r'Test +#\d+: (\S+)', listed.stdout)
    assert tests == ['test_package_manifest', 'test_package_lint', 'test_package_interfaces']
    result = subprocess.run(  # no test selected: ctest still reads the tests and speaks
        [_colcon(), 'test', '--ctest-args', '-R', '^none$'],
        cwd=workspace, env=_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [text for text in result.stderr.splitlines() if 'colcon test runs' in text]
    assert all(f'test/{name}.py' in line for name in tests), line
    assert 'not the whole suite' in line and 'python -m pytest' in line
