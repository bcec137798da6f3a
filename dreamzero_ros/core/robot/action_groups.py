# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Action groups: which controller of the robot receives which columns of an action row.

A robot in ROS has one controller per group of joints: a joint_trajectory_controller per arm
(and head, waist), a GripperActionController per gripper, ``geometry_msgs/Twist`` on
``cmd_vel`` for a mobile base. A :class:`GroupSpec` maps action keys of the policy (or slices
of them, ``key[start:stop]``) onto one such output:

- ``joint_trajectory``: a trajectory_msgs/JointTrajectory topic (``target``), ``joints`` named;
- ``follow_joint_trajectory``: a control_msgs/action/FollowJointTrajectory action (``target``);
- ``gripper``: one gripper column, sent through ``interface`` (``action``: GripperCommand,
  ``float64``, ``joint_trajectory`` or ``none``) on ``target``, with its own position ``range``
  (joint position at the policy's 0 and 1) and switching rule;
- ``twist``: base velocity columns sent as geometry_msgs/Twist on ``target``, one ``axes`` entry
  (``linear.x`` .. ``angular.z``) per column; zero whenever the node holds;
- ``none``: columns the robot does not execute (still limited and planned).

Groups come from the ``groups`` list of an embodiment file (``embodiments/agibot.yaml``), a file
of their own, or, for a robot with one arm and at most one gripper, from the node's
parameters (:func:`single_arm_groups`: DROID's behaviour). :func:`resolve_groups` places them
on a policy's action row and refuses a mapping that leaves a column unused, takes one twice or
names a joint twice, naming it. Nothing here imports ROS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
import re
from typing import Any

import numpy as np
import yaml

from dreamzero_ros.core.robot.gripper import GRIPPER_INTERFACES, GripperConfig

__all__ = [
    'OUTPUTS',
    'TWIST_AXES',
    'ActionGroup',
    'GroupLayout',
    'GroupSpec',
    'KeySlice',
    'groups_from_mapping',
    'load_groups',
    'resolve_groups',
    'single_arm_groups',
]

#: The kinds of output a group can have.
OUTPUTS = ('joint_trajectory', 'follow_joint_trajectory', 'gripper', 'twist', 'none')
#: Twist fields a velocity column can drive.
TWIST_AXES = ('linear.x', 'linear.y', 'linear.z', 'angular.x', 'angular.y', 'angular.z')

#: Which columns (of a policy's action row) each output may take.
_KIND = {
    'joint_trajectory': 'position',
    'follow_joint_trajectory': 'position',
    'gripper': 'gripper',
    'twist': 'velocity',
}
_GROUP_KEYS = frozenset(
    {
        'name',
        'keys',
        'output',
        'target',
        'joints',
        'state_topic',
        'joint',
        'interface',
        'range',
        'max_effort',
        'move_time',
        'binary',
        'close_above',
        'open_below',
        'min_change',
        'axes',
        'odometry',
        'controller',
        'controller_state',
    }
)
_SLICE = re.compile(r'^(?P<key>[^\[\]]+)(\[(?P<start>\d*):(?P<stop>\d*)\])?$')


@dataclass(frozen=True)
class KeySlice:
    """Columns ``start:stop`` of one action key (``stop`` None: to its end)."""

    key: str
    start: int = 0
    stop: int | None = None

    def __str__(self) -> str:
        if self.start == 0 and self.stop is None:
            return self.key
        return f'{self.key}[{self.start}:{"" if self.stop is None else self.stop}]'


@dataclass(frozen=True)
class GroupSpec:
    """One controller of the robot and the action columns it receives.

    Attributes:
        name: the group's name (unique).
        output: one of :data:`OUTPUTS`.
        keys: the action keys (or slices) it takes, in order; empty: every action column of
            its kind (the arm joints, the grippers or the velocities).
        target: topic or action name of the controller.
        joints: joint names of a trajectory (or ``none``) group, one per column; the names of
            its columns in ``joint_states``.
        state_topic: sensor_msgs/JointState topic of its joints; empty: the node's
            ``joint_states_topic``.
        gripper_joint: a gripper group's joint in ``joint_states`` (and its trajectory).
        gripper_interface: how a gripper group's command is sent (one of
            :data:`~dreamzero_ros.core.robot.gripper.GRIPPER_INTERFACES`).
        gripper: a gripper group's position range and switching rule.
        max_effort: ``max_effort`` of GripperCommand goals.
        move_time: ``time_from_start`` of a one-point gripper trajectory, s.
        axes: a twist group's Twist field of each column (:data:`TWIST_AXES`).
        odometry: nav_msgs/Odometry topic whose twist is a twist group's measured velocity;
            empty: it is taken to rest (zero) when a plan starts from the measured state.
        controller: the node that is its controller; empty: the one ros2_controllers names
            for ``target`` (:mod:`~dreamzero_ros.core.robot.controller_identity`).
        controller_state: a topic its controller publishes, which identifies a subscriber as
            the controller; empty: the default of its output (JTC's ``~/controller_state``).

    """

    name: str
    output: str
    keys: tuple[KeySlice, ...] = ()
    target: str = ''
    joints: tuple[str, ...] = ()
    state_topic: str = ''
    gripper_joint: str = ''
    gripper_interface: str = 'none'
    gripper: GripperConfig = field(default_factory=GripperConfig)
    max_effort: float = 20.0
    move_time: float = 0.5
    axes: tuple[str, ...] = ()
    odometry: str = ''
    controller: str = ''
    controller_state: str = ''

    def __post_init__(self) -> None:
        where = f'action group {self.name!r}'
        if not self.name:
            raise ValueError('an action group needs a name')
        if self.output not in OUTPUTS:
            raise ValueError(f'{where}: output {self.output!r} is not one of {list(OUTPUTS)}')
        if self.output in ('joint_trajectory', 'follow_joint_trajectory', 'twist') and not (
            self.target
        ):
            raise ValueError(f'{where}: output {self.output} needs a target (topic or action)')
        if self.output in ('joint_trajectory', 'follow_joint_trajectory') and not self.joints:
            raise ValueError(f'{where}: output {self.output} needs joints')
        if self.output == 'gripper':
            if self.gripper_interface not in GRIPPER_INTERFACES:
                raise ValueError(
                    f'{where}: interface {self.gripper_interface!r} is not one of '
                    f'{list(GRIPPER_INTERFACES)}'
                )
            if not self.gripper_joint:
                raise ValueError(f'{where}: a gripper group needs its joint')
            if self.gripper_interface != 'none' and not self.target:
                raise ValueError(f'{where}: interface {self.gripper_interface} needs a target')
        if self.output == 'twist':
            unknown = [axis for axis in self.axes if axis not in TWIST_AXES]
            if not self.axes or unknown or len(set(self.axes)) != len(self.axes):
                raise ValueError(
                    f'{where}: axes must be distinct entries of {list(TWIST_AXES)}, got '
                    f'{list(self.axes)}'
                )

    @property
    def kind(self) -> str:
        """The columns it takes: ``position``, ``gripper``, ``velocity`` or ``any`` (none)."""
        return _KIND.get(self.output, 'any')

    @property
    def state_names(self) -> tuple[str, ...]:
        """The names its columns have in the measured state (joint_states)."""
        if self.output == 'gripper':
            return (self.gripper_joint,)
        return self.joints


@dataclass(frozen=True)
class ActionGroup:
    """A group placed on the node's command row.

    Attributes:
        spec: what it is.
        columns: its columns of a command row, in its own order.
        labels: ``key[i]`` of each column, for messages.

    """

    spec: GroupSpec
    columns: tuple[int, ...]
    labels: tuple[str, ...]

    @property
    def name(self) -> str:
        """The group's name."""
        return self.spec.name

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """Its columns of command rows (any leading shape)."""
        return np.asarray(rows)[..., list(self.columns)]


@dataclass(frozen=True)
class GroupLayout:
    """Every group of a robot on the node's command row.

    The command row holds the arm columns (joint positions, splined), then the grippers, then
    the velocities, each in the policy's action order (:class:`~.robot_layout.RobotLayout`).

    Attributes:
        groups: the groups in the order given.
        arm_joints: joint_states name of each arm column.
        grippers: ``(joint, open, closed)`` of each gripper column.
        velocity_names: ``group/axis`` of each velocity column.
        state_topics: every JointState topic the measured joints come from.

    """

    groups: tuple[ActionGroup, ...]
    arm_joints: tuple[str, ...]
    grippers: tuple[tuple[str, float, float], ...]
    velocity_names: tuple[str, ...]
    state_topics: tuple[str, ...]

    @property
    def command_names(self) -> list[str]:
        """A name for every command column (arm joints, gripper joints, velocity axes)."""
        return [*self.arm_joints, *(g[0] for g in self.grippers), *self.velocity_names]

    def of(self, output: str) -> tuple[ActionGroup, ...]:
        """The groups with ``output``."""
        return tuple(group for group in self.groups if group.spec.output == output)

    def to_joint_units(self, rows: np.ndarray) -> np.ndarray:
        """Command rows with each gripper column mapped from the policy's [0, 1] to its range."""
        out = np.array(rows, dtype=np.float64, copy=True)
        arm = len(self.arm_joints)
        for i, (_, low, high) in enumerate(self.grippers):
            out[..., arm + i] = low + out[..., arm + i] * (high - low)
        return out


def single_arm_groups(
    arm_joints: Sequence[str],
    trajectory_topic: str,
    gripper_joint: str,
    gripper_interface: str,
    gripper_target: str,
    gripper: GripperConfig,
    max_effort: float,
    move_time: float,
) -> tuple[GroupSpec, ...]:
    """One arm on one trajectory topic and at most one gripper: the node's parameters' groups."""
    groups = [GroupSpec('arm', 'joint_trajectory', (), trajectory_topic, tuple(arm_joints))]
    if gripper_joint:
        groups.append(
            GroupSpec(
                'gripper',
                'gripper',
                (),
                gripper_target,
                gripper_joint=gripper_joint,
                gripper_interface=gripper_interface,
                gripper=gripper,
                max_effort=max_effort,
                move_time=move_time,
            )
        )
    return tuple(groups)


def groups_from_mapping(data: Any, where: str = 'groups') -> tuple[GroupSpec, ...]:
    """Parse a ``groups`` list (``docs/action_groups.md``); ``ValueError`` naming what is wrong."""
    if not isinstance(data, list) or not data:
        raise ValueError(f'{where} must be a non-empty list of groups')
    specs = []
    for i, entry in enumerate(data):
        at = f'{where}[{i}]'
        if not isinstance(entry, Mapping):
            raise ValueError(f'{at} must be a mapping')
        unknown = sorted(str(key) for key in set(entry) - _GROUP_KEYS)
        if unknown:
            raise ValueError(f'unknown key {at}.{unknown[0]} (allowed: {sorted(_GROUP_KEYS)})')
        at = f'{where}[{i}] ({entry.get("name", "?")})'
        try:
            gripper = {}
            if entry.get('output') == 'gripper':
                gripper = _gripper_fields(entry)
            specs.append(
                GroupSpec(
                    name=str(entry.get('name', '')),
                    output=str(entry.get('output', '')),
                    keys=tuple(_key_slice(text, at) for text in entry.get('keys', ())),
                    target=str(entry.get('target', '')),
                    joints=tuple(str(name) for name in entry.get('joints', ())),
                    state_topic=str(entry.get('state_topic', '')),
                    axes=tuple(str(axis) for axis in entry.get('axes', ())),
                    odometry=str(entry.get('odometry', '')),
                    controller=str(entry.get('controller', '')),
                    controller_state=str(entry.get('controller_state', '')),
                    **gripper,
                )
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f'{at}: {error}') from None
    names = [spec.name for spec in specs]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f'{where}: group name {name!r} is used twice')
    return tuple(specs)


def _gripper_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A gripper group's fields of :class:`GroupSpec` from its entry."""
    defaults = GripperConfig()
    low, high = entry.get('range', (defaults.open_position, defaults.closed_position))
    return {
        'gripper_joint': str(entry.get('joint', '')),
        'gripper_interface': str(entry.get('interface', 'action')),
        'gripper': GripperConfig(
            open_position=float(low),
            closed_position=float(high),
            binary=bool(entry.get('binary', defaults.binary)),
            close_above=float(entry.get('close_above', defaults.close_above)),
            open_below=float(entry.get('open_below', defaults.open_below)),
            min_change=float(entry.get('min_change', defaults.min_change)),
        ),
        'max_effort': float(entry.get('max_effort', 20.0)),
        'move_time': float(entry.get('move_time', 0.5)),
    }


def load_groups(source: str, embodiments_dir: Path) -> tuple[GroupSpec, ...]:
    """The groups of a YAML file (a ``groups`` list, or an embodiment file with one).

    ``source`` is a path, or the tag of a shipped embodiment file (``agibot``, ``yam``).
    """
    path = Path(source)
    if not path.suffix and (embodiments_dir / f'{source}.yaml').is_file():
        path = embodiments_dir / f'{source}.yaml'
    try:
        data = yaml.safe_load(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise ValueError(f'action_groups: no file {path}') from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ValueError(f'action_groups: {path} is unreadable: {error}') from None
    if not isinstance(data, Mapping) or 'groups' not in data:
        raise ValueError(f'action_groups: {path} has no "groups" list')
    return groups_from_mapping(data['groups'], f'{path}: groups')


def resolve_groups(
    specs: Sequence[GroupSpec],
    action_keys: Sequence[str],
    action_dims: Sequence[int],
    arm_columns: Sequence[int],
    gripper_columns: Sequence[int],
    velocity_columns: Sequence[int] = (),
    joint_states_topic: str = 'joint_states',
) -> GroupLayout:
    """Place ``specs`` on the command row of a policy with these action keys and columns.

    ``action_keys``/``action_dims`` may be empty (a policy that names no keys) when every group
    takes the columns of its kind (no ``keys``).

    Raises:
        ValueError: a column left unused or taken twice, a joint named twice, a group over
            columns of another kind or of another count than its joints or axes.

    """
    width = len(arm_columns) + len(gripper_columns) + len(velocity_columns)
    labels = _column_labels(action_keys, action_dims, width)
    order = [*arm_columns, *gripper_columns, *velocity_columns]
    command = {column: i for i, column in enumerate(order)}
    kinds = {
        **{c: 'position' for c in arm_columns},
        **{c: 'gripper' for c in gripper_columns},
        **{c: 'velocity' for c in velocity_columns},
    }
    of_kind = {
        'position': list(arm_columns),
        'gripper': list(gripper_columns),
        'velocity': list(velocity_columns),
    }
    starts = dict(zip(action_keys, np.cumsum([0, *action_dims]).tolist(), strict=False))
    dims = dict(zip(action_keys, action_dims, strict=True))
    owner: dict[int, str] = {}
    placed = []
    for spec in specs:
        where = f'action group {spec.name!r}'
        if spec.keys:
            columns = []
            for part in spec.keys:
                if part.key not in dims:
                    raise ValueError(
                        f'{where}: the policy has no action key {part.key!r} (it has '
                        f'{list(action_keys)})'
                    )
                stop = dims[part.key] if part.stop is None else part.stop
                if not 0 <= part.start < stop <= dims[part.key]:
                    raise ValueError(f'{where}: {part} is outside the key ({dims[part.key]} wide)')
                columns += range(starts[part.key] + part.start, starts[part.key] + stop)
        elif spec.kind == 'any':
            raise ValueError(f'{where}: output none needs the keys it takes')
        else:
            columns = of_kind[spec.kind]
        for column in columns:
            if column in owner:
                raise ValueError(
                    f'action column {column} ({labels[column]}) is taken by groups '
                    f'{owner[column]!r} and {spec.name!r}'
                )
            owner[column] = spec.name
            if spec.kind != 'any' and kinds[column] != spec.kind:
                raise ValueError(
                    f'{where}: output {spec.output} takes {spec.kind} columns; action column '
                    f'{column} ({labels[column]}) is a {kinds[column]} column'
                )
        _check_count(spec, columns, where)
        placed.append(
            ActionGroup(
                spec,
                tuple(command[c] for c in columns),
                tuple(labels[c] for c in columns),
            )
        )
    unused = [c for c in range(width) if c not in owner]
    if unused:
        raise ValueError(
            f'action column {unused[0]} ({labels[unused[0]]}) is sent to no group '
            f'(unused: {[labels[c] for c in unused]}); map it, to output none if the robot '
            'does not execute it'
        )
    return _layout(placed, width, len(arm_columns), len(gripper_columns), joint_states_topic)


def _check_count(spec: GroupSpec, columns: Sequence[int], where: str) -> None:
    if spec.output == 'gripper' and len(columns) != 1:
        raise ValueError(f'{where}: a gripper group takes one column, got {len(columns)}')
    if spec.output == 'twist' and len(spec.axes) != len(columns):
        raise ValueError(
            f'{where}: {len(columns)} velocity columns for {len(spec.axes)} axes {list(spec.axes)}'
        )
    if spec.joints and len(spec.joints) != len(columns):
        raise ValueError(
            f'{where}: {len(columns)} columns for {len(spec.joints)} joints {list(spec.joints)}'
        )


def _layout(
    placed: Sequence[ActionGroup], width: int, arm: int, grippers: int, joint_states_topic: str
) -> GroupLayout:
    names: list[str | None] = [None] * width
    ranges: dict[int, tuple[float, float]] = {}
    owners: dict[str, str] = {}
    for group in placed:
        spec = group.spec
        if spec.output == 'twist':
            column_names = [f'{spec.name}/{axis}' for axis in spec.axes]
        else:
            column_names = list(spec.state_names) or [None] * len(group.columns)
        for column, name in zip(group.columns, column_names, strict=True):
            if name is not None and name in owners:
                raise ValueError(
                    f'joint {name!r} is named twice (groups {owners[name]!r} and {spec.name!r})'
                )
            if name is not None:
                owners[name] = spec.name
            names[column] = name
            if spec.output == 'gripper':
                ranges[column] = (spec.gripper.open_position, spec.gripper.closed_position)
    missing = [i for i, name in enumerate(names[: arm + grippers]) if name is None]
    if missing:
        group = next(g for g in placed if missing[0] in g.columns)
        raise ValueError(
            f'action group {group.name!r} ({group.spec.output}) needs joints: its columns are '
            'read from joint_states'
        )
    topics = [joint_states_topic]
    for group in placed:
        if group.spec.state_topic and group.spec.state_topic not in topics:
            topics.append(group.spec.state_topic)
    for i in range(arm + grippers, width):
        names[i] = names[i] or f'velocity{i - arm - grippers}'
    return GroupLayout(
        groups=tuple(placed),
        arm_joints=tuple(names[:arm]),
        grippers=tuple((names[c], *ranges.get(c, (0.0, 1.0))) for c in range(arm, arm + grippers)),
        velocity_names=tuple(names[arm + grippers :]),
        state_topics=tuple(topics),
    )


def _column_labels(keys: Sequence[str], dims: Sequence[int], width: int) -> list[str]:
    labels = [f'{key}[{i}]' for key, dim in zip(keys, dims, strict=True) for i in range(dim)]
    return labels if len(labels) == width else [f'column {c}' for c in range(width)]


def _key_slice(text: Any, where: str) -> KeySlice:
    match = _SLICE.match(str(text))
    if match is None:
        raise ValueError(f'{where}: keys entry {text!r} is not "key" or "key[start:stop]"')
    start, stop = match['start'], match['stop']
    return KeySlice(match['key'], int(start) if start else 0, int(stop) if stop else None)
