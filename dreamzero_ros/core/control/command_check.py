# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The 1 kHz command a robot's real-time interface receives, checked as a Franka checks it.

A Franka takes joint positions every millisecond and aborts the motion when their finite
differences break a limit ("necessary conditions" of the Franka control interface): the position
(``joint_motion_generator_position_limits_violation``), the velocity
(``joint_motion_generator_velocity_limits_violation``), the acceleration
(``joint_motion_generator_velocity_discontinuity``) or the jerk
(``joint_motion_generator_acceleration_discontinuity``). :class:`CommandMonitor` applies these
checks to a stream of commanded positions and keeps the largest values and the acceleration
jumps where one trajectory hands over to the next; :class:`FollowerCheck` feeds it what a
:class:`~dreamzero_ros.core.motion.jtc.TrajectoryFollower` commands every millisecond (the simulated
arm).

:func:`jtc_command` plays a sequence of plans through joint_trajectory_controller as the node
sends them (core/motion/jtc.py; each received some time after its chunk arrived) and returns the 1
kHz command with the acceleration jump at each hand-over: what replay and the benchmarks check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan
from dreamzero_ros.core.motion.jtc import Point, Trajectory, TrajectoryFollower
from dreamzero_ros.core.robot.robot_description import RobotDescription

#: The real-time interface's period, seconds (a Franka's 1 kHz).
PERIOD = 1e-3
#: Each check and the error a Franka raises for it.
FRANKA_ERRORS = {
    'position': 'joint_motion_generator_position_limits_violation',
    'velocity': 'joint_motion_generator_velocity_limits_violation',
    'acceleration': 'joint_motion_generator_velocity_discontinuity',
    'jerk': 'joint_motion_generator_acceleration_discontinuity',
}
#: Relative slack of the checks against floating-point rounding of the differences.
_SLACK = 1e-6


@dataclass(frozen=True)
class CommandLimits:
    """Per-joint limits of the command; None where a quantity is not checked."""

    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    max_velocity: np.ndarray | None = None
    max_acceleration: np.ndarray | None = None
    max_jerk: np.ndarray | None = None

    @classmethod
    def of_loop(cls, loop: LoopConfig) -> CommandLimits:
        """The limits the control loop plans its arm columns within."""
        arm = loop.motion.arm_joints
        motion = loop.motion
        return cls(
            loop.limits.lower[:arm],
            loop.limits.upper[:arm],
            motion.max_velocity,
            motion.max_acceleration,
            motion.max_jerk,
        )

    @classmethod
    def of_description(
        cls,
        description: RobotDescription,
        joints: Sequence[str],
        max_acceleration: Sequence[float],
        max_jerk: Sequence[float],
    ) -> CommandLimits:
        """A robot description's position and speed limits of ``joints``, with these others."""
        limits = description.limits_of(list(joints))
        columns = [
            np.array([getattr(joint, name) for joint in limits], dtype=np.float64)
            for name in ('lower', 'upper', 'max_velocity')
        ]
        others = [np.asarray(v, dtype=np.float64) for v in (max_acceleration, max_jerk)]
        for name, values in zip(('max_acceleration', 'max_jerk'), others, strict=True):
            if values.shape != (len(limits),):
                raise ValueError(f'{name} needs {len(limits)} values, got {values.size}')
        return cls(*columns, *others)


