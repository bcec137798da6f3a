# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the robot did: a joint trajectory from recorded joint states or commands, interpolated."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dreamzero_ros.core.observations.messages import NS_PER_S, stamp_to_ns, trajectory_samples
from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.topics import COMMAND_TYPES, JOINT_STATE_TYPE


@dataclass(frozen=True)
class Trajectory:
    """Joint positions over time, one column per joint (NaN where a joint was not recorded).

    Attributes:
        times: ascending seconds, ``(N,)``.
        positions: ``(N, D)``.
        names: the ``D`` joint names.

    """

    times: np.ndarray
    positions: np.ndarray
    names: tuple[str, ...]

    def at(self, times: np.ndarray) -> np.ndarray:
        """Linearly interpolated positions ``(len(times), D)``; NaN outside the recorded span."""
        times = np.asarray(times, dtype=np.float64)
        result = np.full((times.size, len(self.names)), np.nan)
        for column in range(len(self.names)):
            known = np.isfinite(self.positions[:, column])
            if known.sum() < 1:
                continue
            t, values = self.times[known], self.positions[known, column]
            inside = (times >= t[0]) & (times <= t[-1])
            result[inside, column] = np.interp(times[inside], t, values)
        return result


def _columns(message_names: list[str], names: tuple[str, ...]) -> list[tuple[int, int]]:
    index = {name: column for column, name in enumerate(names)}
    return [(i, index[name]) for i, name in enumerate(message_names) if name in index]


def read_trajectory(
    reader: BagReader,
    topic: str,
    names: tuple[str, ...],
    gripper_range: tuple[float, float] = (0.0, 1.0),
    gripper_ranges: dict[int, tuple[float, float]] | None = None,
) -> Trajectory:
    """Read ``topic`` (JointState or JointTrajectory) into a :class:`Trajectory` of ``names``.

    The last name is the gripper; its values are mapped from ``gripper_range`` onto ``[0, 1]``
    as the observation cache maps the gripper state, so they compare with policy actions.
    ``gripper_ranges`` (column -> range) names the gripper columns instead, each with its own
    range (a robot with several grippers, or none: empty). Names the topic lacks stay NaN.
    JointState samples are placed at ``header.stamp`` (log time where the stamp is zero); a
    JointTrajectory replaces the not yet reached points of the previous one, as a trajectory
    controller does.
    """
    msgtype = reader.require(topic, COMMAND_TYPES, 'reference')
    times: list[int] = []
    rows: list[np.ndarray] = []
    for _, log_ns, message in reader.messages([topic]):
        if msgtype == JOINT_STATE_TYPE:
            sample_times = np.array([stamp_to_ns(message.header.stamp) or log_ns])
            values = np.asarray(message.position, dtype=np.float64)[None, :]
            message_names = list(message.name)
        else:
            sample_times, values = trajectory_samples(message, log_ns)
            message_names = list(message.joint_names)
            if len(sample_times):
                while times and times[-1] >= sample_times[0]:
                    times.pop()
                    rows.pop()
        if values.shape[1] != len(message_names):
            raise BagError(
                f'{topic}: message at {log_ns / NS_PER_S:.3f} s has {len(message_names)} names '
                f'but {values.shape[1]} positions'
            )
        for sample_time, value in zip(sample_times, values, strict=True):
            row = np.full(len(names), np.nan)
            for source, column in _columns(message_names, names):
                row[column] = value[source]
            times.append(int(sample_time))
            rows.append(row)
    if not times:
        raise BagError(f'reference topic {topic!r} holds no joint positions')
    order = np.argsort(np.array(times), kind='stable')
    positions = np.array(rows)[order]
    if gripper_ranges is None:
        gripper_ranges = {len(names) - 1: gripper_range}
    for column, (low, high) in gripper_ranges.items():
        positions[:, column] = np.clip((positions[:, column] - low) / (high - low), 0.0, 1.0)
    return Trajectory(np.array(times)[order] / NS_PER_S, positions, tuple(names))
