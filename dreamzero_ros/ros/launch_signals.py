# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""SIGTERM to ``ros2 launch`` (systemd, ``docker stop``) stops the launched processes cleanly.

launch's own SIGTERM handling (``launch_service.py``) cancels its run at once and leaves the
processes it started running ("using SIGTERM can result in orphaned processes"). With
``OpaqueFunction(function=stop_cleanly_on_sigterm)`` in a launch description, SIGTERM is
handled as Ctrl-C is instead: a ``Shutdown`` event, so that every process gets SIGINT, is
waited for, and is escalated to SIGTERM and SIGKILL after launch's timeouts. (The policy node
also stops on its own when launch dies by SIGKILL: it watches its parent process.)

launch has no public way to give up its SIGTERM handler: the running signal manager is the
class-private ``AsyncSafeSignalManager.__current`` (the same in Humble, Jazzy and Kilted), and
its public ``handle(signum, None)`` removes a handler. Where that attribute is missing (a future
launch), nothing is changed and a warning says that SIGTERM keeps launch's own handling
(test/test_launch_sigterm.py checks both on the installed launch).

Needs ``launch`` (a ROS 2 install); imported only by launch files.
"""

from __future__ import annotations

import signal
from typing import Any

from launch.events import Shutdown
from launch.logging import get_logger
from launch.utilities.signal_management import AsyncSafeSignalManager

from launch import LaunchContext

#: Where launch keeps its running signal manager (name-mangled class attribute).
CURRENT_MANAGER = '_AsyncSafeSignalManager__current'


def stop_cleanly_on_sigterm(context: LaunchContext) -> None:
    """Install the SIGTERM handling; for ``OpaqueFunction`` (runs in launch's main thread)."""
    if not hasattr(AsyncSafeSignalManager, CURRENT_MANAGER):
        get_logger('dreamzero_ros').warning(
            "this launch keeps its signal manager elsewhere: SIGTERM keeps launch's own "
            'handling, which can orphan the node; stop with SIGINT (Ctrl-C)'
        )
        return
    loop = context.asyncio_loop

    def on_sigterm(signum: int, frame: Any) -> None:
        shutdown = Shutdown(reason='SIGTERM', due_to_sigint=False)
        loop.call_soon_threadsafe(context.emit_event_sync, shutdown)

    # A Python-level handler: SIGTERM no longer ends the process outright.
    signal.signal(signal.SIGTERM, on_sigterm)
    # launch's signal manager would still see SIGTERM (through the wakeup fd that every
    # Python-handled signal writes to) and cancel the run: take SIGTERM out of its table.
    manager = getattr(AsyncSafeSignalManager, CURRENT_MANAGER)
    if manager is not None:
        manager.handle(signal.SIGTERM, None)
