# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The package's progress lines (Python ``logging``, INFO) shown where a tool or node prints.

The engine reports long work on its loggers (a checkpoint load, one line per file read); a tool
prints through its own ``log`` (``dreamzero-replay: ...`` on stderr, the node's ROS logger).
:func:`forwarded_logs` hands those lines to ``log`` while a block runs, and only to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
import logging

ENGINE_LOGGER = 'dreamzero_ros.engine'


class _Forward(logging.Handler):
    def __init__(self, log: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._log(record.getMessage())
        except Exception:  # noqa: BLE001 - a progress line must never end the work it reports
            self.handleError(record)


@contextlib.contextmanager
def forwarded_logs(log: Callable[[str], None], name: str = ENGINE_LOGGER) -> Iterator[None]:
    """INFO and higher records of logger ``name`` (and below it) go to ``log`` in the block.

    They do not also reach the root logger's handlers meanwhile (a tool whose ``log`` is itself
    a logger would print them twice).
    """
    logger = logging.getLogger(name)
    handler = _Forward(log)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
