# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The parent a process watches: the launcher's id where it gave one (ROS-free)."""

import os
import subprocess
import sys

from dreamzero_ros.core.processes.process_lifetime import (
    PARENT_PID_ENV,
    launcher_env,
    parent_at_start,
)


def _ended_process_id() -> int:
    """The id of a process that has ended and been reaped."""
    process = subprocess.Popen([sys.executable, '-c', ''])
    process.wait()
    return process.pid


def test_without_a_launcher_id_the_parent_is_watched():
    assert parent_at_start({}) == os.getppid()


def test_the_launcher_that_is_the_parent_is_watched_and_its_id_not_passed_on():
    environ = {PARENT_PID_ENV: str(os.getppid()), 'OTHER': 'x'}
    assert parent_at_start(environ) == os.getppid()
    assert environ == {'OTHER': 'x'}  # the process's own children do not inherit it


def test_a_launcher_that_has_ended_already_is_the_parent_lost():
    ended = _ended_process_id()
    assert parent_at_start({PARENT_PID_ENV: str(ended)}) == ended != os.getppid()


def test_a_live_process_that_is_not_the_parent_is_no_launcher():
    # e.g. an exported shell variable naming another process: watch the real parent
    assert parent_at_start({PARENT_PID_ENV: str(os.getpid())}) == os.getppid()
    assert parent_at_start({PARENT_PID_ENV: 'launch'}) == os.getppid()


def test_a_launcher_gives_its_own_id():
    assert launcher_env() == {PARENT_PID_ENV: str(os.getpid())}
