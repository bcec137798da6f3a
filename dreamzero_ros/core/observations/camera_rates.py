# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Frames received per camera against the rate each camera is expected to send.

Large raw frames can be lost in the middleware (a best-effort reader of default Fast DDS gets
few 720p frames) without any error: the node only sees its inputs go stale. The monitor counts
the frames the node reads per camera over a sliding window and names the cameras received below
``MIN_FRACTION`` of their expected rate, so that the cause shows in diagnostics and the log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

#: A camera received below this fraction of its expected rate is reported.
MIN_FRACTION = 0.7
#: Shortest window, seconds; a slow camera's window spans at least WINDOW_PERIODS frames.
MIN_WINDOW = 2.0
WINDOW_PERIODS = 4.0


@dataclass(frozen=True)
class CameraRate:
    """One camera's received rate over its window (``measured`` None before a full window)."""

    camera: str
    expected: float
    measured: float | None

    @property
    def slow(self) -> bool:
        """Received below ``MIN_FRACTION`` of the expected rate over a full window."""
        return self.measured is not None and self.measured < MIN_FRACTION * self.expected

    def __str__(self) -> str:
        measured = '?' if self.measured is None else f'{self.measured:.1f}'
        return f'camera {self.camera!r} received at {measured} Hz, expected {self.expected:g} Hz'


class CameraRateMonitor:
    """Receipt times of each camera's frames over a window of ``max(2 s, 4 periods)``."""

    def __init__(self, expected: Mapping[str, float]) -> None:
        self.expected = dict(expected)
        self._windows = {
            camera: max(MIN_WINDOW, WINDOW_PERIODS / rate) for camera, rate in expected.items()
        }
        self._receipts: dict[str, deque[float]] = {camera: deque() for camera in expected}
        self._since: float | None = None

    def start(self, now: float) -> None:
        """Count from ``now`` afresh (the node reads its inputs from now on)."""
        self._since = now
        for receipts in self._receipts.values():
            receipts.clear()

    def stop(self) -> None:
        """Not reading: no rate is measured until :meth:`start`."""
        self._since = None

    def record(self, camera: str, frames: int, now: float) -> None:
        """``frames`` frames of ``camera`` were read at ``now``."""
        if self._since is None:
            return
        if now < self._since:  # the clock went back: start over
            self.start(now)
        self._receipts[camera].extend([now] * frames)

    def rates(self, now: float) -> list[CameraRate]:
        """Every camera's rate; ``measured`` None until a full window has been watched."""
        result = []
        for camera, expected in self.expected.items():
            window = self._windows[camera]
            receipts = self._receipts[camera]
            while receipts and receipts[0] <= now - window:
                receipts.popleft()
            watched = self._since is not None and now - self._since >= window
            result.append(CameraRate(camera, expected, len(receipts) / window if watched else None))
        return result
