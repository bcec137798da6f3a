# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's view of its controllers in the ROS graph, and its measured base velocity.

:func:`find_controllers` reads, for every group with a controller, who subscribes to its
command topic (and which of those publishes its state topic) or who serves its action (the
publishers of ``<action>/_action/status``), and names the controller by
:func:`~dreamzero_ros.core.robot.controller_identity.identify`. :class:`ControllerMonitor` uses it
at enable (refused, naming the groups, while a controller is missing or a base's odometry is bad)
and every control step while commanding (:class:`~dreamzero_ros.core.control.controller_watch.
ControllerWatch`: a controller gone or a group's state stopped is a fault). Odometry is read
through it: a message whose twist is not finite or far outside the base's limits is refused,
counted and reported, never used as the measured velocity. ``dreamzero-preflight`` uses
:func:`find_controllers` too, and :func:`configured_joints` (the joints a controller was
configured with).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import time
from typing import Any

import numpy as np

from dreamzero_ros.core.control.controller_watch import (
    ControllerWatch,
    ControllerWatchSettings,
    Fault,
    odometry_problem,
)
from dreamzero_ros.core.robot.action_groups import GroupLayout, GroupSpec
from dreamzero_ros.core.robot.controller_identity import (
    ControllerClaim,
    Finding,
    claim_of,
    identify,
)

#: How a node whose endpoints are discovered before the node itself is named here.
UNDISCOVERED = 'a node not discovered yet'


def _nodes(endpoints: Iterable[Any]) -> list[str]:
    """Fully qualified node names of topic endpoints (rmw names an undiscovered node so)."""
    return [
        UNDISCOVERED
        if e.node_name == '_NODE_NAME_UNKNOWN_'
        else f'{e.node_namespace.rstrip("/")}/{e.node_name}'
        for e in endpoints
    ]


def resolved_claims(node: Any, specs: Iterable[GroupSpec]) -> list[ControllerClaim]:
    """The claims of every group of ``specs`` with a controller, names resolved by ``node``."""
    claims = (claim_of(spec) for spec in specs)
    return [claim.resolved(node.resolve_topic_name) for claim in claims if claim is not None]


def find_controllers(node: Any, claims: Sequence[ControllerClaim]) -> dict[str, Finding]:
    """Group -> the controller found for it in ``node``'s view of the graph now.

    A node whose endpoints are discovered before the node itself is never taken for a
    controller (the next look finds it, named).
    """
    findings = {}
    for claim in claims:
        target = node.resolve_topic_name(claim.target)
        if claim.action:
            endpoints = node.get_publishers_info_by_topic(f'{target}/_action/status')
            servers = [name for name in _nodes(endpoints) if name != UNDISCOVERED]
            findings[claim.group] = identify(claim, servers=servers)
            continue
        endpoints = node.get_subscriptions_info_by_topic(target)
        pairs = list(zip(_nodes(endpoints), (e.topic_type for e in endpoints), strict=True))
        subscribers = [n for n, kind in pairs if kind == claim.message_type and n != UNDISCOVERED]
        other_types = [f'{n} ({kind})' for n, kind in pairs if kind != claim.message_type]
        state = []
        if claim.state_topic and claim.node not in subscribers:
            state = _nodes(node.get_publishers_info_by_topic(claim.state_topic))
        findings[claim.group] = identify(claim, subscribers, state, other_types=other_types)
    return findings


def configured_joints(node: Any, controller: str, timeout: float) -> tuple[str, list[str] | None]:
    """The joints ``controller`` was configured with: JTC's ``joints`` or a gripper's ``joint``.

    ``(parameter, names)``; names None where the node has neither (or no parameter service).
    """
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import GetParameters
    import rclpy

    client = node.create_client(GetParameters, f'{controller}/get_parameters')
    try:
        if not client.wait_for_service(timeout_sec=timeout):
            return 'joints', None
        for name in ('joints', 'joint'):  # one at a time: an undeclared name empties the answer
            future = client.call_async(GetParameters.Request(names=[name]))
            rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
            values = future.result().values if future.done() and future.result() else []
            for value in values:
                if value.type == ParameterType.PARAMETER_STRING_ARRAY:
                    return name, list(value.string_array_value)
                if value.type == ParameterType.PARAMETER_STRING:
                    return name, [value.string_value]
    finally:
        node.destroy_client(client)
    return 'joints', None


def axis_values(twist: Any, axes: Sequence[str]) -> list[float]:
    """The values of ``axes`` (``linear.x`` ...) of geometry_msgs/Twist ``twist``."""
    values = []
    for axis in axes:
        part, field = axis.split('.')
        values.append(float(getattr(getattr(twist, part), field)))
    return values


class ControllerMonitor:
    """The controllers of ``layout``'s groups and their state, for the policy node ``node``.

    ``lower``/``upper``: the command row's limits (a base's velocity columns bound its
    odometry).
    """

    def __init__(
        self,
        node: Any,
        layout: GroupLayout,
        settings: ControllerWatchSettings,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> None:
        self.node = node
        self.layout = layout
        self._lower, self._upper = lower, upper
        self.claims = resolved_claims(node, (group.spec for group in layout.groups))
        watched = {claim.group for claim in self.claims}
        state_names = {
            group.name: group.spec.state_names
            for group in layout.groups
            if group.name in watched and group.spec.output != 'twist'
        }
        self.watch = ControllerWatch(self.claims, state_names, settings.state_timeout)
        #: The last findings (group -> Finding), for diagnostics.
        self.findings: dict[str, Finding] = {}
        self._commanding = False

    def enable_refusal(self, reading: bool) -> tuple[str, str]:
        """``(why enabling is refused, '')``, or ``('', the controllers found)``.

        ``reading``: the node reads its inputs (it is active), so that a group whose state
        stopped arriving is refused too.
        """
        self.findings = find_controllers(self.node, self.claims)
        missing = [str(f) for f in self.findings.values() if not f.found]
        problems = []
        if missing:
            problems.append(f'no controller for {"; ".join(missing)}')
        states = self.watch.state_problems(time.monotonic() if reading else None)
        if states:
            problems.append(f'bad state: {"; ".join(states)}')
        if problems:
            return '; '.join(problems), ''
        return '', self.found()

    def found(self) -> str:
        """The controllers of the last findings, one ``group: node (how)`` each."""
        return '; '.join(str(f) for f in self.findings.values() if f.found)

    def check(self, commanding: bool) -> Fault | None:
        """One control step: a new fault while commanding, or None."""
        if not commanding:
            self._commanding = False
            return None
        now = time.monotonic()
        if not self._commanding:  # commanding (re)starts: watch from now on
            self._commanding = True
            self.watch.restart(now)
        self.findings = find_controllers(self.node, self.claims)
        return self.watch.check(now, self.findings)

    def note_joint_state(self, msg: Any) -> None:
        """A joint state message was read."""
        self.watch.note_joint_state(msg.name, time.monotonic())

    def odometry(self, group: Any, msg: Any) -> np.ndarray | None:
        """The velocities of twist ``group``'s axes in odometry ``msg``; None when refused."""
        values = axis_values(msg.twist.twist, group.spec.axes)
        columns = list(group.columns)
        problem = odometry_problem(
            group.spec.axes, values, self._lower[columns], self._upper[columns]
        )
        self.watch.note_state(group.name, time.monotonic(), problem)
        if problem:
            self.node.get_logger().error(
                f'odometry of {group.name} refused: {problem}', throttle_duration_sec=2.0
            )
            return None
        return np.array(values)

    def values(self) -> tuple[tuple[str, str], ...]:
        """Diagnostic key/values: each controller found, the fault, refused state messages."""
        watch = self.watch
        return (
            *((f'controller.{g}', f.controller or 'missing') for g, f in self.findings.items()),
            ('controller_fault', str(watch.fault) if watch.fault else ''),
            ('states_refused', str(watch.states_refused)),
            ('last_state_refusal', watch.last_state_refusal),
        )
