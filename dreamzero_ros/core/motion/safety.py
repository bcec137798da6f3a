# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Last check of every command before it can reach a controller.

Rows are in policy units, one column per action dimension (for DROID: 7 arm joint positions in
radians, then the gripper in ``[0, 1]``).

Rules, in order:

1. Any non-finite value refuses the whole chunk.
2. ``previous`` (the command in force, or the measured joints before the first plan) outside
   ``[lower, upper]``: with ``outside_limits='approach'`` the rows bring it into the limits at
   most ``max_step_delta`` per step; with ``outside_limits='hold'`` the chunk is refused (the
   robot holds where it is).
3. Positions outside ``[lower, upper]`` are clamped onto the limit (counted).
4. The change between consecutive rows (the first row against ``previous``) must stay within
   ``max_step_delta`` per joint. ``delta_mode='clamp'`` rate-limits the rows so that no step
   exceeds it (the robot follows the chunk more slowly); ``delta_mode='refuse'`` refuses the
   whole chunk at the first excess (the robot holds).

No row is ever more than ``max_step_delta`` from the one before it, ``previous`` included: a
start outside the limits is never clamped onto them in one step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DELTA_MODES = ('clamp', 'refuse')
#: What a start outside the limits does: move into them rate-limited, or refuse and hold.
OUTSIDE_LIMITS_MODES = ('approach', 'hold')


@dataclass(frozen=True)
class SafetyLimits:
    """Joint position limits and per-step delta limits, one value per action column."""

    lower: np.ndarray
    upper: np.ndarray
    max_step_delta: np.ndarray
    delta_mode: str = 'clamp'
    outside_limits: str = 'approach'

    def __post_init__(self) -> None:
        lower, upper, delta = (np.asarray(v, dtype=np.float64) for v in self._arrays())
        if not lower.shape == upper.shape == delta.shape or lower.ndim != 1:
            raise ValueError(
                f'lower, upper and max_step_delta need one value per joint, got shapes '
                f'{lower.shape}, {upper.shape}, {delta.shape}'
            )
        if np.any(lower > upper):
            raise ValueError(f'lower limits exceed upper limits: {lower} > {upper}')
        if np.any(delta <= 0) or not np.all(np.isfinite(delta)):
            raise ValueError(f'max_step_delta must be finite and > 0, got {delta}')
        if self.delta_mode not in DELTA_MODES:
            raise ValueError(f'delta_mode must be one of {DELTA_MODES}, got {self.delta_mode!r}')
        if self.outside_limits not in OUTSIDE_LIMITS_MODES:
            raise ValueError(
                f'outside_limits must be one of {OUTSIDE_LIMITS_MODES}, got {self.outside_limits!r}'
            )
        object.__setattr__(self, 'lower', lower)
        object.__setattr__(self, 'upper', upper)
        object.__setattr__(self, 'max_step_delta', delta)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.lower, self.upper, self.max_step_delta


@dataclass(frozen=True)
class SafetyVerdict:
    """Outcome of :func:`apply_limits`.

    Attributes:
        rows: the safe rows, or ``None`` when the chunk is refused.
        limit_clamps: number of values moved onto a position limit.
        delta_clamps: number of values rate-limited (``clamp`` mode).
        reason: why the chunk was refused; empty when it was not.
        outside_joints: columns whose ``previous`` value lay outside the limits.

    """

    rows: np.ndarray | None
    limit_clamps: int = 0
    delta_clamps: int = 0
    reason: str = ''
    outside_joints: tuple[int, ...] = ()

    @property
    def refused(self) -> bool:
        """True when nothing of the chunk may be commanded."""
        return self.rows is None


def apply_limits(rows: np.ndarray, previous: np.ndarray, limits: SafetyLimits) -> SafetyVerdict:
    """Return the rows made safe to command after ``previous``, or a refusal with its reason."""
    rows = np.asarray(rows, dtype=np.float64)
    previous = np.asarray(previous, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != limits.lower.shape[0]:
        return SafetyVerdict(
            None, reason=f'expected (H, {limits.lower.shape[0]}) rows, got {rows.shape}'
        )
    if previous.shape != limits.lower.shape or not np.all(np.isfinite(previous)):
        return SafetyVerdict(None, reason=f'no valid previous command: {previous}')
    if not np.all(np.isfinite(rows)):
        step, joint = np.argwhere(~np.isfinite(rows))[0]
        return SafetyVerdict(None, reason=f'non-finite action at step {step}, joint {joint}')
    outside = tuple(
        int(j) for j in np.flatnonzero((previous < limits.lower) | (previous > limits.upper))
    )
    if outside and limits.outside_limits == 'hold':
        joint = outside[0]
        return SafetyVerdict(
            None,
            reason=f'joint {joint} starts at {previous[joint]:+.4f}, outside '
            f'[{limits.lower[joint]:+.4f}, {limits.upper[joint]:+.4f}] (outside_limits: hold)',
            outside_joints=outside,
        )
    clamped = np.clip(rows, limits.lower, limits.upper)
    limit_clamps = int(np.count_nonzero(clamped != rows))
    safe = np.empty_like(clamped)
    delta_clamps = 0
    last = previous
    for step, target in enumerate(clamped):
        delta = target - last
        excess = np.abs(delta) > limits.max_step_delta + 1e-12
        if np.any(excess):
            if limits.delta_mode == 'refuse':
                joint = int(np.argmax(excess))
                return SafetyVerdict(
                    None,
                    limit_clamps,
                    reason=f'step {step} moves joint {joint} by {delta[joint]:+.4f} '
                    f'(max_step_delta {limits.max_step_delta[joint]:.4f})',
                    outside_joints=outside,
                )
            delta_clamps += int(np.count_nonzero(excess))
            delta = np.clip(delta, -limits.max_step_delta, limits.max_step_delta)
        last = last + delta
        safe[step] = last
    return SafetyVerdict(safe, limit_clamps, delta_clamps, outside_joints=outside)
