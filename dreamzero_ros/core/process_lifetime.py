# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Tie a process's lifetime to its parent's, so that nothing is left running as an orphan.

- :func:`die_with_parent`: a ``preexec_fn`` for child processes that hold no robot state (the
  engine worker ranks): Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) kills the
  child as soon as the thread that started it ends. Start such children from a thread that
  lives as long as the parent (the node starts them from its executor thread).
- :class:`ParentWatchdog`: for the node itself, which must hold the robot before it exits: a
  thread notices that the parent process is gone (``getppid`` changes when a process is
  re-parented), asks for an orderly stop, and ends the process after a grace period if the
  stop has not finished by then. It polls rather than using the parent-death signal, which
  would also fire when a short-lived thread of the parent (not the parent) ends.
"""

from __future__ import annotations

from collections.abc import Callable
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_LIBC = (
    ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True) if sys.platform == 'linux' else None
)


def die_with_parent(signum: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``subprocess.Popen`` ``preexec_fn`` that has the child get ``signum`` when the parent dies.

    Also ends the child at once when the parent is already gone. Does nothing off Linux.
    """
    parent = os.getpid()
    prctl = _LIBC.prctl if _LIBC is not None else None

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signum)

    return preexec


class ParentWatchdog:
    """Calls ``on_lost`` once the parent process is gone, then ends this process after ``grace``.

    ``on_lost`` should ask for an orderly stop (the node holds and cleans up); if the process
    is still alive ``grace`` seconds later, it exits with status 1 without further clean-up.
    """

    def __init__(self, on_lost: Callable[[], None], period: float = 0.02, grace: float = 0.7):
        self._parent = os.getppid()
        self._on_lost = on_lost
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
        while os.getppid() == self._parent:
            time.sleep(self._period)
        self._on_lost()
        time.sleep(self._grace)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
