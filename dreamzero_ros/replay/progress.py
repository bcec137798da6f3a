# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A one-line text progress bar for long bags (stderr; plain lines when not a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Call with ``(done, total)`` in any unit; redraws at most every ``interval_s`` seconds.

    On a terminal the bar is redrawn in place; otherwise a line is printed every 10 %.
    """

    def __init__(
        self, label: str, unit: str = 's', stream: TextIO | None = None, interval_s: float = 0.2
    ) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self._interactive = self.stream.isatty()
        self._started = time.monotonic()
        self._last_draw = -float('inf')
        self._last_decile = -1

    def __call__(self, done: float, total: float) -> None:
        """Report progress ``done`` out of ``total``."""
        fraction = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
        now = time.monotonic()
        if self._interactive:
            if now - self._last_draw < self.interval_s and fraction < 1.0:
                return
            self._last_draw = now
            self.stream.write('\r' + self._line(done, total, fraction, now))
        else:
            decile = int(fraction * 10)
            if decile == self._last_decile:
                return
            self._last_decile = decile
            self.stream.write(self._line(done, total, fraction, now) + '\n')
        self.stream.flush()

    def close(self) -> None:
        """End the in-place line."""
        if self._interactive:
            self.stream.write('\n')
            self.stream.flush()

    def _line(self, done: float, total: float, fraction: float, now: float) -> str:
        width = 30
        filled = int(round(fraction * width))
        elapsed = now - self._started
        eta = f'{elapsed * (1.0 - fraction) / fraction:.0f} s' if fraction > 0 else '?'
        return (
            f'{self.label} [{"#" * filled}{"." * (width - filled)}] {fraction * 100:5.1f}% '
            f'{done:.1f}/{total:.1f} {self.unit}, elapsed {elapsed:.0f} s, eta {eta}'
        )
