# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What a robot description (URDF) may hold before a kinematics library sees it.

A URDF comes from a topic anyone may publish on. The kinematics library (pinocchio, through
urdfdom) builds its tree recursively and its frame lookups by name take linear time: a chain of
a few thousand links overflows its stack (SIGSEGV, no message), tens of thousands of links take
minutes that Ctrl-C cannot interrupt, and ``<origin xyz="1e300 0 0">`` overflows forward
kinematics later. :func:`check_description` refuses all of it in linear time, with one line
naming the bound (:class:`DescriptionBounds`, the ``robot_description.max_*`` parameters), and
also what ROS's URDF parser refuses: duplicate link or joint names, a joint naming a link that
does not exist, a link with two parents, no single root, a cycle, a value that is not a number.
ROS-free; errors are ``ValueError``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import math
import xml.etree.ElementTree as ElementTree

#: Attributes holding lengths (metres), bounded by ``max_length``: tag -> attributes.
_LENGTHS = {
    'origin': ('xyz',),
    'box': ('size',),
    'cylinder': ('radius', 'length'),
    'capsule': ('radius', 'length'),
    'sphere': ('radius',),
}
#: Other numeric attributes, bounded by ``max_value``.
_VALUES = {
    'origin': ('rpy',),
    'axis': ('xyz',),
    'limit': ('lower', 'upper', 'velocity', 'effort'),
    'mass': ('value',),
    'inertia': ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz'),
    'mesh': ('scale',),
    'dynamics': ('damping', 'friction'),
    'safety_controller': ('soft_lower_limit', 'soft_upper_limit', 'k_position', 'k_velocity'),
    'mimic': ('multiplier', 'offset'),
    'calibration': ('rising', 'falling'),
}
#: Attributes that are vectors of three numbers.
_VECTORS = {('origin', 'xyz'), ('origin', 'rpy'), ('axis', 'xyz'), ('box', 'size')}
_VECTORS |= {('mesh', 'scale')}


@dataclass(frozen=True)
class DescriptionBounds:
    """The most a robot description may hold (``robot_description.max_*``).

    Attributes:
        max_bytes: size of the URDF text, UTF-8 bytes.
        max_links: links, and joints, each.
        max_depth: joints on the longest path from the root link.
        max_length: largest magnitude of a length (origins, geometry), metres.
        max_value: largest magnitude of any other number (limits, inertia, rpy, ...).

    """

    max_bytes: int = 8 * 2**20
    max_links: int = 1000
    max_depth: int = 256
    max_length: float = 1000.0
    max_value: float = 1e9

    def __post_init__(self) -> None:
        if min(self.max_bytes, self.max_links, self.max_depth) < 1:
            raise ValueError(f'description bounds must be >= 1, got {self}')
        if not (0 < self.max_length < math.inf and 0 < self.max_value < math.inf):
            raise ValueError(f'max_length and max_value must be finite and > 0, got {self}')


def check_description(
    urdf: str, bounds: DescriptionBounds | None = None, source: str = ''
) -> ElementTree.Element:
    """Parse ``urdf`` and check it against ``bounds`` (the defaults if None); its root element.

    Raises:
        ValueError: in one line, what is wrong and which bound (parameter) it exceeds.

    """
    bounds = bounds or DescriptionBounds()
    where = f'robot description{f" ({source})" if source else ""}'
    if len(urdf) > bounds.max_bytes or len(urdf.encode('utf-8')) > bounds.max_bytes:
        size = len(urdf.encode('utf-8'))
        raise ValueError(
            f'{where} is {size} bytes; at most {bounds.max_bytes} are accepted '
            '(robot_description.max_bytes)'
        )
    try:
        root = ElementTree.fromstring(urdf)
    except ElementTree.ParseError as error:
        suffix = f' ({source})' if source else ''
        raise ValueError(f'robot description does not parse as XML{suffix}: {error}') from None
    if root.tag != 'robot':
        raise ValueError(f'{where}: root element is <{root.tag}>, not <robot>')
    links = root.findall('link')
    joints = root.findall('joint')
    for kind, elements in (('links', links), ('joints', joints)):
        if len(elements) > bounds.max_links:
            raise ValueError(
                f'{where} has {len(elements)} {kind}; at most {bounds.max_links} are accepted '
                '(robot_description.max_links)'
            )
    _check_tree(links, joints, bounds, where)
    for element in (*links, *joints):
        _check_numbers(element, bounds, where)
    return root


