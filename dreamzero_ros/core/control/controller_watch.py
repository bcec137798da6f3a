# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""While commanding: every group's controller still there, its state still arriving and sane.

:class:`ControllerWatch` gets, every control step, what the ROS layer found of each group's
controller (:mod:`~dreamzero_ros.core.robot.controller_identity`) and the arrival of each measured
joint and odometry message. It reports a :class:`Fault` naming the group when

- a controller seen since commanding started is gone (its node left the graph, or only a
  recorder is left on the topic),
- no joint state of a group's joints (or odometry of a base) arrived for
  ``controller_watch.state_timeout`` seconds (counted from the start of commanding at the
  earliest) after they had arrived once,
- a base's odometry was refused (:func:`odometry_problem`: NaN, inf, or a speed far outside
  its limits).

The node then holds every group and disables commands: commanding resumes only through
``~/enable``, which checks the controllers again (:meth:`ControllerWatch.state_problems`: a
group whose state stopped is refused there too; a process killed without leaving the graph,
SIGKILL or a power cut, stays in it until DDS's lease expires, 20 s in Fast DDS, but its joint
states stop at once). A fault latches until :meth:`ControllerWatch.restart`. Nothing here
imports ROS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
import math

from dreamzero_ros.core.robot.controller_identity import ControllerClaim, Finding
from dreamzero_ros.parameter_schema import parameter

__all__ = ['ControllerWatch', 'ControllerWatchSettings', 'Fault', 'odometry_problem']


@dataclass(frozen=True)
class ControllerWatchSettings:
    """The controller watch (``controller_watch.*``)."""

    state_timeout: float = parameter(
        1.0,
        'While commanding, a group whose joint states (or a base whose odometry) stopped '
        'arriving for this long, s, is a fault: every group holds, the base stops, commands '
        'are disabled until ~/enable.',
        range=(0.01, 3600.0),
    )


@dataclass(frozen=True)
class Fault:
    """Why commanding stopped: the group and what happened to it."""

    group: str
    reason: str

    def __str__(self) -> str:
        return f'{self.group}: {self.reason}'


def odometry_problem(
    axes: Sequence[str], values: Sequence[float], lower: Sequence[float], upper: Sequence[float]
) -> str:
    """Why measured base velocities cannot be used ('' when they can).

    ``values`` of ``axes`` (``linear.x`` ...) are refused when not finite, or outside the
    group's velocity limits ``[lower, upper]`` widened by their span on each side (a base
    pushed somewhat past its limits is measured as such; one reported at three times its
    range is a broken sensor or driver).
    """
    for axis, value, low, high in zip(axes, values, lower, upper, strict=True):
        if not math.isfinite(value):
            return f'{axis} is {value}'
        span = high - low
        if not low - span <= value <= high + span:
            return f'{axis} is {value:.6g}, beyond [{low - span:.6g}, {high + span:.6g}]'
    return ''


class ControllerWatch:
    """Presence of each group's controller and the arrival of its state, while commanding.

    ``claims``: the groups with a controller; ``state_names``: group -> the names of its
    joints in joint_states (empty for a group watched through :meth:`note_state`, a base).
    """

    def __init__(
        self,
        claims: Iterable[ControllerClaim],
        state_names: Mapping[str, Sequence[str]],
        state_timeout: float,
    ) -> None:
        self.claims = tuple(claims)
        self.state_timeout = state_timeout
        self._groups_of: dict[str, list[str]] = {}
        self._names = {group: tuple(names) for group, names in state_names.items()}
        for group, names in self._names.items():
            for name in names:
                self._groups_of.setdefault(name, []).append(group)
        #: The latched fault, or None.
        self.fault: Fault | None = None
        #: Messages of measured state refused (odometry), and the last reason.
        self.states_refused = 0
        self.last_state_refusal = ''
        self._seen: set[str] = set()
        self._restarted_at = -math.inf
        self._joint_arrived: dict[tuple[str, str], float] = {}  # (group, joint) -> time
        self._state_arrived: dict[str, float] = {}  # group -> time (odometry)
        self._bad: dict[str, str] = {}

    def restart(self, now: float) -> None:
        """Commanding starts at ``now`` (enable, activate): forget the fault and who was seen.

        A group's state that arrived before has ``state_timeout`` from ``now`` to arrive again.
        """
        self.fault = None
        self._seen.clear()
        self._restarted_at = now

    def note_joint_state(self, names: Iterable[str], now: float) -> None:
        """A joint state naming ``names`` arrived at ``now`` (monotonic seconds)."""
        for name in names:
            for group in self._groups_of.get(name, ()):
                self._joint_arrived[group, name] = now

    def note_state(self, group: str, now: float, problem: str = '') -> None:
        """A state message of ``group`` (odometry) arrived; ``problem``: why it was refused."""
        if problem:
            self.states_refused += 1
            self.last_state_refusal = f'{group}: {problem}'
            self._bad[group] = problem
            return
        self._bad.pop(group, None)
        self._state_arrived[group] = now

    def state_problems(self, now: float | None = None) -> list[str]:
        """Groups whose newest state message was refused, with the reason (for enable).

        With ``now``, also the groups whose state arrived once but not for ``state_timeout``.
        """
        problems = [f'{group}: {problem}' for group, problem in self._bad.items()]
        if now is not None:
            for group in self._watched():
                stopped = self._stopped(group, now, -math.inf)
                if stopped:
                    problems.append(f'{group}: {stopped}')
        return problems

    def check(self, now: float, findings: Mapping[str, Finding]) -> Fault | None:
        """A new fault at ``now`` given this step's ``findings`` (group -> Finding), or None."""
        if self.fault is not None:
            return None
        for claim in self.claims:
            finding = findings.get(claim.group)
            if finding is None:
                continue
            if finding.found:
                self._seen.add(claim.group)
            elif claim.group in self._seen:
                return self._latch(claim.group, f'controller gone ({finding.problem})')
        for group, problem in self._bad.items():
            return self._latch(group, f'state refused: {problem}')
        for group in self._watched():
            stopped = self._stopped(group, now, self._restarted_at)
            if stopped:
                return self._latch(group, stopped)
        return None

    def _watched(self) -> tuple[str, ...]:
        return (*self._names, *(g for g in self._state_arrived if g not in self._names))

    def _stopped(self, group: str, now: float, since: float) -> str:
        """Why ``group``'s state counts as stopped at ``now`` ('' it does not)."""
        last = self._last_arrival(group)
        if last is None or now - max(last, since) <= self.state_timeout:
            return ''
        what = 'joint states' if self._names.get(group) else 'odometry'
        return (
            f'no {what} for {now - last:.2f} s (controller_watch.state_timeout '
            f'{self.state_timeout:g} s)'
        )

    def _last_arrival(self, group: str) -> float | None:
        """When the group's state last arrived: its stalest joint's arrival; None before."""
        names = self._names.get(group)
        if not names:
            return self._state_arrived.get(group)
        times = [self._joint_arrived.get((group, name)) for name in names]
        return None if any(t is None for t in times) else min(times)

    def _latch(self, group: str, reason: str) -> Fault:
        self.fault = Fault(group, reason)
        return self.fault
