# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Each joint's transform from its parent link to its child link, as robot_state_publisher does.

robot_state_publisher turns the URDF and the joint states into tf: a fixed joint's transform,
once, on ``/tf_static``; every other joint's, for each joint state, on ``/tf``. A joint's
transform is its ``<origin xyz rpy>`` (``rpy``: fixed-axis roll, pitch, yaw) followed by its
motion: a rotation by the joint position about ``<axis>`` (revolute, continuous) or a
translation along it (prismatic). A ``<mimic>`` joint follows its master (``multiplier *
position + offset``); floating and planar joints are fixed, as its URDF reader makes them.
ROS-free; the URDF comes checked
(:class:`~dreamzero_ros.core.robot.robot_description.RobotDescription`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import math
import xml.etree.ElementTree as ElementTree

import numpy as np

#: Joint types that move with their position.
_MOVING = ('revolute', 'continuous', 'prismatic')


@dataclass(frozen=True)
class JointFrame:
    """One URDF joint: where its child link sits on its parent, and how it moves.

    Attributes:
        name: the joint.
        kind: its URDF type.
        parent: the parent link (the transform's frame).
        child: the child link (the transform's child frame).
        origin: the ``<origin>`` as a 4x4 homogeneous transform.
        axis: the unit ``<axis>``.
        mimic: ``(master joint, multiplier, offset)``, or None.

    """

    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    mimic: tuple[str, float, float] | None = None

    @property
    def fixed(self) -> bool:
        """Whether the joint never moves (published once, on /tf_static)."""
        return self.kind not in _MOVING

    def transform(self, position: float = 0.0) -> np.ndarray:
        """The 4x4 transform from the parent link to the child link at ``position``."""
        motion = np.eye(4)
        if self.kind == 'prismatic':
            motion[:3, 3] = self.axis * position
        elif not self.fixed:
            motion[:3, :3] = _axis_angle(self.axis, position)
        return self.origin @ motion


def joint_frames(urdf: str) -> list[JointFrame]:
    """Every joint of ``urdf`` (already checked: it parses, names are unique), in file order."""
    root = ElementTree.fromstring(urdf)
    frames = []
    for joint in root.findall('joint'):
        origin = joint.find('origin')
        xyz = _vector(origin, 'xyz')
        rpy = _vector(origin, 'rpy')
        transform = np.eye(4)
        transform[:3, :3] = _rpy(*rpy)
        transform[:3, 3] = xyz
        axis_element = joint.find('axis')
        axis = _vector(axis_element, 'xyz', (1.0, 0.0, 0.0))
        norm = float(np.linalg.norm(axis))
        mimic_element = joint.find('mimic')
        mimic = None
        if mimic_element is not None:
            mimic = (
                mimic_element.get('joint', ''),
                float(mimic_element.get('multiplier', 1.0)),
                float(mimic_element.get('offset', 0.0)),
            )
        frames.append(
            JointFrame(
                joint.get('name', ''),
                joint.get('type', ''),
                joint.find('parent').get('link', ''),
                joint.find('child').get('link', ''),
                transform,
                axis / norm if norm > 0 else np.array([1.0, 0.0, 0.0]),
                mimic,
            )
        )
    return frames


def moving_positions(frames: list[JointFrame], positions: Mapping[str, float]) -> dict[str, float]:
    """The position of each moving joint that ``positions`` gives, mimic joints included."""
    result = {}
    for frame in frames:
        if frame.fixed:
            continue
        if frame.mimic is not None and frame.mimic[0] in positions:
            master, multiplier, offset = frame.mimic
            result[frame.name] = multiplier * positions[master] + offset
        elif frame.name in positions:
            result[frame.name] = positions[frame.name]
    return result


def quaternion(rotation: np.ndarray) -> np.ndarray:
    """The unit quaternion ``(x, y, z, w)`` of a 3x3 rotation matrix."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4, (m[1, 0] - m[0, 1]) / s]
    q = np.array(q)
    return q / np.linalg.norm(q)


def _vector(
    element: ElementTree.Element | None,
    key: str,
    default: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> np.ndarray:
    text = None if element is None else element.get(key)
    return np.array(default if text is None else [float(v) for v in text.split()], dtype=float)


def _rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's fixed-axis roll, pitch, yaw: ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``."""
    rotations = [_axis_angle(axis, angle) for axis, angle in (((0, 0, 1), yaw), ((0, 1, 0), pitch))]
    return rotations[0] @ rotations[1] @ _axis_angle((1, 0, 0), roll)


def _axis_angle(axis: np.ndarray | tuple, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array(
        [
            [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
            [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
            [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
        ]
    )
