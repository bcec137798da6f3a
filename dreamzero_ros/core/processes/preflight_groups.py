# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-preflight``'s checks of the action groups, without ROS.

Every group of the node's parameters (``action_groups``, or the single arm and gripper of
``arm_joint_names`` / ``gripper_joint_name``) is checked as the node will meet it: its joints in
the joint states of its ``state_topic``, its controller found by the same rule as ``~/enable``
(:mod:`~dreamzero_ros.core.robot.controller_identity`), the joint names that controller was
configured with (JTC's ``joints``, a gripper controller's ``joint``) against the group's, and a
base's odometry arriving with usable values. The ROS layer (ros/preflight.py) supplies what it
saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from dreamzero_ros.core.processes.preflight import Check
from dreamzero_ros.core.robot.action_groups import GroupSpec
from dreamzero_ros.core.robot.controller_identity import Finding

#: What to do when a group has no controller, by output.
_START = {
    'joint_trajectory': 'start its joint_trajectory_controller (ros2 control '
    'load_controller --set-state active <name>)',
    'follow_joint_trajectory': 'start its joint_trajectory_controller (its '
    '~/follow_joint_trajectory action)',
    'gripper': 'start its gripper controller (GripperActionController, franka_gripper, ...)',
    'twist': 'start the base driver',
}


def state_topics(specs: Iterable[GroupSpec], default: str) -> dict[str, list[GroupSpec]]:
    """Each joint-state topic and the groups measured on it (``default``: joint_states_topic)."""
    topics: dict[str, list[GroupSpec]] = {default: []}
    for spec in specs:
        if spec.state_names and spec.output != 'twist':
            topics.setdefault(spec.state_topic or default, []).append(spec)
    return topics


def arm_joints(specs: Iterable[GroupSpec]) -> list[str]:
    """The joints of every position group (the command row's arm columns), in group order."""
    return [j for spec in specs if spec.output not in ('gripper', 'twist') for j in spec.joints]


def group_joints(spec: GroupSpec, topic: str, seen: Iterable[str]) -> Check:
    """The joints of ``spec`` appear in the joint states of ``topic``."""
    seen = set(seen)
    missing = [name for name in spec.state_names if name not in seen]
    name = f'joints of {spec.name}'
    if not missing:
        return Check(name, True, f'all {len(spec.state_names)} in {topic}')
    return Check(
        name,
        False,
        f'{topic} lacks {missing} (seen: {sorted(seen) or "nothing"})',
        f"set the group's joints (or its state_topic) to the names {topic} publishes",
    )


def controller(finding: Finding, dry_run: bool) -> Check:
    """The group's controller is there, by the rule ``~/enable`` applies."""
    claim = finding.claim
    name = f'controller {claim.group}'
    if finding.found:
        return Check(name, True, f'{finding.controller} ({finding.how}) on {claim.target}')
    if dry_run:
        return Check(name, True, f'{finding.problem} (dry_run: previews only)')
    return Check(
        name,
        False,
        f'{claim.target}: {finding.problem}',
        f"{_START.get(claim.output, 'start its controller')}, or set the group's target / "
        'controller to its names',
    )


def controller_joints(
    spec: GroupSpec, node: str, configured: Sequence[str] | None, parameter: str
) -> Check:
    """The joints controller ``node`` was configured with (``parameter``) are the group's.

    ``configured`` None: the controller has no such parameter (not a ros2_control controller,
    or one without joints): nothing to compare, which passes and says so.
    """
    name = f'controller joints {spec.name}'
    if configured is None:
        return Check(name, True, f'{node} has no {parameter} parameter: not compared')
    wanted = list(spec.state_names)
    missing = [joint for joint in wanted if joint not in configured]
    extra = [joint for joint in configured if joint not in wanted]
    if not missing and not extra:
        return Check(name, True, f"{node} {parameter} = the group's {len(wanted)} joints")
    parts = [f'{node} lacks {missing}' if missing else '', f'also has {extra}' if extra else '']
    return Check(
        name,
        False,
        ', '.join(part for part in parts if part),
        f"make the group's joints those of the controller ({node} {parameter}: {list(configured)})",
    )


def odometry(spec: GroupSpec, problem: str) -> Check:
    """A base's newest odometry is usable (``problem``: why it is refused, '' when it is not)."""
    name = f'odometry {spec.name}'
    if not problem:
        return Check(name, True, f'{spec.odometry}: usable velocities')
    return Check(
        name,
        False,
        f'{spec.odometry}: {problem}',
        'fix the base driver or its odometry (the node refuses it and stops commanding)',
    )


def velocity_limits(
    specs: Sequence[GroupSpec], lower: Sequence[float], upper: Sequence[float]
) -> Mapping[str, tuple[list[float], list[float]]]:
    """Each twist group's velocity limits: the last columns of a command row's limits.

    Velocity columns come last in the command row, in the policy's order; without the policy,
    the groups' order stands in for it. Empty where the widths do not fit.
    """
    twists = [spec for spec in specs if spec.output == 'twist']
    count = sum(len(spec.axes) for spec in twists)
    if not twists or len(lower) < count or len(upper) != len(lower):
        return {}
    limits, start = {}, len(lower) - count
    for spec in twists:
        stop = start + len(spec.axes)
        limits[spec.name] = (list(lower[start:stop]), list(upper[start:stop]))
        start = stop
    return limits
