# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The robot description (URDF) and MoveIt-style ``joint_limits.yaml``: each joint's limits.

:func:`parse_urdf` reads every joint's ``<limit lower upper velocity effort>`` as ros2_control's
and MoveIt's URDF readers do: revolute and prismatic joints have position limits, continuous
joints none; fixed, floating and planar joints have no limits at all. ``<mimic>`` is ignored (a
mimic joint keeps its own limits) and so are ``<safety_controller>`` soft limits.
:func:`apply_joint_limits_yaml` overlays a ``joint_limits.yaml`` (``joint_limits: {<joint>:
{has_position_limits, min_position, max_position, has_velocity_limits, max_velocity,
has_acceleration_limits, max_acceleration, has_jerk_limits, max_jerk}}``), which may only
tighten the URDF's bounds (as ros2_control's ``joint_limits`` reader) and adds acceleration and
jerk limits. :class:`RobotDescription` keeps the URDF text with the result. Every URDF is checked
against :class:`~dreamzero_ros.core.robot.description_bounds.DescriptionBounds` (size, links, depth,
numbers; names unique, one tree) before anything else reads it. Nothing here imports ROS;
errors are ``ValueError`` saying what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
import math
from pathlib import Path
from typing import Any
import xml.etree.ElementTree as ElementTree

from dreamzero_ros.core.robot.description_bounds import DescriptionBounds, check_description

#: Joint types that have a ``<limit>`` element; of them, continuous has no position limits.
_LIMITED_TYPES = ('revolute', 'prismatic', 'continuous')


@dataclass(frozen=True)
class JointLimits:
    """The limits of one joint; ``inf`` (position, velocity, ...) or None (acc., jerk): none.

    Attributes:
        lower: lowest position (rad or m); ``-inf`` for a continuous joint.
        upper: highest position; ``inf`` for a continuous joint.
        max_velocity: largest speed, > 0.
        max_acceleration: largest acceleration magnitude, or None where none is given.
        max_jerk: largest jerk magnitude, or None where none is given.

    """

    lower: float
    upper: float
    max_velocity: float
    max_acceleration: float | None = None
    max_jerk: float | None = None


@dataclass(frozen=True)
class RobotDescription:
    """A robot description: its URDF text and the limits of its movable joints.

    Attributes:
        urdf: the URDF XML, as robot_state_publisher publishes it.
        name: the ``<robot name>``.
        joints: joint name -> limits, for every joint with a ``<limit>`` element.
        source: where it came from (a topic or a file), for messages.
        joint_limits_yaml: the joint_limits.yaml text overlaid, or None.

    """

    urdf: str
    name: str
    joints: Mapping[str, JointLimits]
    source: str = ''
    joint_limits_yaml: str | None = None

    @classmethod
    def parse(
        cls,
        urdf: str,
        joint_limits_yaml: str | None = None,
        source: str = '',
        bounds: DescriptionBounds | None = None,
    ) -> RobotDescription:
        """Parse ``urdf`` (and overlay ``joint_limits_yaml`` where given) within ``bounds``.

        Raises:
            ValueError: the URDF exceeds a bound, or it or the YAML does not parse or has bad
                limits.

        """
        name, joints = parse_urdf(urdf, source, bounds)
        if joint_limits_yaml is not None:
            joints = apply_joint_limits_yaml(joints, joint_limits_yaml)
        return cls(urdf, name, joints, source, joint_limits_yaml)

    @classmethod
    def read(
        cls,
        urdf_file: str | Path,
        joint_limits_file: str | Path | None = None,
        bounds: DescriptionBounds | None = None,
    ) -> RobotDescription:
        """Parse the URDF in ``urdf_file`` (and the YAML in ``joint_limits_file``, if any).

        Raises:
            ValueError: a file that cannot be read, is too large or does not parse, named.

        """
        bounds = bounds or DescriptionBounds()
        try:
            with Path(urdf_file).open('rb') as file:
                data = file.read(bounds.max_bytes + 1)  # never more than the bound into memory
            limits = None if not joint_limits_file else Path(joint_limits_file).read_text()
        except OSError as error:
            raise ValueError(f'robot description: {error}') from None
        if len(data) > bounds.max_bytes:
            raise ValueError(
                f'robot description ({urdf_file}) is more than {bounds.max_bytes} bytes '
                '(robot_description.max_bytes)'
            )
        try:
            urdf = data.decode('utf-8')
        except UnicodeDecodeError as error:
            raise ValueError(f'robot description ({urdf_file}) is not UTF-8: {error}') from None
        return cls.parse(urdf, limits, source=str(urdf_file), bounds=bounds)

    def limits_of(self, names: tuple[str, ...] | list[str]) -> list[JointLimits]:
        """The limits of ``names``, in order.

        Raises:
            ValueError: a joint the description lacks, or one without limits, named.

        """
        where = f'robot description {self.name!r}' + (f' ({self.source})' if self.source else '')
        missing = [name for name in names if name not in self.joints]
        if missing:
            unlimited = [name for name in missing if name in self._unlimited_joints()]
            if unlimited:
                raise ValueError(f'{where}: joint {unlimited[0]!r} has no limits (no <limit>)')
            raise ValueError(
                f'{where} has no joint {missing[0]!r} (its limited joints: {sorted(self.joints)})'
            )
        return [self.joints[name] for name in names]

    def _unlimited_joints(self) -> set[str]:
        root = ElementTree.fromstring(self.urdf)
        return {joint.get('name', '') for joint in root.iter('joint')}


