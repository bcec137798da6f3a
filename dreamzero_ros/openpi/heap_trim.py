# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Give the memory of large refused requests back to the system once the refusals stop.

A frame of several MiB is one ``malloc``. glibc serves the first ones with ``mmap`` and returns
them on ``free``, but then raises its threshold to their size: later ones come from the heap,
and once freed they stay in the process (fragmented between live blocks), so a server that
refused a minute of 15 MiB frames keeps hundreds of MiB it no longer uses. ``malloc_trim(0)``
returns every free page. :class:`HeapTrimmer` calls it once large refusals have been quiet for
a moment, never while they go on (each call walks the heap). Elsewhere than glibc it does
nothing.

Before trimming it runs a full garbage collection: a connection closed for a frame too large
leaves a reference cycle (websockets' protocol keeps the ``PayloadTooBig`` it raised, whose
traceback holds the parser's frame, which holds the protocol) that keeps the connection's
buffers, the bytes read of the refused frame among them, alive. Such cycles outlive the young
generations and then wait for a full collection, which a server at rest may not run for hours:
their memory is live, and no trim gives it back.
"""

from __future__ import annotations

from collections.abc import Callable
import ctypes
import ctypes.util
import gc
import time

#: Refused requests smaller than this leave nothing worth trimming.
MIN_TRIM_BYTES = 2**20


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library('c')
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc
        return None


class HeapTrimmer:
    """Trims the heap after large refused requests, once they have been quiet for ``quiet_s``.

    Args:
        quiet_s: seconds without a large refusal before trimming.
        clock: monotonic seconds (replaceable in tests).

    """

    def __init__(self, quiet_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._quiet_s = quiet_s
        self._clock = clock
        self._last: float | None = None
        self._trim = _malloc_trim()
        #: Trims done so far.
        self.trims = 0

    def note(self, size: int) -> None:
        """A request of ``size`` bytes was refused (or a frame that size dropped)."""
        if size >= MIN_TRIM_BYTES:
            self._last = self._clock()

    @property
    def due(self) -> bool:
        """Whether large refusals happened and have been quiet for ``quiet_s``."""
        return self._last is not None and self._clock() - self._last >= self._quiet_s

    def trim(self) -> None:
        """Collect garbage, then return the free heap pages to the system (takes a moment)."""
        self._last = None
        gc.collect()
        if self._trim is not None:
            self._trim(0)
        self.trims += 1
