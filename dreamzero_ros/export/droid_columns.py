# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""DROID's state and action vectors from joint positions, as DROID's Franka code fills them.

DROID records ``cartesian_position`` as the pose of Polymetis' end effector (``panda_link8``) in
the arm's base (``panda_link0``): position in metres, then the orientation as extrinsic ``xyz``
Euler angles (SciPy's ``as_euler('xyz')``), radians. For an action given as target joint
positions (DROID's ``joint_position`` action space), ``RobotIKSolver`` and
``FrankaRobot.create_action_dict`` derive the other fields from the current state:

* ``joint_velocity`` = (target - current joints) / 0.2 (``max_joint_delta``);
* ``gripper_velocity`` = (target - current gripper) / 0.25 (``max_gripper_delta``);
* ``cartesian_velocity`` = the pose change to the target's pose, position / 0.075
  (``max_lin_delta``) and rotation (``target * current^-1`` as ``xyz`` Euler angles) / 0.15
  (``max_rot_delta``): DROID's normalised velocities, not m/s;
* ``cartesian_position`` = the target joints' pose; the gripper target clipped to [0, 1].

DROID's gripper is 0 open .. 1 closed, as the observation cache maps it.
"""

from __future__ import annotations

import numpy as np

from dreamzero_ros.core.robot.kinematics import LinkPoints

__all__ = ['DroidColumns', 'euler_xyz']

#: DROID's ``RobotIKSolver`` maxima: what a normalised velocity of 1 moves in one step.
MAX_JOINT_DELTA = 0.2
MAX_GRIPPER_DELTA = 0.25
MAX_LIN_DELTA = 0.075
MAX_ROT_DELTA = 0.15
#: Polymetis' end effector and base of the Franka (DROID's ``cartesian_position``).
EE_LINK = 'panda_link8'
BASE_LINK = 'panda_link0'


def euler_xyz(rotations: np.ndarray) -> np.ndarray:
    """``(..., 3, 3)`` rotation matrices -> extrinsic ``xyz`` Euler angles ``(..., 3)``.

    ``R = Rz(yaw) Ry(pitch) Rx(roll)``; roll and yaw in ``[-pi, pi]``, pitch in
    ``[-pi/2, pi/2]`` (SciPy's ``as_euler('xyz')`` away from gimbal lock).
    """
    r = np.asarray(rotations, dtype=np.float64)
    pitch = np.arcsin(np.clip(-r[..., 2, 0], -1.0, 1.0))
    roll = np.arctan2(r[..., 2, 1], r[..., 2, 2])
    yaw = np.arctan2(r[..., 1, 0], r[..., 0, 0])
    return np.stack([roll, pitch, yaw], axis=-1)


class DroidColumns:
    """Builds DROID's ``observation.state`` and ``action`` rows of an episode.

    Args:
        urdf: the robot description (a Franka: ``panda_link0`` .. ``panda_link8``).
        arm_joints: the arm joint names, in the order of the joint columns.
        ee_link: the link whose pose is ``cartesian_position``.
        base_link: the frame it is given in.

    Raises:
        ValueError: the description lacks a joint or link named.

    """

    def __init__(
        self,
        urdf: str,
        arm_joints: tuple[str, ...],
        ee_link: str = EE_LINK,
        base_link: str = BASE_LINK,
    ) -> None:
        self._kinematics = LinkPoints(urdf, arm_joints, [ee_link], frame=base_link)

    def poses(self, joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(N, 6)`` cartesian positions and ``(N, 3, 3)`` orientations of ``(N, 7)`` joints."""
        positions, rotations = self._kinematics.poses(joints)
        positions, rotations = positions[:, 0], rotations[:, 0]
        return np.concatenate([positions, euler_xyz(rotations)], axis=1), rotations

    def rows(
        self,
        joints: np.ndarray,
        gripper: np.ndarray,
        target_joints: np.ndarray,
        target_gripper: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(N, 14)`` state and ``(N, 28)`` action rows in DROID's key order.

        Args:
            joints: ``(N, 7)`` measured joints of each frame.
            gripper: ``(N,)`` measured gripper (0 open .. 1 closed).
            target_joints: ``(N, 7)`` the joint positions each frame's action commands.
            target_gripper: ``(N,)`` the gripper position each frame's action commands.

        """
        joints = np.asarray(joints, dtype=np.float64)
        target_joints = np.asarray(target_joints, dtype=np.float64)
        gripper = np.asarray(gripper, dtype=np.float64).reshape(-1, 1)
        target_gripper = np.clip(np.asarray(target_gripper, np.float64).reshape(-1, 1), 0, 1)
        pose, rotation = self.poses(joints)
        target_pose, target_rotation = self.poses(target_joints)
        turn = euler_xyz(target_rotation @ np.swapaxes(rotation, -1, -2))
        cartesian_velocity = np.concatenate(
            [(target_pose[:, :3] - pose[:, :3]) / MAX_LIN_DELTA, turn / MAX_ROT_DELTA], axis=1
        )
        state = np.concatenate([pose, gripper, joints], axis=1)
        action = np.concatenate(
            [
                target_pose,
                cartesian_velocity,
                target_gripper,
                (target_gripper - gripper) / MAX_GRIPPER_DELTA,
                target_joints,
                (target_joints - joints) / MAX_JOINT_DELTA,
            ],
            axis=1,
        )
        return state, action
