# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ros2_controllers' joint_trajectory_controller, without ROS: what it accepts and what it draws.

:func:`validate` applies the checks of ``JointTrajectoryController::validate_trajectory_msg``
and returns the controller's reason for a rejection. :class:`TrajectoryFollower` executes
accepted trajectories as JTC does: a new trajectory replaces the old one at once; until its first
point the state at receipt is interpolated towards that point; between points the spline degree
follows the fields present (linear, cubic with velocities, quintic with accelerations); after
the last point it holds. Joints a partial goal leaves out hold where they are.
:meth:`TrajectoryFollower.sample` gives the commanded state at any times (the 1 kHz command of
a robot's real-time interface). The simulated arm (``dreamzero-sim-arm``) is this module behind
a ROS interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dreamzero_ros.core.motion.trajectory import sample_knots


@dataclass(frozen=True)
class Point:
    """One ``trajectory_msgs/JointTrajectoryPoint``; empty tuples for absent fields."""

    time_from_start: float
    positions: tuple[float, ...]
    velocities: tuple[float, ...] = ()
    accelerations: tuple[float, ...] = ()
    effort: tuple[float, ...] = ()


@dataclass(frozen=True)
class Trajectory:
    """One ``trajectory_msgs/JointTrajectory``: ``stamp`` 0 means "start on receipt"."""

    stamp: float
    joint_names: tuple[str, ...]
    points: tuple[Point, ...]


@dataclass(frozen=True)
class ControllerRules:
    """The controller parameters that decide what it accepts (JTC's names and defaults)."""

    joints: tuple[str, ...]
    allow_partial_joints_goal: bool = False
    allow_nonzero_velocity_at_trajectory_end: bool = False
    allow_integration_in_goal_trajectories: bool = False
    has_effort_command_interface: bool = False


def validate(trajectory: Trajectory, rules: ControllerRules, now: float) -> str:
    """JTC's reason to reject ``trajectory`` at time ``now``; empty when it is accepted."""
    names = trajectory.joint_names
    if not rules.allow_partial_joints_goal and len(names) != len(rules.joints):
        return "Joints on incoming trajectory don't match the controller joints."
    if not names:
        return 'Empty joint names on incoming trajectory.'
    points = trajectory.points
    if not points:
        return 'Empty trajectory received.'
    for name in names:
        if name not in rules.joints:
            return f"Incoming joint {name} doesn't match the controller's joints."
    if not rules.allow_nonzero_velocity_at_trajectory_end:
        for name, velocity in zip(names, points[-1].velocities, strict=False):
            if abs(velocity) > np.finfo(np.float32).eps:
                return f'Velocity of last trajectory point of joint {name} is not zero: {velocity}'
    if trajectory.stamp != 0.0 and trajectory.stamp + points[-1].time_from_start < now:
        return (
            f'Received trajectory with non-zero start time ({trajectory.stamp:.6f}) that ends in '
            f'the past ({trajectory.stamp + points[-1].time_from_start:.6f})'
        )
    previous = 0.0
    for index, point in enumerate(points):
        if index > 0 and point.time_from_start <= previous:
            return (
                f'Time between points {index - 1} and {index} is not strictly increasing, it is '
                f'{previous:.6f} and {point.time_from_start:.6f} respectively'
            )
        previous = point.time_from_start
        fields = (
            ('positions', point.positions),
            ('velocities', point.velocities),
            ('accelerations', point.accelerations),
        )
        if rules.allow_integration_in_goal_trajectories:
            if not any(values for _, values in fields):
                return 'The given trajectory has no position, velocity, or acceleration points.'
            required = ()
        else:
            required = ('positions',)
        for label, values in fields:
            if (values or label in required) and len(values) != len(names):
                return (
                    f'Mismatch between joint_names size ({len(names)}) and {label} '
                    f'({len(values)}) at point #{index}.'
                )
        if point.effort and not rules.has_effort_command_interface:
            return (
                'Trajectories with effort fields are only supported for controllers using the '
                "'effort' command interface."
            )
    return ''


@dataclass
class _Active:
    """The trajectory in force as a knot sequence (absolute times), the receipt's state first."""

    received: float
    end: float
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    accelerations: np.ndarray | None


@dataclass
class TrajectoryFollower:
    """Executes accepted trajectories over the controller's joints, perfectly tracked.

    The commanded state is the robot's state (a simulated arm tracks perfectly). Before a
    trajectory's first point JTC interpolates from its state at the receipt: with
    ``interpolate_from_desired_state`` (JTC's parameter) the commanded position, velocity and
    acceleration; without (JTC's default) the measured ones from the state interfaces, which
    on a Franka (position, velocity, effort) carry no acceleration: JTC then starts that
    segment at zero acceleration.
    """

    joints: tuple[str, ...]
    position: np.ndarray
    interpolate_from_desired_state: bool = False
    velocity: np.ndarray = field(init=False)
    acceleration: np.ndarray = field(init=False)
    _active: _Active | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.position = np.asarray(self.position, dtype=np.float64).copy()
        if self.position.shape != (len(self.joints),):
            raise ValueError(f'need {len(self.joints)} initial positions, got {self.position}')
        self.velocity = np.zeros_like(self.position)
        self.acceleration = np.zeros_like(self.position)

    def accept(self, trajectory: Trajectory, now: float) -> None:
        """Replace the trajectory in force by ``trajectory`` (already validated) at ``now``.

        The state at ``now`` is that of the trajectory in force (call :meth:`update` first).
        """
        columns = [self.joints.index(name) for name in trajectory.joint_names]

        def full(values: Sequence[float], fill: np.ndarray) -> np.ndarray:
            row = fill.copy()
            row[columns] = values
            return row

        points = trajectory.points
        has_velocities = all(p.velocities for p in points)
        has_accelerations = has_velocities and all(p.accelerations for p in points)
        zero = np.zeros_like(self.position)
        start = trajectory.stamp if trajectory.stamp != 0.0 else now
        times = start + np.array([p.time_from_start for p in points])
        positions = np.stack([full(p.positions, self.position) for p in points])
        velocities = (
            np.stack([full(p.velocities, zero) for p in points]) if has_velocities else None
        )
        accelerations = (
            np.stack([full(p.accelerations, zero) for p in points]) if has_accelerations else None
        )
        if now < times[0]:  # a segment from the state at receipt to the first point
            times = np.concatenate([[now], times])
            positions = np.vstack([self.position, positions])
            if velocities is not None:
                velocities = np.vstack([self.velocity, velocities])
            if accelerations is not None:
                before = self.acceleration if self.interpolate_from_desired_state else zero
                accelerations = np.vstack([before, accelerations])
        self._active = _Active(now, float(times[-1]), times, positions, velocities, accelerations)

    @property
    def knot_times(self) -> list[float]:
        """Times of the points of the trajectory in force (the receipt first, when before them)."""
        return [] if self._active is None else self._active.times.tolist()

    @property
    def end_time(self) -> float | None:
        """When the trajectory in force reaches its last point, or None without one."""
        return None if self._active is None else self._active.end

    def sample(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Commanded positions, velocities and accelerations ``(len(times), N)`` at ``times``.

        ``times`` at or after the receipt of the trajectory in force (before it the previous
        trajectory was in force); changes nothing.
        """
        active = self._active
        times = np.atleast_1d(np.asarray(times, dtype=np.float64))
        if active is None:
            held = np.broadcast_to(self.position, (len(times), len(self.position))).copy()
            return held, np.zeros_like(held), np.zeros_like(held)
        return sample_knots(
            active.times, active.positions, active.velocities, active.accelerations, times
        )

    def update(self, now: float) -> None:
        """Advance the commanded (= measured) state to ``now``."""
        if self._active is None:
            self.velocity[:] = 0.0
            self.acceleration[:] = 0.0
            return
        self.position, self.velocity, self.acceleration = (x[0] for x in self.sample([now]))
