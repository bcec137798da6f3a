# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Cartesian safety envelope: where the robot's links may go, checked along the spline.

:class:`EnvelopeConfig` describes the envelope in one frame of the robot description: a
workspace box, a table plane below which nothing may go, and keep-out boxes. :class:`Envelope`
checks points on links (:class:`~dreamzero_ros.core.robot.kinematics.LinkPoints`: by default the
Panda's flange and both fingertips) against it along the curve the controller follows, not only
at the plan's knots.

Between two samples ``dt`` apart, no point moves further than ``speed * dt``, with ``speed``
bounded (:attr:`LinkPoints.reach`) from the exact peak joint speeds of the knot segment they lie
in. Each segment's samples are spaced so that half that distance is at most ``resolution``, and
each sample must lie at least that far inside every bound: then the whole curve lies inside.

:meth:`Envelope.cut` keeps a plan that stays inside, or cuts it at the latest sample before its
first offending point from which a braking hold (core/motion/chunk_scheduler.py) stays inside too:
the robot follows the plan up to there and brakes to a stop, never jumps.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import math

import numpy as np

from dreamzero_ros.core.motion.braking import braking_from, nominal_stops
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan
from dreamzero_ros.core.motion.spline_segments import speed_bounds
from dreamzero_ros.core.motion.trajectory import MotionConfig
from dreamzero_ros.core.robot.kinematics import LinkPoints

#: Longest time between two samples, seconds, however slow the motion.
MAX_SAMPLE_PERIOD = 0.1
#: The coarse pass samples this many times more sparsely than the fine one.
COARSE = 8
#: Franka hand: the fingertips lie 0.045 m beyond the finger links' origins (hand_tcp - finger).
PANDA_FINGERTIP = 0.045


@dataclass(frozen=True)
class EnvelopeConfig:
    """Where the configured link points may go, in ``frame``.

    Attributes:
        links: the links whose points are checked.
        offsets: ``(len(links), 3)`` offset of each point in its link, metres.
        frame: link of the robot description the bounds are given in ('' : its root).
        workspace_min: lower corner ``(x, y, z)`` of the workspace box, metres.
        workspace_max: upper corner of the workspace box, metres.
        table_height: height (z) of the table plane; every point stays above it.
        keep_out: boxes ``(min xyz, max xyz)`` no point may enter.
        resolution: largest distance, metres, a point may move between two checked samples
            unseen; each sample must lie this far inside every bound.

    """

    links: tuple[str, ...] = ('panda_link8', 'panda_leftfinger', 'panda_rightfinger')
    offsets: np.ndarray = (
        (0.0, 0.0, 0.0),
        (0.0, 0.0, PANDA_FINGERTIP),
        (0.0, 0.0, PANDA_FINGERTIP),
    )
    frame: str = 'panda_link0'
    workspace_min: np.ndarray = (-1.0, -1.0, -0.5)
    workspace_max: np.ndarray = (1.0, 1.0, 1.5)
    table_height: float = 0.0
    keep_out: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    resolution: float = 0.01

    def __post_init__(self) -> None:
        if not self.links or len(set(self.links)) != len(self.links) or not all(self.links):
            raise ValueError(f'envelope links must be distinct and non-empty, got {self.links}')
        offsets = np.asarray(self.offsets, dtype=np.float64)
        if offsets.size != 3 * len(self.links) or not np.all(np.isfinite(offsets)):
            raise ValueError(
                f'envelope offsets need 3 finite values per link ({3 * len(self.links)}), got '
                f'{offsets.size}'
            )
        low, high = (
            np.asarray(v, dtype=np.float64) for v in (self.workspace_min, self.workspace_max)
        )
        if low.shape != (3,) or high.shape != (3,) or not np.all(np.isfinite([low, high])):
            raise ValueError(f'workspace_min/max need 3 finite values each: {low}, {high}')
        if not self.resolution > 0 or not math.isfinite(self.resolution):
            raise ValueError(f'envelope resolution must be > 0, got {self.resolution}')
        if np.any(high - low <= 2 * self.resolution):
            raise ValueError(
                f'workspace_min {low.tolist()} must lie below workspace_max {high.tolist()} by '
                f'more than twice the resolution ({self.resolution} m) on every axis'
            )
        if not math.isfinite(self.table_height):
            raise ValueError(f'table_height must be finite, got {self.table_height}')
        if self.table_height + self.resolution >= high[2] - self.resolution:
            raise ValueError(
                f'table_height {self.table_height} leaves no room below workspace_max z {high[2]}'
            )
        boxes = []
        for index, (box_low, box_high) in enumerate(self.keep_out):
            box_low, box_high = (np.asarray(v, dtype=np.float64) for v in (box_low, box_high))
            if box_low.shape != (3,) or box_high.shape != (3,) or np.any(box_low >= box_high):
                raise ValueError(
                    f'keep_out box {index} needs min < max on every axis, got '
                    f'{box_low.tolist()} .. {box_high.tolist()}'
                )
            boxes.append((box_low, box_high))
        object.__setattr__(self, 'offsets', offsets.reshape(len(self.links), 3))
        object.__setattr__(self, 'workspace_min', low)
        object.__setattr__(self, 'workspace_max', high)
        object.__setattr__(self, 'keep_out', tuple(boxes))


@dataclass(frozen=True)
class Violation:
    """The first point of a plan outside the envelope.

    Attributes:
        link: the link whose point left.
        bound: which bound it crossed (``table``, ``workspace x max``, ``keep_out 0``, ...).
        time: when, on the plan's clock, seconds.
        position: where the point was, in the envelope's frame, metres.
        chunk_id: the chunk whose plan it was (-1 where unknown).

    """

    link: str
    bound: str
    time: float
    position: tuple[float, float, float]
    chunk_id: int = -1

    def __str__(self) -> str:
        x, y, z = self.position
        chunk = f'chunk {self.chunk_id}: ' if self.chunk_id >= 0 else ''
        return f'{chunk}{self.link} crosses {self.bound} at ({x:+.3f}, {y:+.3f}, {z:+.3f}) m'


@dataclass(frozen=True)
class EnvelopeCut:
    """What :meth:`Envelope.cut` did to a plan.

    Attributes:
        plan: the plan to command: the original, or its start followed by a braking hold.
        violation: the first offending point of the original plan; None when it stays inside.
        cut_time: where the original plan was left for the braking hold (None: not cut).
        hold_inside: False when even braking from the plan's start leaves the envelope (the
            plan brakes from its start anyway: the least motion there is).
        samples: points checked (per link).

    """

    plan: ActionPlan
    violation: Violation | None = None
    cut_time: float | None = None
    hold_inside: bool = True
    samples: int = 0


class Envelope:
    """Checks plans against an :class:`EnvelopeConfig` with a robot description's kinematics."""

    def __init__(self, points: LinkPoints, config: EnvelopeConfig) -> None:
        self.points = points
        self.config = config

    @classmethod
    def from_description(
        cls, urdf: str, arm_joints: tuple[str, ...], config: EnvelopeConfig
    ) -> Envelope:
        """The envelope of ``config`` for the robot ``urdf`` describes (``ValueError`` if not)."""
        points = LinkPoints(urdf, arm_joints, config.links, config.offsets, config.frame)
        return cls(points, config)

    @property
    def bounds(self) -> tuple[str, ...]:
        """Names of the bounds, in the order of :meth:`slack`'s last axis."""
        config = self.config
        return (
            *(f'workspace {axis} min' for axis in 'xyz'),
            *(f'workspace {axis} max' for axis in 'xyz'),
            f'table z {config.table_height:+.3f}',
            *(f'keep_out {index}' for index in range(len(config.keep_out))),
        )

    def slack(self, positions: np.ndarray) -> np.ndarray:
        """``(..., bounds)``: how far, metres, each point may move before it crosses each bound.

        Negative outside. For a keep-out box: the point's largest distance outside it along an
        axis (no shorter motion can enter it).
        """
        config = self.config
        parts = [
            positions - config.workspace_min,
            config.workspace_max - positions,
            positions[..., 2:3] - config.table_height,
        ]
        parts += [
            np.max(np.maximum(low - positions, positions - high), axis=-1, keepdims=True)
            for low, high in config.keep_out
        ]
        return np.concatenate(parts, axis=-1)

    def positions_at(self, plan: ActionPlan, times: np.ndarray) -> np.ndarray:
        """``(len(times), points, 3)`` positions of the link points along ``plan``."""
        return self.points.positions(plan.positions_at(times)[:, : self.points.arm_dof])

    def _segments(self, plan: ActionPlan, start: float, end: float):
        """Knots in ``[start, end]``, and each segment's speed bound of the points, m/s."""
        arm = self.points.arm_dof
        first = np.searchsorted(plan.times, start, side='left')
        last = np.searchsorted(plan.times, end, side='right')
        knots = plan.times[first:last]
        if len(knots) < 2:
            return knots, np.zeros(0)
        fields = [
            None if values is None else values[first:last, :arm]
            for values in (plan.velocities, plan.accelerations)
        ]
        peak = speed_bounds(knots, plan.rows[first:last, :arm], *fields)
        return knots, np.max(self.points.reach @ peak.T, axis=0)

    def _check(self, plan: ActionPlan, start: float, end: float):
        """The first violation of ``plan`` between its knots at ``start`` and ``end``.

        Returns ``(violation or None, times of the samples that passed, ascending)``. A coarse
        pass (intervals :data:`COARSE` times longer) clears every interval whose points are
        further inside than they can move in it; the others are sampled finely (no point moves
        more than ``2 * resolution`` between samples, each at least ``resolution`` inside).
        """
        resolution = self.config.resolution
        knots, speed = self._segments(plan, start, end)
        if len(knots) < 2:
            times = np.array([start if not len(knots) else knots[0]])
            return self._first(plan, times, resolution)
        spacing = np.diff(knots)
        fine = np.maximum(np.ceil(spacing * speed / (2 * resolution)), 1)
        fine = np.maximum(fine, np.ceil(spacing / MAX_SAMPLE_PERIOD)).astype(int)
        coarse = np.ceil(fine / COARSE).astype(int)
        times = _subdivide(knots, coarse)
        step = np.repeat(spacing / coarse, coarse)
        reach = np.maximum(resolution, 0.5 * step * np.repeat(speed, coarse))
        low = self.slack(self.positions_at(plan, times)).min(axis=(1, 2))
        refine = (low[:-1] < reach) | (low[1:] < reach)
        if not np.any(refine):
            return None, times
        counts = np.repeat(fine, coarse) // np.repeat(coarse, coarse) + 1
        starts, ends = times[:-1][refine], times[1:][refine]
        fine_times = _subdivide_each(starts, ends, counts[refine])
        violation, passed = self._first(plan, fine_times, resolution)
        cleared = times[np.concatenate([[True], ~refine]) | np.concatenate([~refine, [True]])]
        if violation is not None:
            cleared = cleared[cleared < violation.time]
        return violation, np.union1d(cleared, passed)

    def _first(self, plan: ActionPlan, times: np.ndarray, margin: float):
        """The first sample of ``times`` less than ``margin`` inside, and the samples before."""
        positions = self.positions_at(plan, times)
        slack = self.slack(positions)
        bad = np.flatnonzero(slack.min(axis=(1, 2)) < margin)
        if not len(bad):
            return None, times
        sample = int(bad[0])
        point, bound = np.unravel_index(int(np.argmin(slack[sample])), slack.shape[1:])
        where = tuple(float(v) for v in positions[sample, point])
        violation = Violation(
            self.points.links[point], self.bounds[bound], float(times[sample]), where
        )
        return violation, times[:sample]

    def cut(
        self,
        plan: ActionPlan,
        lower: np.ndarray,
        upper: np.ndarray,
        motion: MotionConfig,
        chunk_id: int = -1,
    ) -> EnvelopeCut:
        """``plan`` if it stays inside, else cut before its first offending point with a hold.

        The braking hold starts at the latest sample before the first offending point from
        which braking (core/motion/braking.py: within the limits, into ``[lower, upper]``) stays
        inside: the samples whose stop point lies inside are tried from the latest back, each
        braking path checked in full. Nothing of the plan after that sample is kept.
        """
        violation, passed = self._check(plan, plan.start_time, plan.end_time)
        if violation is None:
            return EnvelopeCut(plan, samples=len(passed))
        violation = dataclasses.replace(violation, chunk_id=chunk_id)
        checked = len(passed)
        arm = self.points.arm_dof
        positions, speeds, accelerations = plan.states_at(passed)
        stops = nominal_stops(
            positions[:, :arm],
            speeds[:, :arm],
            accelerations[:, :arm],
            lower[:arm],
            upper[:arm],
            motion,
        )
        stop_slack = self.slack(self.points.positions(stops)).min(axis=(1, 2))
        checked += len(passed)
        for index in np.flatnonzero(stop_slack >= self.config.resolution)[::-1]:
            cut_at = float(passed[index])
            hold = self._brake(plan, cut_at, lower, upper, motion)
            bad, samples = self._check(hold, cut_at, hold.end_time)
            checked += len(samples) + (bad is not None)
            if bad is None:
                return EnvelopeCut(hold, violation, cut_at, True, checked)
        hold = self._brake(plan, plan.start_time, lower, upper, motion)
        return EnvelopeCut(hold, violation, plan.start_time, False, checked)

    @staticmethod
    def _brake(
        plan: ActionPlan, at: float, lower: np.ndarray, upper: np.ndarray, motion: MotionConfig
    ) -> ActionPlan:
        """``plan``'s knots before ``at``, then a braking hold from ``at``: the same curve there."""
        brake, _ = braking_from(plan, at, lower, upper, motion)
        keep = plan.times < at
        velocities, accelerations = (
            np.zeros_like(plan.rows) if values is None else values
            for values in (plan.velocities, plan.accelerations)
        )
        return ActionPlan(
            np.concatenate([plan.times[keep], brake.times]),
            np.vstack([plan.rows[keep], brake.rows]),
            np.vstack([velocities[keep], brake.velocities]),
            np.vstack([accelerations[keep], brake.accelerations]),
            handover_time=min(plan.handover_time, at),
        )


def _subdivide(knots: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``knots[0]``, then segment ``i`` cut into ``counts[i]`` equal steps, its end included."""
    spacing = np.diff(knots)
    segment = np.repeat(np.arange(len(counts)), counts)
    step = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + 1
    return np.concatenate([knots[:1], knots[segment] + spacing[segment] * step / counts[segment]])


def _subdivide_each(starts: np.ndarray, ends: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each interval ``[starts[i], ends[i]]`` cut into ``counts[i]`` steps, both ends included."""
    interval = np.repeat(np.arange(len(counts)), counts + 1)
    step = np.arange((counts + 1).sum()) - np.repeat(np.cumsum(counts + 1) - counts - 1, counts + 1)
    return starts[interval] + (ends - starts)[interval] * step / counts[interval]
