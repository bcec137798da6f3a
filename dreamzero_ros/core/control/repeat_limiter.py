# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Log a repeating event at most once per period per kind, counting the ones left out.

Inputs that go bad and good again (a camera that stutters, a clock offset at the skew limit)
would otherwise log one warning per flip. rclpy's ``throttle_duration_sec`` limits a call site,
so a new kind of event right after another would be lost; this limiter keeps a period per kind
and says how many were left out when it logs that kind again.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RepeatLimiter:
    """Decides which occurrences of each kind of event to log.

    Attributes:
        period: least seconds between two logged occurrences of one kind.

    """

    period: float
    _logged_at: dict[str, float] = field(default_factory=dict)
    _left_out: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.period < 0:
            raise ValueError(f'period must be >= 0, got {self.period}')

    def admit(self, kind: str, now: float) -> str | None:
        """``None`` to leave this occurrence out; else a suffix for its log line.

        The suffix is empty, or says how many occurrences of ``kind`` were left out since it
        was last logged.
        """
        last = self._logged_at.get(kind)
        if last is not None and now - last < self.period:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return None
        self._logged_at[kind] = now
        left_out = self._left_out.pop(kind, 0)
        if not left_out:
            return ''
        return f' ({left_out} more since {now - last:.1f} s ago, not logged)'
