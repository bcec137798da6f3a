# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""How an arm followed the trajectories sent to it, from the trajectories and its joint states.

:class:`ArmTracking` is given each trajectory as it is sent (with the time it was seen) and each
measured joint state. A waypoint of a trajectory with a header stamp (a motion, whose points are
at absolute times) counts as *reached* once the measurements cover its time and the next
trajectory had not replaced it by then; its tracking error is the largest joint difference
between the waypoint and the measured positions, interpolated linearly at that time. Holds (zero
stamp: "start on receipt") have no waypoints of their own but end the motion before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dreamzero_ros.core.motion.jtc import Trajectory


@dataclass(frozen=True)
class TrackingReport:
    """What the arm did so far.

    Attributes:
        samples: joint states measured.
        start: the first measured positions (empty before any).
        latest: the newest measured positions (empty before any).
        travel: per joint, the largest minus the smallest measured position.
        waypoints_reached: waypoints whose time the measurements cover.
        max_error: the largest tracking error at those waypoints (nan before any).

    """

    samples: int
    start: np.ndarray
    latest: np.ndarray
    travel: np.ndarray
    waypoints_reached: int
    max_error: float

    @property
    def moved(self) -> float:
        """The largest travel of any joint (0 before two measurements)."""
        return float(self.travel.max()) if self.travel.size else 0.0


class ArmTracking:
    """Collects commanded trajectories and measured joint states of ``joints``."""

    def __init__(self, joints: Sequence[str]) -> None:
        self.joints = tuple(joints)
        self._sent: list[tuple[float, Trajectory]] = []
        self._stamps: list[float] = []
        self._positions: list[np.ndarray] = []

    def commanded(self, trajectory: Trajectory, seen: float) -> None:
        """A trajectory sent to the arm, seen at ``seen`` (its arrival, near the arm's)."""
        self._sent.append((seen, trajectory))

    def measured(self, stamp: float, names: Sequence[str], positions: Sequence[float]) -> bool:
        """A joint state; False (ignored) unless it names every joint, or it is not newer."""
        index = {name: i for i, name in enumerate(names)}
        if any(joint not in index for joint in self.joints) or len(positions) != len(names):
            return False
        if self._stamps and stamp <= self._stamps[-1]:
            return False
        self._stamps.append(stamp)
        self._positions.append(np.array([positions[index[joint]] for joint in self.joints]))
        return True

    def report(self) -> TrackingReport:
        """The measurements and waypoint errors so far."""
        if not self._positions:
            empty = np.zeros(0)
            return TrackingReport(0, empty, empty, empty, 0, float('nan'))
        stamps = np.array(self._stamps)
        positions = np.stack(self._positions)
        errors = [
            float(np.abs(self._measured_at(stamps, positions, time) - waypoint).max())
            for time, waypoint in self._waypoints(stamps[0], stamps[-1])
        ]
        return TrackingReport(
            samples=len(stamps),
            start=positions[0],
            latest=positions[-1],
            travel=np.ptp(positions, axis=0),
            waypoints_reached=len(errors),
            max_error=max(errors) if errors else float('nan'),
        )

    def _waypoints(self, first: float, last: float) -> list[tuple[float, np.ndarray]]:
        """(time, positions of self.joints) of the motion points within [first, last]."""
        found = []
        ends = [seen for seen, _ in self._sent[1:]] + [np.inf]
        for (_, trajectory), replaced in zip(self._sent, ends, strict=False):
            if trajectory.stamp == 0.0 or any(j not in trajectory.joint_names for j in self.joints):
                continue
            columns = [trajectory.joint_names.index(joint) for joint in self.joints]
            for point in trajectory.points:
                time = trajectory.stamp + point.time_from_start
                if time >= replaced or time > last:
                    break
                if time >= first:
                    found.append((time, np.array(point.positions)[columns]))
        return found

    @staticmethod
    def _measured_at(stamps: np.ndarray, positions: np.ndarray, time: float) -> np.ndarray:
        return np.array(
            [np.interp(time, stamps, positions[:, j]) for j in range(positions.shape[1])]
        )
