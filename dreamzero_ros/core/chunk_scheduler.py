# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Pipelined chunk execution: merge each new chunk into the plan the robot is executing.

A chunk answers an observation taken at ``stamp``; row ``k`` is the command for
``stamp + k * step_duration``. It arrives ``latency`` seconds later, while the previous plan is
still executing. :func:`merge_chunk` drops the rows already in the past and cross-fades from the
executing plan to the new rows over a window as long as the measured latency (clamped to
``[blend_min_steps, blend_max_steps]`` steps): the older the observation behind a chunk, the
further it may disagree with the plan in force, so the longer the hand-over. The first kept row
therefore starts (almost) exactly where the executing plan is, and the blend weight rises
linearly to 1 at the end of the window.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np


class ActionPlan:
    """Command rows at absolute times, linearly interpolated, holding the ends."""

    def __init__(self, times: np.ndarray, rows: np.ndarray) -> None:
        times = np.asarray(times, dtype=np.float64)
        rows = np.asarray(rows, dtype=np.float64)
        if times.ndim != 1 or rows.ndim != 2 or len(times) != len(rows) or len(times) == 0:
            raise ValueError(
                f'need N times and (N, D) rows, N >= 1; got {times.shape}, {rows.shape}'
            )
        if np.any(np.diff(times) <= 0):
            raise ValueError('plan times must be strictly increasing')
        self.times = times
        self.rows = rows

    @classmethod
    def hold(cls, position: np.ndarray, time: float) -> ActionPlan:
        """A plan that stays at ``position`` from ``time`` on."""
        return cls(np.array([time]), np.asarray(position, dtype=np.float64)[None, :])

    @property
    def start_time(self) -> float:
        """Time of the first row."""
        return float(self.times[0])

    @property
    def end_time(self) -> float:
        """Time of the last row; the plan holds it afterwards."""
        return float(self.times[-1])

    def position_at(self, time: float) -> np.ndarray:
        """Command at ``time``: interpolated between rows, the first/last row outside them."""
        if time <= self.times[0]:
            return self.rows[0].copy()
        if time >= self.times[-1]:
            return self.rows[-1].copy()
        index = int(np.searchsorted(self.times, time, side='right'))
        t0, t1 = self.times[index - 1], self.times[index]
        weight = (time - t0) / (t1 - t0)
        return (1.0 - weight) * self.rows[index - 1] + weight * self.rows[index]

    def positions_at(self, times: np.ndarray) -> np.ndarray:
        """:meth:`position_at` for many times, ``(len(times), D)``."""
        return np.stack(
            [np.interp(times, self.times, self.rows[:, j]) for j in range(self.rows.shape[1])],
            axis=1,
        )


@dataclass(frozen=True)
class BlendConfig:
    """Bounds of the latency-driven hand-over window, in control steps.

    ``blend_max_steps = 0`` switches blending off (the new chunk replaces the plan at once).
    """

    blend_min_steps: int = 2
    blend_max_steps: int = 12

    def __post_init__(self) -> None:
        if self.blend_min_steps < 0 or self.blend_max_steps < 0:
            raise ValueError('blend_min_steps and blend_max_steps must be >= 0')
        if self.blend_max_steps and self.blend_min_steps > self.blend_max_steps:
            raise ValueError(
                f'blend_min_steps {self.blend_min_steps} exceeds blend_max_steps '
                f'{self.blend_max_steps}'
            )

    def window(self, latency: float, step_duration: float) -> float:
        """Blend window, seconds, for a chunk that arrived ``latency`` s after its stamp."""
        if self.blend_max_steps == 0:
            return 0.0
        steps = min(max(latency / step_duration, self.blend_min_steps), self.blend_max_steps)
        return steps * step_duration


@dataclass(frozen=True)
class MergedChunk:
    """The plan after a chunk is merged (before safety), and what the merge did.

    Attributes:
        times: absolute times of the kept rows.
        rows: the kept rows, blended with the executing plan at the start.
        dropped_steps: rows of the chunk already in the past on arrival.
        blend_window: seconds over which the hand-over ran (0 without a plan in force).

    """

    times: np.ndarray
    rows: np.ndarray
    dropped_steps: int
    blend_window: float


def merge_chunk(
    plan: ActionPlan | None,
    actions: np.ndarray,
    stamp: float,
    step_duration: float,
    now: float,
    blend: BlendConfig,
) -> MergedChunk | None:
    """Merge a chunk arriving at ``now`` into ``plan``; ``None`` if all its rows are past."""
    actions = np.asarray(actions, dtype=np.float64)
    if step_duration <= 0:
        raise ValueError(f'step_duration must be > 0, got {step_duration}')
    first = max(0, math.ceil((now - stamp) / step_duration - 1e-9))
    if first >= len(actions):
        return None
    times = stamp + step_duration * np.arange(first, len(actions))
    rows = actions[first:].copy()
    window = 0.0
    if plan is not None:
        window = blend.window(now - stamp, step_duration)
        if window > 0:
            weights = np.clip((times - now) / window, 0.0, 1.0)[:, None]
            rows = (1.0 - weights) * plan.positions_at(times) + weights * rows
    return MergedChunk(times, rows, first, window)
