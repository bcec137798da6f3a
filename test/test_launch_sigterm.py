# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""SIGTERM to a launch process stops what it launched as Ctrl-C does, instead of orphaning it.

Runs a real ``LaunchService`` in its own process (as ``ros2 launch`` does) with the handling the
package's launch file installs, and a child that records the signals it gets. Needs ``launch``
(a ROS 2 install).
"""

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import pytest

_CHILD = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def on_sigint(signum, frame):
    out.write_text(out.read_text() + 'SIGINT\\n')
    sys.exit(0)
signal.signal(signal.SIGINT, on_sigint)
out.write_text('started\\n')
time.sleep(600)
"""

_LAUNCH = """
import sys
from launch import LaunchDescription, LaunchService
from launch.actions import ExecuteProcess, OpaqueFunction
from dreamzero_ros.ros.launch_signals import stop_cleanly_on_sigterm
service = LaunchService()
service.include_launch_description(LaunchDescription([
    OpaqueFunction(function=stop_cleanly_on_sigterm),
    ExecuteProcess(cmd=[sys.executable, '-c', sys.argv[1], sys.argv[2]], output='screen'),
]))
sys.exit(service.run())
"""


def _wait(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_sigterm_to_launch_interrupts_and_waits_for_the_children(tmp_path):
    pytest.importorskip('launch.actions', reason='launch has no PyPI wheel; needs ROS 2')
    record = tmp_path / 'child.txt'
    record.write_text('')
    launch = subprocess.Popen(
        [sys.executable, '-c', _LAUNCH, _CHILD, str(record)],
        cwd=tmp_path,  # not the repository root, whose launch/ folder shadows the package
        env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert _wait(lambda: 'started' in record.read_text(), 60), 'the child did not start'
        launch.send_signal(signal.SIGTERM)
        output, _ = launch.communicate(timeout=30)
    finally:
        if launch.poll() is None:
            launch.kill()
    assert record.read_text().splitlines() == ['started', 'SIGINT'], output
    assert 'orphaned' not in output, output
    assert Path(record).exists()


def test_the_signal_manager_is_where_the_handling_looks_for_it():
    """The guarded private name still exists in the installed launch; a manager is found there."""
    pytest.importorskip('launch.actions', reason='launch has no PyPI wheel; needs ROS 2')
    import asyncio

    from launch.utilities.signal_management import AsyncSafeSignalManager

    from dreamzero_ros.ros.launch_signals import CURRENT_MANAGER

    assert getattr(AsyncSafeSignalManager, CURRENT_MANAGER) is None  # none running
    loop = asyncio.new_event_loop()
    try:
        with AsyncSafeSignalManager(loop) as manager:
            assert getattr(AsyncSafeSignalManager, CURRENT_MANAGER) is manager
            assert manager.handle(signal.SIGTERM, None) is None  # the public removal
    finally:
        loop.close()