def _number(element: ElementTree.Element, key: str, joint: str) -> float | None:
    text = element.get(key)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f'joint {joint!r}: <limit {key}="{text}"> is not a number') from None
    if not math.isfinite(value):
        raise ValueError(f'joint {joint!r}: <limit {key}="{text}"> is not finite')
    return value


def parse_urdf(
    urdf: str, source: str = '', bounds: DescriptionBounds | None = None
) -> tuple[str, dict[str, JointLimits]]:
    """The robot name and the limits of every joint with a ``<limit>``.

    Raises:
        ValueError: not URDF XML, beyond ``bounds`` (the defaults if None), or a limited joint
            with a bad or missing bound.

    """
    where = f' ({source})' if source else ''
    root = check_description(urdf, bounds, source)
    joints: dict[str, JointLimits] = {}
    for joint in root.findall('joint'):
        name, kind = joint.get('name', ''), joint.get('type', '')
        limit = joint.find('limit')
        if kind not in _LIMITED_TYPES or limit is None:
            continue
        velocity = _number(limit, 'velocity', name)
        if velocity is None or velocity <= 0:
            raise ValueError(
                f'robot description{where}: joint {name!r} needs <limit velocity> > 0, got '
                f'{limit.get("velocity")}'
            )
        lower, upper = -math.inf, math.inf
        if kind != 'continuous':
            lower, upper = (_number(limit, key, name) for key in ('lower', 'upper'))
            lower = 0.0 if lower is None else lower  # URDF's defaults
            upper = 0.0 if upper is None else upper
            if lower > upper:
                raise ValueError(
                    f'robot description{where}: joint {name!r} has lower {lower} > upper {upper}'
                )
        joints[name] = JointLimits(lower, upper, velocity)
    return root.get('name', ''), joints


_YAML_BOUNDS = {
    # yaml key: (the flag that enables it, JointLimits field)
    'min_position': ('has_position_limits', 'lower'),
    'max_position': ('has_position_limits', 'upper'),
    'max_velocity': ('has_velocity_limits', 'max_velocity'),
    'max_acceleration': ('has_acceleration_limits', 'max_acceleration'),
    'max_jerk': ('has_jerk_limits', 'max_jerk'),
}


def is_wider(bound: str, value: float, than: float) -> bool:
    """Whether ``value`` of the :class:`JointLimits` field ``bound`` is wider than ``than``.

    A larger value is wider for every bound but ``lower``.
    """
    return value < than if bound == 'lower' else value > than


def apply_joint_limits_yaml(joints: Mapping[str, JointLimits], text: str) -> dict[str, JointLimits]:
    """``joints`` with a MoveIt-style ``joint_limits.yaml`` overlaid.

    A bound applies where its ``has_*_limits`` flag is true. Position and velocity bounds may
    only tighten the URDF's; acceleration and jerk bounds must be > 0.

    Raises:
        ValueError: YAML that does not parse, a joint the URDF does not limit, a bound that is
            not a number or widens the URDF's, named.

    """
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f'joint_limits.yaml does not parse: {error}') from None
    if not isinstance(document, dict) or not isinstance(document.get('joint_limits'), dict):
        raise ValueError('joint_limits.yaml needs a "joint_limits:" map of joints')
    result = dict(joints)
    for name, entry in document['joint_limits'].items():
        if not isinstance(entry, dict):
            raise ValueError(f'joint_limits.yaml: joint {name!r} is not a map')
        if name not in result:
            raise ValueError(
                f'joint_limits.yaml names joint {name!r}, which the URDF does not limit'
            )
        result[name] = _overlay(name, result[name], entry)
    return result


def _overlay(name: str, limits: JointLimits, entry: Mapping[str, Any]) -> JointLimits:
    changes: dict[str, float] = {}
    for key, (flag, attribute) in _YAML_BOUNDS.items():
        if key not in entry or not entry.get(flag, False):
            continue
        value = entry[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(f'joint_limits.yaml: {name}.{key} is not a number: {value!r}')
        value = float(value)
        current = getattr(limits, attribute)
        if attribute in ('max_velocity', 'max_acceleration', 'max_jerk') and value <= 0:
            raise ValueError(f'joint_limits.yaml: {name}.{key} must be > 0, got {value}')
        if current is not None and is_wider(attribute, value, current):
            raise ValueError(
                f"joint_limits.yaml: {name}.{key} {value} is wider than the URDF's {current}"
            )
        changes[attribute] = value
    return replace(limits, **changes)
