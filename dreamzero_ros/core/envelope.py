# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Cartesian safety envelope: where the robot's links may go, checked along the spline.

:class:`EnvelopeConfig` describes the envelope in one frame of the robot description: a
workspace box, a table plane below which nothing may go, and keep-out boxes. :class:`Envelope`
checks points on links (:class:`~dreamzero_ros.core.kinematics.LinkPoints`: by default the
Panda's flange and both fingertips) against it along the curve the controller follows, not only
at the plan's knots.

Between two samples ``dt`` apart, no point moves further than ``speed * dt``, with ``speed``
bounded by :meth:`LinkPoints.speed_bound` from the plan's exact peak joint speeds. The samples
are spaced so that half that distance is at most ``resolution``, and each sample must lie at
least that far inside every bound: then the whole curve lies inside.

:meth:`Envelope.cut` keeps a plan that stays inside, or cuts it at the latest sample before its
first offending point from which a braking hold (core/chunk_scheduler.py) stays inside too:
the robot follows the plan up to there and brakes to a stop, never jumps.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from dreamzero_ros.core.chunk_scheduler import ActionPlan, braking_hold
from dreamzero_ros.core.kinematics import LinkPoints
from dreamzero_ros.core.trajectory import MotionConfig, segment_peak_speed

#: Longest time between two samples, seconds, however slow the motion.
MAX_SAMPLE_PERIOD = 0.1
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

    def first_violation(self, positions: np.ndarray, times: np.ndarray, margin: float):
        """The first ``(sample, Violation)`` of ``(N, points, 3)`` positions, or None."""
        config = self.config
        checks = [
            (f'workspace {axis} min', positions[..., a] < config.workspace_min[a] + margin)
            for a, axis in enumerate('xyz')
        ]
        checks += [
            (f'workspace {axis} max', positions[..., a] > config.workspace_max[a] - margin)
            for a, axis in enumerate('xyz')
        ]
        checks.append(
            (
                f'table z {config.table_height:+.3f}',
                positions[..., 2] < config.table_height + margin,
            )
        )
        for index, (low, high) in enumerate(config.keep_out):
            inside = np.all((positions > low - margin) & (positions < high + margin), axis=-1)
            checks.append((f'keep_out {index}', inside))
        first = None
        for bound, bad in checks:
            hits = np.argwhere(bad)
            if len(hits) and (first is None or hits[0][0] < first[0]):
                first = (int(hits[0][0]), int(hits[0][1]), bound)
        if first is None:
            return None
        sample, point, bound = first
        where = tuple(float(v) for v in positions[sample, point])
        return sample, Violation(self.points.links[point], bound, float(times[sample]), where)

    def _samples(self, start: float, end: float, joint_speed: np.ndarray):
        """Sample times over ``[start, end]`` and the margin they need."""
        speed = self.points.speed_bound(joint_speed)
        period = (
            MAX_SAMPLE_PERIOD
            if speed <= 0
            else min(MAX_SAMPLE_PERIOD, 2 * self.config.resolution / speed)
        )
        count = max(2, math.ceil((end - start) / period) + 1)
        times = np.linspace(start, end, count)
        return times, 0.5 * speed * (times[1] - times[0]) if end > start else 0.0

    def _check(self, plan: ActionPlan, start: float, end: float, joint_speed: np.ndarray):
        times, margin = self._samples(start, end, joint_speed)
        arm = self.points.arm_dof
        positions = self.points.positions(plan.positions_at(times)[:, :arm])
        return self.first_violation(positions, times, margin), len(times)

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
        which braking (at ``motion.stop_deceleration``, into ``[lower, upper]``) stays inside;
        nothing of the plan after that sample is kept.
        """
        arm = self.points.arm_dof
        velocities = plan.velocities if plan.velocities is not None else np.zeros_like(plan.rows)
        if len(plan.times) > 1:
            peak = np.max(
                segment_peak_speed(plan.times, plan.rows[:, :arm], velocities[:, :arm]), axis=0
            )
        else:
            peak = np.zeros(arm)
        found, samples = self._check(plan, plan.start_time, plan.end_time, peak)
        if found is None:
            return EnvelopeCut(plan, samples=samples)
        index, violation = found
        violation = Violation(
            violation.link, violation.bound, violation.time, violation.position, chunk_id
        )
        times, _ = self._samples(plan.start_time, plan.end_time, peak)
        for candidate in range(index - 1, -1, -1):
            cut_at = float(times[candidate])
            hold = self._brake(plan, cut_at, lower, upper, motion)
            brake_speed = segment_peak_speed(
                hold.times[-2:], hold.rows[-2:, :arm], hold.velocities[-2:, :arm]
            )[0]
            bad, checked = self._check(hold, cut_at, hold.end_time, brake_speed)
            samples += checked
            if bad is None:
                return EnvelopeCut(hold, violation, cut_at, True, samples)
        hold = self._brake(plan, plan.start_time, lower, upper, motion)
        return EnvelopeCut(hold, violation, plan.start_time, False, samples)

    @staticmethod
    def _brake(
        plan: ActionPlan, at: float, lower: np.ndarray, upper: np.ndarray, motion: MotionConfig
    ) -> ActionPlan:
        """``plan``'s knots before ``at``, then a braking hold from ``at``: the same curve there."""
        brake = braking_hold(plan, at, lower, upper, motion)
        keep = plan.times < at - 1e-9
        velocities = plan.velocities if plan.velocities is not None else np.zeros_like(plan.rows)
        return ActionPlan(
            np.concatenate([plan.times[keep], brake.times]),
            np.vstack([plan.rows[keep], brake.rows]),
            np.vstack([velocities[keep], brake.velocities]),
        )