def _unique_names(elements: list[ElementTree.Element], kind: str, where: str) -> set[str]:
    names: set[str] = set()
    for element in elements:
        name = element.get('name')
        if not name:
            raise ValueError(f'{where}: a <{kind}> has no name')
        if name in names:  # urdfdom: "joint '<name>' is not unique."
            raise ValueError(f"{where}: {kind} '{name}' is not unique")
        names.add(name)
    return names


def _check_tree(
    links: list[ElementTree.Element],
    joints: list[ElementTree.Element],
    bounds: DescriptionBounds,
    where: str,
) -> None:
    """One root, every link reached once from it, no deeper than ``max_depth``."""
    link_names = _unique_names(links, 'link', where)
    _unique_names(joints, 'joint', where)
    children: dict[str, list[str]] = {}
    parent_of: dict[str, str] = {}
    for joint in joints:
        name = joint.get('name')
        ends = {}
        for tag in ('parent', 'child'):
            part = joint.find(tag)
            link = None if part is None else part.get('link')
            if not link:
                raise ValueError(f"{where}: joint '{name}' has no <{tag} link>")
            if link not in link_names:
                raise ValueError(f"{where}: {tag} link '{link}' of joint '{name}' not found")
            ends[tag] = link
        if ends['child'] in parent_of:
            raise ValueError(
                f"{where}: link '{ends['child']}' is the child of joints "
                f"'{parent_of[ends['child']]}' and '{name}'"
            )
        parent_of[ends['child']] = name
        children.setdefault(ends['parent'], []).append(ends['child'])
    roots = [name for name in link_names if name not in parent_of]
    if len(roots) != 1:
        found = ', '.join(sorted(roots)[:3]) + (' ...' if len(roots) > 3 else '')
        raise ValueError(f'{where} needs one root link, has {len(roots)}: {found}'.rstrip(': '))
    depth = {roots[0]: 0}
    pending = deque(roots)
    while pending:
        link = pending.popleft()
        for child in children.get(link, ()):
            depth[child] = depth[link] + 1
            if depth[child] > bounds.max_depth:
                raise ValueError(
                    f'{where} is more than {bounds.max_depth} joints deep at link '
                    f"'{child}' (robot_description.max_depth)"
                )
            pending.append(child)
    if len(depth) != len(link_names):
        raise ValueError(f'{where} is not a tree: {len(link_names) - len(depth)} links in a cycle')


def _check_numbers(owner: ElementTree.Element, bounds: DescriptionBounds, where: str) -> None:
    """Every numeric attribute under ``owner`` (a link or joint) finite and within its bound."""
    for element in owner.iter():
        tag = element.tag
        for attributes, bound, option in (
            (_LENGTHS.get(tag, ()), bounds.max_length, 'max_length'),
            (_VALUES.get(tag, ()), bounds.max_value, 'max_value'),
        ):
            for attribute in attributes:
                text = element.get(attribute)
                if text is None:
                    continue
                what = f'{where}: <{tag} {attribute}="{text[:40]}"> of {owner.tag} ' + repr(
                    owner.get('name')
                )
                try:
                    values = [float(token) for token in text.split()]
                except ValueError:
                    raise ValueError(f'{what} is not a number') from None
                count = 3 if (tag, attribute) in _VECTORS else 1
                if len(values) != count:
                    raise ValueError(f'{what} needs {count} number{"s" if count > 1 else ""}')
                if not all(math.isfinite(v) for v in values):
                    raise ValueError(f'{what} is not finite')
                if not all(abs(v) <= bound for v in values):
                    raise ValueError(f'{what} is beyond +-{bound:g} (robot_description.{option})')
