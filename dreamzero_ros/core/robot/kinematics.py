# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Forward kinematics of points on a robot's links, from its URDF, with pinocchio.

:class:`LinkPoints` parses a robot description once, keeps the arm joints as the variables
(every other joint, e.g. the fingers, is locked at its upper limit: the Franka hand open, its
widest) and gives the positions of chosen points (a link's origin plus an offset in that link)
in a chosen frame for many joint configurations. :meth:`LinkPoints.speed_bound` bounds how fast
any of the points can move for given joint speeds, whatever the configuration: the distance of
a point from a joint's axis is at most the length of the kinematic chain between them.
"""

from __future__ import annotations

from collections.abc import Sequence
import xml.etree.ElementTree as ET

import numpy as np

#: Shortname prefix of the joint models pinocchio builds for bounded revolute URDF joints.
_REVOLUTE = 'JointModelR'


def _pinocchio():  # noqa: ANN202 - the module, imported where kinematics are used
    import pinocchio

    return pinocchio


def root_link(urdf: str) -> str:
    """The description's root link: the one no joint has as its child (``ValueError`` if none)."""
    try:
        robot = ET.fromstring(urdf)
    except ET.ParseError as error:
        raise ValueError(f'robot description does not parse: {error}') from None
    children = {child.get('link') for child in robot.iterfind('joint/child')}
    links = [link.get('name') for link in robot.iterfind('link')]
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise ValueError(f'robot description needs one root link, has {roots}')
    return roots[0]


class LinkPoints:
    """Positions of points fixed on links, as functions of the arm joints.

    Args:
        urdf: the robot description (URDF XML text).
        arm_joints: the joints that move, in the order of a configuration's columns.
        links: the link of each point.
        offsets: ``(len(links), 3)`` offset of each point in its link's frame, metres.
        frame: the link in whose frame positions are given; it must not move with the arm
            joints (e.g. ``panda_link0``, the arm's base). Empty: the description's root.

    Raises:
        ValueError: the description does not parse, or lacks a joint, link or frame named,
            or an arm joint is not a bounded revolute joint, or the frame moves.

    """

    def __init__(
        self,
        urdf: str,
        arm_joints: Sequence[str],
        links: Sequence[str],
        offsets: np.ndarray | None = None,
        frame: str = '',
    ) -> None:
        pin = _pinocchio()
        try:
            full = pin.buildModelFromXML(urdf)
        except (RuntimeError, ValueError) as error:
            raise ValueError(f'robot description does not parse: {error}') from None
        missing = [name for name in arm_joints if not full.existJointName(name)]
        if missing:
            raise ValueError(f'robot description has no joint {missing[0]!r}')
        locked_ids = [
            joint_id
            for joint_id in range(1, full.njoints)
            if full.names[joint_id] not in arm_joints
        ]
        reference = pin.neutral(full)
        for joint_id in locked_ids:
            joint = full.joints[joint_id]
            upper = full.upperPositionLimit[joint.idx_q : joint.idx_q + joint.nq]
            if joint.nq == 1 and np.isfinite(upper).all():
                reference[joint.idx_q] = upper[0]
        model = pin.buildReducedModel(full, locked_ids, reference) if locked_ids else full
        order = [model.getJointId(name) for name in arm_joints]
        for name, joint_id in zip(arm_joints, order, strict=True):
            joint = model.joints[joint_id]
            if joint.nq != 1 or not joint.shortname().startswith(_REVOLUTE):
                raise ValueError(
                    f'joint {name!r} is a {joint.shortname()}: only bounded revolute arm joints '
                    'are supported'
                )
        self.links = tuple(links)
        offsets = np.zeros(3 * len(self.links)) if offsets is None else np.asarray(offsets, float)
        if offsets.size != 3 * len(self.links):
            raise ValueError(
                f'{len(self.links)} links need {3 * len(self.links)} offset values, got '
                f'{offsets.size}'
            )
        self.offsets = offsets.reshape(len(self.links), 3)
        self._frames = []  # one operational frame per point, on its link's joint
        for index, (link, offset) in enumerate(zip(self.links, self.offsets, strict=True)):
            link_id = model.getFrameId(link)
            if link_id >= len(model.frames):
                raise ValueError(f'robot description has no link {link!r}')
            parent = model.frames[link_id]
            placement = parent.placement * pin.SE3(np.eye(3), offset)
            point = pin.Frame(
                f'envelope_point_{index}', parent.parentJoint, link_id, placement, pin.OP_FRAME
            )
            self._frames.append(model.addFrame(point))
        self._model = model
        self._data = model.createData()
        # every point is fixed in its joint's frame: one joint placement per joint and sample
        parents = [model.frames[f].parentJoint for f in self._frames]
        self._joints = sorted(set(parents))
        self._point_joint = np.array([self._joints.index(j) for j in parents])
        self._local = np.array([model.frames[f].placement.translation for f in self._frames])
        self._local_rotation = np.array([model.frames[f].placement.rotation for f in self._frames])
        # configuration column of each joint of the model's q (the reduced model: arm joints only)
        self._order = np.argsort([model.joints[j].idx_q for j in order])
        self._q = pin.neutral(model)
        self._to_frame = np.eye(4)
        if frame:
            frame_id = model.getFrameId(frame)
            if frame_id >= len(model.frames):
                raise ValueError(f'robot description has no link {frame!r} (envelope frame)')
            if model.frames[frame_id].parentJoint != 0:
                raise ValueError(f'frame {frame!r} moves with the arm joints')
            pin.framesForwardKinematics(model, self._data, self._q)
            self._to_frame = self._data.oMf[frame_id].inverse().homogeneous
        self.reach = self._reach(order)

    def _reach(self, order: Sequence[int]) -> np.ndarray:
        """``(points, joints)``: metres a point moves per radian of a joint, at most.

        A point's distance from a joint's axis is at most the length of the chain between them.
        """
        model = self._model
        reach = np.zeros((len(self.links), len(order)))
        for p, frame_id in enumerate(self._frames):
            frame = model.frames[frame_id]
            length = float(np.linalg.norm(frame.placement.translation))
            joint_id = frame.parentJoint
            lengths = {}
            while joint_id > 0:  # from the point's joint up to the root
                lengths[joint_id] = length
                length += float(np.linalg.norm(model.jointPlacements[joint_id].translation))
                joint_id = model.parents[joint_id]
            for column, joint_id in enumerate(order):
                reach[p, column] = lengths.get(joint_id, 0.0)
        return reach

    @property
    def arm_dof(self) -> int:
        """Number of arm joints (columns of a configuration)."""
        return len(self._order)

    def _joint_placements(self, configurations: np.ndarray) -> np.ndarray:
        """``(N, points, 4, 4)``: the placement in the frame of each point's joint."""
        pin = _pinocchio()
        model, data = self._model, self._data
        configurations = np.atleast_2d(np.asarray(configurations, dtype=np.float64))
        placements = np.empty((len(configurations), len(self._joints), 4, 4))
        joints = list(enumerate(self._joints))
        for n, q in enumerate(configurations[:, self._order]):
            pin.forwardKinematics(model, data, q)
            for k, joint_id in joints:
                placements[n, k] = data.oMi[joint_id].homogeneous
        return self._to_frame @ placements[:, self._point_joint]

    def positions(self, configurations: np.ndarray) -> np.ndarray:
        """``(N, points, 3)`` positions in the frame for ``(N, arm_dof)`` configurations."""
        return self.poses(configurations)[0]

    def poses(self, configurations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions ``(N, points, 3)`` and orientations ``(N, points, 3, 3)`` in the frame.

        A point's orientation is its link's (an offset moves the point, not its axes).
        """
        placements = self._joint_placements(configurations)
        rotations = placements[..., :3, :3]
        positions = np.einsum('npij,pj->npi', rotations, self._local) + placements[..., :3, 3]
        return positions, rotations @ self._local_rotation

    def speed_bound(self, joint_speed: np.ndarray) -> float:
        """Largest speed of any point, m/s, while each joint moves at most ``joint_speed``."""
        return float(np.max(self.reach @ np.abs(np.asarray(joint_speed, dtype=np.float64))))
