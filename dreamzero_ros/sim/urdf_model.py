# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A robot's MJCF body tree from its URDF: the kinematics, limits and inertials of the description.

The simulated Panda is built from the description the node and ``robot_description`` use
(``descriptions/panda.urdf``), so that what the physics moves and what the safety envelope and
``/tf`` compute are one model. Each link becomes a body of its name (fixed links too, so that
every URDF frame has a body), each revolute or prismatic joint a hinge or slide joint of its name
with the URDF's range, damping and friction; ``<mimic>`` becomes an equality constraint. Meshes
are attached by link name (:class:`LinkMeshes`); actuators are the scene's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
import xml.etree.ElementTree as ET

import numpy as np


def rpy_to_quat(rpy: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes x, y, z) as a quaternion ``(w, x, y, z)``."""
    half = 0.5 * np.asarray(rpy, dtype=np.float64)
    cr, cp, cy = np.cos(half)
    sr, sp, sy = np.sin(half)
    return np.array(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ]
    )


def _floats(text: str | None, default: str = '0 0 0') -> np.ndarray:
    return np.array([float(x) for x in (text or default).split()])


def _fmt(values: np.ndarray) -> str:
    return ' '.join(f'{v:.9g}' for v in values)


@dataclass(frozen=True)
class LinkMeshes:
    """The meshes of one link: visual (mesh file, material) pairs and collision mesh files.

    ``pads``: extra collision boxes ``(half sizes, position)`` in the link (finger pads).
    """

    visuals: tuple[tuple[str, str], ...] = ()
    collisions: tuple[str, ...] = ()
    pads: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...] = ()


@dataclass
class RobotMJCF:
    """The MJCF pieces of a robot: assets, the body tree, equality constraints.

    Attributes:
        assets: ``<mesh>`` and ``<material>`` elements.
        root: the root link's ``<body>`` (place it with its ``pos``/``quat``).
        equality: ``<joint>`` equality elements of the mimic joints.
        joints: joint name -> (type, lower, upper, effort) of every moving joint, in tree order.

    """

    assets: list[ET.Element] = field(default_factory=list)
    root: ET.Element | None = None
    equality: list[ET.Element] = field(default_factory=list)
    joints: dict[str, tuple[str, float, float, float]] = field(default_factory=dict)


def robot_mjcf(
    urdf: str,
    meshes: Mapping[str, LinkMeshes],
    mesh_path: Callable[[str], str],
    materials: Mapping[str, str],
    prefix: str = '',
    joint_defaults: Mapping[str, str] | None = None,
) -> RobotMJCF:
    """Build the MJCF of the robot described by ``urdf``.

    Args:
        urdf: the URDF XML text.
        meshes: link name -> its meshes (links without an entry have none).
        mesh_path: mesh file name -> the path MuJoCo loads it from.
        materials: material name -> rgba, for the visual meshes.
        prefix: prepended to asset names (two robots in one scene).
        joint_defaults: extra attributes of every moving joint (e.g. ``armature``).

    Raises:
        ValueError: the URDF does not parse or has no single root link.

    """
    try:
        robot = ET.fromstring(urdf)
    except ET.ParseError as error:
        raise ValueError(f'robot description does not parse: {error}') from None
    links = {link.get('name'): link for link in robot.iterfind('link')}
    children: dict[str, list[ET.Element]] = {}
    for joint in robot.iterfind('joint'):
        children.setdefault(joint.find('parent').get('link'), []).append(joint)
    child_links = {joint.find('child').get('link') for joint in robot.iterfind('joint')}
    roots = [name for name in links if name not in child_links]
    if len(roots) != 1:
        raise ValueError(f'robot description needs one root link, has {roots}')
    model = RobotMJCF()
    for name, rgba in materials.items():
        model.assets.append(ET.Element('material', name=prefix + name, rgba=rgba))
    used: set[str] = set()

    def add_mesh(file: str) -> str:
        name = prefix + file.rsplit('.', 1)[0]
        if name not in used:
            used.add(name)
            model.assets.append(ET.Element('mesh', name=name, file=mesh_path(file)))
        return name

    def body(link_name: str, joint: ET.Element | None) -> ET.Element:
        element = ET.Element('body', name=link_name)
        if joint is not None:
            origin = joint.find('origin')
            xyz = _floats(origin.get('xyz') if origin is not None else None)
            rpy = _floats(origin.get('rpy') if origin is not None else None)
            element.set('pos', _fmt(xyz))
            if np.any(rpy):
                element.set('quat', _fmt(rpy_to_quat(rpy)))
            kind = joint.get('type')
            if kind in ('revolute', 'prismatic', 'continuous'):
                _add_joint(element, joint, model, joint_defaults or {})
        inertial = links[link_name].find('inertial')
        if inertial is not None:
            _add_inertial(element, inertial)
        parts = meshes.get(link_name, LinkMeshes())
        for file, material in parts.visuals:
            ET.SubElement(
                element,
                'geom',
                mesh=add_mesh(file),
                material=prefix + material,
                **{'class': 'visual'},
            )
        for file in parts.collisions:
            ET.SubElement(element, 'geom', mesh=add_mesh(file), **{'class': 'collision'})
        for size, pos in parts.pads:
            ET.SubElement(
                element, 'geom', type='box', size=_fmt(size), pos=_fmt(pos), **{'class': 'pad'}
            )
        for child in children.get(link_name, []):
            element.append(body(child.find('child').get('link'), child))
        return element

    model.root = body(roots[0], None)
    return model


def _add_joint(
    body: ET.Element, joint: ET.Element, model: RobotMJCF, defaults: Mapping[str, str]
) -> None:
    name, kind = joint.get('name'), joint.get('type')
    attributes = {
        'name': name,
        'type': 'slide' if kind == 'prismatic' else 'hinge',
        'axis': _fmt(
            _floats(
                joint.find('axis').get('xyz') if joint.find('axis') is not None else None, '1 0 0'
            )
        ),
        **defaults,
    }
    limit = joint.find('limit')
    lower = upper = effort = 0.0
    if limit is not None and kind != 'continuous':
        lower, upper = float(limit.get('lower', 0.0)), float(limit.get('upper', 0.0))
        effort = float(limit.get('effort', 0.0))
        attributes['range'] = f'{lower:.9g} {upper:.9g}'
        attributes['limited'] = 'true'
    dynamics = joint.find('dynamics')
    if dynamics is not None:
        attributes['damping'] = f'{float(dynamics.get("damping", 0.0)):.9g}'
        attributes['frictionloss'] = f'{float(dynamics.get("friction", 0.0)):.9g}'
    ET.SubElement(body, 'joint', **attributes)
    mimic = joint.find('mimic')
    if mimic is not None:
        multiplier = float(mimic.get('multiplier', 1.0))
        offset = float(mimic.get('offset', 0.0))
        model.equality.append(
            ET.Element(
                'joint',
                joint1=name,
                joint2=mimic.get('joint'),
                polycoef=f'{offset:.9g} {multiplier:.9g} 0 0 0',
            )
        )
    else:
        model.joints[name] = (kind, lower, upper, effort)


def _add_inertial(body: ET.Element, inertial: ET.Element) -> None:
    origin = inertial.find('origin')
    xyz = _floats(origin.get('xyz') if origin is not None else None)
    rpy = _floats(origin.get('rpy') if origin is not None else None)
    tensor = inertial.find('inertia')
    keys = ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz')
    values = np.array([float(tensor.get(key, 0.0)) for key in keys])
    element = ET.SubElement(
        body,
        'inertial',
        pos=_fmt(xyz),
        mass=f'{float(inertial.find("mass").get("value")):.9g}',
        fullinertia=_fmt(values),
    )
    if np.any(rpy):
        element.set('quat', _fmt(rpy_to_quat(rpy)))
