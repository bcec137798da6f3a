# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the loaded policy reads and writes, and how it maps onto the robot the node drives.

A policy's metadata (the engine's, or an OpenPI server's) names its cameras with their
resolutions, the widths of an observation's arm joints and grippers, its action keys with their
widths, and which columns of an action row are grippers and which base velocities (a DROID
server that sends none of it is DROID: three cameras at 180x320, 7 joints, one gripper in the
last column). :class:`RobotLayout` holds that; :meth:`RobotLayout.mismatches` compares it with
the node's parameters, and :meth:`RobotLayout.command_rows` reorders action rows into the
node's command layout: the arm joints, then the grippers, then the velocities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dreamzero_ros.policy_types import DROID_ARM_DOF, DROID_CAMERAS

__all__ = ['RobotLayout']


@dataclass(frozen=True)
class RobotLayout:
    """A policy's cameras, state widths and action columns.

    Attributes:
        cameras: camera keys the policy reads.
        camera_sizes: camera key -> ``(height, width)`` it wants; empty where unknown.
        arm_dof: width of an observation's ``joint_position``.
        gripper_dof: width of an observation's ``gripper_position``.
        arm_columns: action columns of the arm joints, in order.
        gripper_columns: action columns of the grippers, in order.
        velocity_columns: action columns of base velocities, in order.
        action_keys: the action keys in the policy's order (empty where it names none).
        action_dims: the width of each action key.

    """

    cameras: tuple[str, ...]
    camera_sizes: Mapping[str, tuple[int, int]]
    arm_dof: int
    gripper_dof: int
    arm_columns: tuple[int, ...]
    gripper_columns: tuple[int, ...]
    velocity_columns: tuple[int, ...] = ()
    action_keys: tuple[str, ...] = ()
    action_dims: tuple[int, ...] = ()

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> RobotLayout:
        """The layout a policy's metadata describes (DROID's where it says nothing)."""
        try:
            cameras = tuple(str(c) for c in metadata.get('cameras') or DROID_CAMERAS)
            resolutions = metadata.get('camera_resolutions')
            if resolutions is None and metadata.get('image_resolution') is not None:
                resolutions = [metadata['image_resolution']] * len(cameras)
            sizes = {}
            if resolutions is not None:
                for camera, (height, width) in zip(cameras, resolutions, strict=True):
                    sizes[camera] = (int(height), int(width))
            arm_dof = int(metadata.get('arm_dof', DROID_ARM_DOF))
            gripper_dof = int(metadata.get('gripper_dof', 1))
            action_dim = int(metadata.get('action_dim', arm_dof + gripper_dof))
            default_grippers = range(action_dim - gripper_dof, action_dim)
            grippers = tuple(int(c) for c in metadata.get('gripper_columns', default_grippers))
            velocities = tuple(int(c) for c in metadata.get('velocity_columns', ()))
            keys = tuple(str(k) for k in metadata.get('action_keys', ()))
            dims = tuple(int(d) for d in metadata.get('action_dims', ()))
        except (TypeError, ValueError) as error:
            raise ValueError(f'policy metadata does not describe its layout: {error}') from None
        if any(not 0 <= c < action_dim for c in (*grippers, *velocities)):
            raise ValueError(
                f'gripper_columns {list(grippers)} or velocity_columns {list(velocities)} '
                f'outside {action_dim} columns'
            )
        if set(grippers) & set(velocities):
            raise ValueError(f'columns {sorted(set(grippers) & set(velocities))} are both')
        if len(keys) != len(dims) or (dims and sum(dims) != action_dim):
            keys, dims = (), ()  # keys without usable widths: as if it named none
        arm = tuple(c for c in range(action_dim) if c not in grippers and c not in velocities)
        return cls(cameras, sizes, arm_dof, gripper_dof, arm, grippers, velocities, keys, dims)

    @property
    def command_width(self) -> int:
        """Width of a command row."""
        return len(self.arm_columns) + len(self.gripper_columns) + len(self.velocity_columns)

    def mismatches(
        self,
        camera_keys: Sequence[str],
        arm_joints: Sequence[str],
        gripper_joints: Sequence[str],
        source: str = 'arm_joint_names',
    ) -> list[str]:
        """What keeps the node's parameters from driving this policy (empty: nothing).

        ``source`` names where the joints come from, for the messages.
        """
        problems = []
        if sorted(camera_keys) != sorted(self.cameras):
            problems.append(
                f'the policy reads cameras {list(self.cameras)}, camera_keys names '
                f'{list(camera_keys)}'
            )
        if len(arm_joints) != self.arm_dof:
            problems.append(
                f'the policy reads {self.arm_dof} arm joints, {source} names {len(arm_joints)}'
            )
        if self.gripper_dof != len(gripper_joints):
            where = 'gripper_joint_name gives' if source == 'arm_joint_names' else f'{source} has'
            problems.append(
                f'the policy reads {self.gripper_dof} gripper(s), {where} {len(gripper_joints)}'
            )
        if len(self.arm_columns) != self.arm_dof or len(self.gripper_columns) != self.gripper_dof:
            problems.append(
                f'the policy predicts {len(self.arm_columns)} arm and '
                f'{len(self.gripper_columns)} gripper columns for {self.arm_dof} arm joints and '
                f'{self.gripper_dof} grippers it reads: its actions are not the positions the '
                'node measures'
            )
        return problems

    def command_rows(self, actions: np.ndarray) -> np.ndarray:
        """Action rows reordered into the node's layout: arm joints, grippers, velocities."""
        actions = np.asarray(actions)
        if actions.ndim != 2 or actions.shape[1] != self.command_width:
            return actions  # the control loop refuses it, naming the shape
        return actions[:, [*self.arm_columns, *self.gripper_columns, *self.velocity_columns]]
