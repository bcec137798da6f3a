# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The plan in 3D, without ROS: end-effector paths from joint rows through any forward kinematics.

:data:`ForwardKinematics` is whatever maps one row of arm joint positions to the end-effector
position in the robot's base frame (metres), e.g. a URDF through a kinematics library.
:func:`end_effector_path` is the planned path of a chunk's rows; :class:`ExecutedPath` keeps the
recent measured path, bounded; :func:`box_edges` is the outline of an axis-aligned workspace
envelope, as line segments, and :func:`envelope_outline` that of a whole
:class:`~dreamzero_ros.core.motion.envelope.EnvelopeConfig`. :class:`PlanSettings` are the node's
``plan.*`` parameters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
import xml.etree.ElementTree as ET

import numpy as np

from dreamzero_ros.core.motion.envelope import EnvelopeConfig
from dreamzero_ros.core.robot.kinematics import LinkPoints, root_link
from dreamzero_ros.parameter_schema import parameter


@dataclass(frozen=True)
class PlanSettings:
    """The plan in 3D (``plan.*``)."""

    enabled: bool = parameter(
        True,
        'Where the robot description is read (robot_description.source topic or file): publish '
        '~/plan_path and ~/executed_path (nav_msgs/Path of plan.link) while someone '
        'subscribes, and the envelope as latched ~/envelope markers.',
    )
    link: str = parameter(
        'panda_link8',
        'Link of the description whose origin the paths follow (Panda: the flange). Left at '
        'this default on a description without it: the child link of the last arm joint.',
    )


def plan_frames(urdf: str, arm_joints: tuple[str, ...], link: str, frame: str) -> tuple[str, str]:
    """The link the paths follow and their frame, for descriptions of any robot.

    The defaults name the Panda's links (``plan.link`` panda_link8, ``envelope.frame``
    panda_link0); on another robot's description, where they are absent, the link becomes the
    child of the last arm joint and the frame the root. A link or frame set to a name the
    description lacks is left as given (:func:`description_fk` refuses it).
    """
    robot = ET.fromstring(urdf)
    links = {element.get('name') for element in robot.iterfind('link')}
    if link not in links and link == PlanSettings.link:
        children = {
            joint.get('name'): joint.find('child').get('link')
            for joint in robot.iterfind('joint')
            if joint.find('child') is not None
        }
        link = children.get(arm_joints[-1], link) if arm_joints else link
    if frame not in links and frame == EnvelopeConfig.frame:
        frame = ''
    return link, frame


#: Arm joint positions ``(n,)`` -> end-effector position ``(3,)`` in the base frame, metres.
ForwardKinematics = Callable[[np.ndarray], np.ndarray]


def description_fk(
    urdf: str, arm_joints: tuple[str, ...], link: str, frame: str = ''
) -> tuple[ForwardKinematics, str]:
    """The position of ``link``'s origin in ``frame`` ('' : the root), and the frame's name.

    Raises:
        ValueError: as :class:`~dreamzero_ros.core.robot.kinematics.LinkPoints` does.

    """
    points = LinkPoints(urdf, arm_joints, (link,), frame=frame)
    return (lambda joints: points.positions(joints)[0, 0]), frame or root_link(urdf)


def end_effector_path(fk: ForwardKinematics, rows: np.ndarray) -> np.ndarray:
    """End-effector positions ``(N, 3)`` of joint rows ``(N, n)`` (arm joints only)."""
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2 or not len(rows):
        raise ValueError(f'rows must be (N >= 1, n), got {rows.shape}')
    points = np.array([np.asarray(fk(row), dtype=np.float64) for row in rows])
    if points.shape != (len(rows), 3) or not np.all(np.isfinite(points)):
        raise ValueError(f'forward kinematics must give finite (3,) positions, got {points.shape}')
    return points


class ExecutedPath:
    """The measured end-effector path of the last ``max_points`` positions (time, xyz).

    A measurement closer than ``min_distance`` (metres) to the last kept one is skipped, so a
    resting arm does not flush the path.
    """

    def __init__(self, fk: ForwardKinematics, max_points: int = 500, min_distance: float = 1e-3):
        if max_points < 2 or min_distance < 0:
            raise ValueError(f'need max_points >= 2 and min_distance >= 0: {max_points}, '
                             f'{min_distance}')  # fmt: skip
        self._fk = fk
        self._min_distance = min_distance
        self._points: deque[tuple[float, np.ndarray]] = deque(maxlen=max_points)

    def add(self, time: float, joints: np.ndarray) -> bool:
        """Add the measured arm joints at ``time``; True if the path grew."""
        point = end_effector_path(self._fk, np.asarray(joints)[None])[0]
        if self._points and np.linalg.norm(point - self._points[-1][1]) < self._min_distance:
            return False
        self._points.append((float(time), point))
        return True

    @property
    def last(self) -> tuple[float, np.ndarray]:
        """The newest kept point: time, position ``(3,)`` (``IndexError`` while empty)."""
        return self._points[-1]

    @property
    def times(self) -> np.ndarray:
        """Times of the kept points, seconds."""
        return np.array([time for time, _ in self._points])

    @property
    def points(self) -> np.ndarray:
        """Kept positions ``(N, 3)``, oldest first."""
        return np.array([point for _, point in self._points]).reshape(-1, 3)


def box_edges(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The 12 edges of the box ``lower..upper`` (base frame) as segments ``(12, 2, 3)``."""
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if lower.shape != (3,) or upper.shape != (3,) or np.any(lower >= upper):
        raise ValueError(f'need lower < upper, each (3,): {lower}, {upper}')
    corners = np.array([[(lower, upper)[(i >> axis) & 1][axis] for axis in range(3)]
                        for i in range(8)])  # fmt: skip
    edges = [(i, i | 1 << axis) for i in range(8) for axis in range(3) if not i >> axis & 1]
    return np.array([[corners[a], corners[b]] for a, b in edges])


def envelope_outline(config: EnvelopeConfig) -> dict[str, np.ndarray]:
    """Segments ``(K, 2, 3)`` of an envelope, by part, in its frame.

    ``workspace``: the box's 12 edges; ``table``: the table plane as the rectangle where it
    cuts the workspace box (absent when the table lies below the box); ``keep_out``: the 12
    edges of each keep-out box (absent without one).
    """
    low, high = config.workspace_min, config.workspace_max
    parts = {'workspace': box_edges(low, high)}
    if config.table_height > low[2]:
        z = config.table_height
        corners = np.array([[low[0], low[1], z], [high[0], low[1], z],
                            [high[0], high[1], z], [low[0], high[1], z]])  # fmt: skip
        parts['table'] = np.stack([corners, np.roll(corners, -1, axis=0)], axis=1)
    if config.keep_out:
        parts['keep_out'] = np.concatenate([box_edges(a, b) for a, b in config.keep_out])
    return parts
