# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rolling latency percentiles and event rates for diagnostics (time passed in, no clock)."""

from __future__ import annotations

from collections import deque

import numpy as np


class LatencyStats:
    """The last ``window`` latencies (seconds) and the arrival times of the last ``window`` events.

    ``record(latency, now)`` adds one completed event; percentiles and the event rate are over the
    retained window.
    """

    def __init__(self, window: int = 50) -> None:
        if window < 1:
            raise ValueError(f'window must be >= 1, got {window}')
        self._latencies: deque[float] = deque(maxlen=window)
        self._times: deque[float] = deque(maxlen=window)
        self.count = 0

    def record(self, latency: float, now: float) -> None:
        """Add the latency of one event that completed at time ``now`` (seconds)."""
        self._latencies.append(float(latency))
        self._times.append(float(now))
        self.count += 1

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the retained latencies; NaN before any event."""
        if not self._latencies:
            return float('nan')
        return float(np.percentile(np.fromiter(self._latencies, dtype=float), q))

    @property
    def p50(self) -> float:
        """Median latency, seconds."""
        return self.percentile(50)

    @property
    def p95(self) -> float:
        """95th-percentile latency, seconds."""
        return self.percentile(95)

    @property
    def last(self) -> float:
        """Most recent latency; NaN before any event."""
        return self._latencies[-1] if self._latencies else float('nan')

    def rate(self, now: float) -> float:
        """Events per second over the retained window, up to ``now``; 0 with fewer than 2."""
        if len(self._times) < 2 or now <= self._times[0]:
            return 0.0
        return (len(self._times) - 1) / (max(now, self._times[-1]) - self._times[0])

    def clear(self) -> None:
        """Forget every event."""
        self._latencies.clear()
        self._times.clear()
        self.count = 0