def differences(
    positions: np.ndarray, period: float = PERIOD
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Velocity, acceleration and jerk of consecutive samples by backward differences.

    ``positions`` ``(M, N)`` gives ``(M - 1, N)``, ``(M - 2, N)`` and ``(M - 3, N)``.
    """
    velocity = np.diff(positions, axis=0) / period
    acceleration = np.diff(velocity, axis=0) / period
    return velocity, acceleration, np.diff(acceleration, axis=0) / period


@dataclass
class CommandMonitor:
    """Checks a stream of 1 kHz commanded positions as a Franka does.

    Attributes:
        limits: what is checked.
        violations: samples over each limit, by the Franka error's name.
        first: the first violation, one line ('' while none).
        peak: largest ``|velocity|``, ``|acceleration|``, ``|jerk|`` per joint so far.
        jump_max: largest acceleration jump per joint where the command changed trajectory or
            segment (None before any was recorded).

    """

    limits: CommandLimits
    period: float = PERIOD
    violations: dict[str, int] = field(default_factory=dict)
    first: str = ''
    peak: dict[str, np.ndarray] = field(default_factory=dict)
    jump_max: np.ndarray | None = None
    _tail: np.ndarray | None = field(default=None, repr=False)

    def feed(self, positions: np.ndarray) -> None:
        """Check the next commanded samples ``(M, N)``, one ``period`` apart after the last."""
        positions = np.atleast_2d(np.asarray(positions, dtype=np.float64))
        kept = 0 if self._tail is None else len(self._tail)
        stream = positions if self._tail is None else np.vstack([self._tail, positions])
        self._tail = stream[-3:]
        velocity, acceleration, jerk = differences(stream, self.period)
        # a difference is new when its last sample is: those of the kept tail were checked
        limits = self.limits
        figures = {
            'position': (stream[kept:], limits.lower, limits.upper),
            'velocity': (velocity[max(kept - 1, 0) :], None, limits.max_velocity),
            'acceleration': (acceleration[max(kept - 2, 0) :], None, limits.max_acceleration),
            'jerk': (jerk[max(kept - 3, 0) :], None, limits.max_jerk),
        }
        for kind, (values, lower, upper) in figures.items():
            if not len(values):
                continue
            if kind != 'position':
                values = np.abs(values)
                size = values.max(axis=0)
                self.peak[kind] = np.maximum(self.peak.get(kind, size), size)
            self._check(kind, values, lower, upper)

    def _check(
        self, kind: str, values: np.ndarray, lower: np.ndarray | None, upper: np.ndarray | None
    ) -> None:
        over = np.zeros(values.shape, dtype=bool)
        if upper is not None:
            over |= values > upper + _SLACK * np.maximum(1.0, np.abs(upper))
        if lower is not None:
            over |= values < lower - _SLACK * np.maximum(1.0, np.abs(lower))
        if not np.any(over):
            return
        name = FRANKA_ERRORS[kind]
        self.violations[name] = self.violations.get(name, 0) + int(np.any(over, axis=1).sum())
        if not self.first:
            sample, joint = np.argwhere(over)[0]
            bound = upper if values[sample, joint] > 0 or lower is None else lower
            self.first = (
                f'{name}: joint {joint} {kind} {values[sample, joint]:.4g} beyond '
                f'{bound[joint]:.4g}'
            )

    def diagnostics(self) -> list[tuple[str, str]]:
        """(key, value) pairs: largest values per joint beside the limits, and error counts."""

        def joints(values: np.ndarray | None) -> str:
            return '' if values is None else ' '.join(f'{v:.4g}' for v in values)

        limits = self.limits
        values = [
            ('acceleration_jump_max', joints(self.jump_max)),
            ('acceleration_max', joints(self.peak.get('acceleration'))),
            ('acceleration_limit', joints(limits.max_acceleration)),
            ('jerk_max', joints(self.peak.get('jerk'))),
            ('jerk_limit', joints(limits.max_jerk)),
        ]
        counts = [(name, str(self.violations.get(name, 0))) for name in FRANKA_ERRORS.values()]
        return values + counts

    def record_jump(self, jump: np.ndarray) -> None:
        """Record an acceleration jump ``(N,)`` (a hand-over, a segment's end)."""
        jump = np.abs(np.asarray(jump, dtype=np.float64))
        self.jump_max = jump if self.jump_max is None else np.maximum(self.jump_max, jump)


def acceleration_jump(follower: TrajectoryFollower, time: float) -> np.ndarray:
    """The step of ``follower``'s commanded acceleration across ``time`` (a knot), per joint."""
    # at a knot the segment after it is sampled; just before it, the one it ends
    before, after = follower.sample(np.array([np.nextafter(time, -np.inf), time]))[2]
    return after - before


class FollowerCheck:
    """A Franka's checks of what a :class:`TrajectoryFollower` commands, every ``period``.

    :meth:`advance` samples the follower on the grid ``k * period`` (seconds of the follower's
    clock; keep them small, e.g. since a start, so that the samples are exact) up to a time and
    feeds :attr:`monitor`; it also records the acceleration jump at every knot passed.
    :meth:`accept` hands the follower a new trajectory, recording the jump at the receipt.
    """

    def __init__(
        self,
        follower: TrajectoryFollower,
        limits: CommandLimits,
        now: float,
        period: float = PERIOD,
    ) -> None:
        self.follower = follower
        self.monitor = CommandMonitor(limits, period)
        self._next = int(np.ceil(now / period))
        self._knots: list[float] = []

    def advance(self, now: float) -> None:
        """Check the command on the grid up to ``now`` (and the knots passed)."""
        period = self.monitor.period
        last = int(np.floor(now / period + 1e-9))
        if last >= self._next:
            grid = period * np.arange(self._next, last + 1)
            self.monitor.feed(self.follower.sample(grid)[0])
            self._next = last + 1
        while self._knots and self._knots[0] <= now:
            self.monitor.record_jump(acceleration_jump(self.follower, self._knots.pop(0)))

    def accept(self, trajectory: Trajectory, now: float) -> None:
        """The follower takes ``trajectory`` (validated) at ``now``: check up to then, switch."""
        self.advance(now)
        self.follower.update(now)
        before = self.follower.acceleration.copy()
        self.follower.accept(trajectory, now)
        self.follower.update(now)
        self.monitor.record_jump(self.follower.acceleration - before)
        self._knots = [t for t in self.follower.knot_times if t > now]


def plan_trajectory(plan: ActionPlan, joints: Sequence[str]) -> Trajectory:
    """``plan``'s first ``len(joints)`` columns as the trajectory the node sends (absolute times).

    The stamp is the plan's start: every point carries positions, velocities and (where the
    plan has them) accelerations.
    """
    arm = len(joints)
    velocities = plan.velocities if plan.velocities is not None else np.zeros_like(plan.rows)
    points = tuple(
        Point(
            float(t - plan.start_time),
            tuple(plan.rows[i, :arm]),
            tuple(velocities[i, :arm]),
            () if plan.accelerations is None else tuple(plan.accelerations[i, :arm]),
        )
        for i, t in enumerate(plan.times)
    )
    return Trajectory(plan.start_time, tuple(joints), points)


@dataclass(frozen=True)
class JtcCommand:
    """The 1 kHz command of a sequence of plans (:func:`jtc_command`).

    Attributes:
        times: sample times, ``period`` apart.
        positions: commanded positions ``(len(times), N)``.
        jumps: acceleration jump at each hand-over after the first plan, ``(hand-overs, N)``:
            the larger of the jumps at the receipt and at the plan's hand-over point.

    """

    times: np.ndarray
    positions: np.ndarray
    jumps: np.ndarray


def jtc_command(
    timed: Sequence[tuple[float, ActionPlan]],
    arm: int,
    delay: float = 0.0,
    period: float = PERIOD,
    interpolate_from_desired_state: bool = False,
) -> JtcCommand:
    """What joint_trajectory_controller commands for plans arriving at the given times.

    ``timed`` is ``(arrival, plan)`` in order; each plan reaches the controller ``delay`` after
    its arrival and replaces the one in force then. Samples run ``period`` apart from the first
    receipt to the end of the last plan.
    """
    joints = tuple(f'joint{i}' for i in range(arm))
    if not timed:
        return JtcCommand(np.zeros(0), np.zeros((0, arm)), np.zeros((0, arm)))
    follower = TrajectoryFollower(
        joints, timed[0][1].position_at(timed[0][0] + delay)[:arm], interpolate_from_desired_state
    )
    receipts = [arrival + delay for arrival, _ in timed]
    end = max(timed[-1][1].end_time, receipts[-1]) + 10 * period
    grid = receipts[0] + period * np.arange(int(np.ceil((end - receipts[0]) / period)) + 1)
    positions = np.zeros((len(grid), arm))
    jumps = []
    for index, ((_, plan), received) in enumerate(zip(timed, receipts, strict=True)):
        follower.update(received)
        before = follower.acceleration.copy()
        follower.accept(plan_trajectory(plan, joints), received)
        follower.update(received)
        if index:
            at = plan.handover_time
            handover = acceleration_jump(follower, at) if at > received else np.zeros(arm)
            receipt = follower.acceleration - before
            jumps.append(np.where(np.abs(receipt) > np.abs(handover), receipt, handover))
        until = receipts[index + 1] if index + 1 < len(receipts) else np.inf
        span = (grid >= received) & (grid < until)
        positions[span] = follower.sample(grid[span])[0]
    return JtcCommand(grid, positions, np.abs(np.array(jumps)).reshape(-1, arm))
