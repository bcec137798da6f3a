# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Tie a process's lifetime to its parent's, so that nothing is left running as an orphan.

:class:`ParentWatchdog` is for the node itself, which must hold the robot before it exits: a
thread notices that the parent process is gone (``getppid`` changes when a process is
re-parented), asks for an orderly stop, and ends the process after a grace period if the stop
has not finished by then. It polls rather than using the parent-death signal (which the engine's
worker ranks use, :func:`~dreamzero_ros.engine.workers.launch.die_with_parent`), which would
also fire when a short-lived thread of the parent (not the parent) ends.

The parent watched is :data:`PARENT_AT_START`: the process id that the launcher gave in
:data:`PARENT_PID_ENV` (the launch files and ``dreamzero-demo`` set it with
:func:`launcher_env`), else the parent when this module is first imported. A launcher that
exits within a fraction of a second of starting the process is gone before Python has even
imported this module (``getppid`` already says 1, or a sub-reaper): only the id it gave tells
that the parent the process was started by has ended. A value that names a live process other
than the parent (left in an exported shell variable, say) is not the launcher and is ignored.
The variable is removed from this process's environment, so that its own children do not take
its launcher for theirs. Without it, import this module before anything slow (rclpy, torch).
When the parent ends, the output it was reading (``ros2 launch`` reads
its nodes' stdout and stderr through pipes) is gone with it: the watchdog points those file
descriptors at ``/dev/null`` first, so that no write in the stop that follows fails.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time

#: Environment variable in which a launcher gives the processes it starts its process id.
PARENT_PID_ENV = 'DREAMZERO_PARENT_PID'


def stop_process(process: subprocess.Popen, timeout: float = 20.0) -> None:
    """Stop a child as Ctrl-C does (SIGINT: a node holds, then exits); killed after ``timeout``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def launcher_env() -> dict[str, str]:
    """What a launcher adds to the environment of the processes it starts: its process id."""
    return {PARENT_PID_ENV: str(os.getpid())}


def _alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (ended, not yet reaped). Linux."""
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().rpartition(')')[2].split()[0] != 'Z'
    except OSError:
        return False


def parent_at_start(environ: MutableMapping[str, str] = os.environ) -> int:
    """The parent to watch: the launcher's id in ``environ`` (removed from it), else getppid."""
    given = environ.pop(PARENT_PID_ENV, None)
    parent = os.getppid()
    try:
        launcher = int(given) if given is not None else parent
    except ValueError:
        return parent
    if launcher == parent or (launcher > 1 and not _alive(launcher)):
        return launcher  # the parent, or a launcher that has ended already
    return parent


#: The parent to watch, read when the module was first imported (see the module's docstring).
PARENT_AT_START = parent_at_start()


def _reader_gone(fd: int) -> bool:
    """True when ``fd`` is a pipe or socket whose reading end is closed (``poll`` says POLLERR)."""
    poller = select.poll()
    try:
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, mask in events)


def silence_dead_outputs() -> list[int]:
    """Point stdout and stderr at ``/dev/null`` where nothing reads them any more; those fds.

    Python ignores SIGPIPE, so a write to a pipe whose reader died raises BrokenPipeError (and
    a C write fails with EPIPE): after this, such writes succeed and go nowhere.
    """
    dead = [fd for fd in (1, 2) if _reader_gone(fd)]
    if dead:
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in dead:
            os.dup2(null, fd)
        os.close(null)
    return dead


def flush_outputs() -> None:
    """Flush ``sys.stdout`` and ``sys.stderr``, ignoring a closed or broken stream."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


class ParentWatchdog:
    """Calls ``on_lost`` once the parent process is gone, then ends this process after ``grace``.

    ``on_lost`` should ask for an orderly stop (the node holds and cleans up); if the process
    is still alive ``grace`` seconds later, it exits with status 1 without further clean-up.
    ``on_lost`` None (while the process is starting, with nothing to stop yet): exit at once.
    It may be set at any time. ``parent`` defaults to :data:`PARENT_AT_START`. Whatever
    ``on_lost`` does (raises included), the process exits.
    """

    def __init__(
        self,
        on_lost: Callable[[], None] | None,
        period: float = 0.02,
        grace: float = 0.7,
        parent: int = PARENT_AT_START,
    ):
        self._parent = parent
        self.on_lost = on_lost
        self._period = period
        self._grace = grace
        self._thread = threading.Thread(target=self._run, name='parent-watchdog', daemon=True)

    @property
    def parent(self) -> int:
        """The process id of the parent being watched."""
        return self._parent

    def start(self) -> ParentWatchdog:
        """Start watching (a daemon thread)."""
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while os.getppid() == self._parent:
                time.sleep(self._period)
            silence_dead_outputs()
            on_lost = self.on_lost
            if on_lost is not None:
                on_lost()
                time.sleep(self._grace)
        finally:
            flush_outputs()
            os._exit(1)
