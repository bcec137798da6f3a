# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulated robot's hardware: MuJoCo physics behind position and velocity command interfaces.

:class:`SimWorld` is what ros2_control's hardware interface is to a controller: each arm joint
takes a position and a velocity command (its servo tracks ``q_d`` with ``qd_d`` as feed-forward,
see :mod:`.scenes`) and reports its measured position and velocity; a gripper takes a target
position that its command moves towards at ``gripper_speed`` (the fingers stop where they close
on an object: the servo's force is limited). The controllers that produce the commands are
joint_trajectory_controller's (core/motion/jtc.py), run by the caller at every physics step.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from dreamzero_ros.sim.scenes import Scene


class SimWorld:
    """The compiled scene, its state and command interfaces.

    Args:
        scene: the scene to simulate.
        gripper_speed: how fast a gripper's command moves to its target, joint units per second.

    """

    def __init__(self, scene: Scene, gripper_speed: float = 0.1) -> None:
        self.scene = scene
        self.model = mujoco.MjModel.from_xml_string(scene.xml)
        self.data = mujoco.MjData(self.model)
        self.gripper_speed = float(gripper_speed)
        joints = [*scene.arm_joints, *scene.gripper_joints]
        self._qpos = {
            name: int(self.model.jnt_qposadr[self.model.joint(name).id]) for name in joints
        }
        self._qvel = {
            name: int(self.model.jnt_dofadr[self.model.joint(name).id]) for name in joints
        }
        self._actuator = {name: int(self.model.actuator(name).id) for name in joints}
        gain = self.model.actuator_gainprm[:, 0]
        damping = -self.model.actuator_biasprm[:, 2]
        #: kv / kp of each joint's servo: the velocity feed-forward's scale.
        self._feed_forward = {name: damping[i] / gain[i] for name, i in self._actuator.items()}
        self._gripper_target = {name: 0.0 for name in scene.gripper_joints}
        self.reset(
            scene.home,
            [self.model.jnt_range[self.model.joint(g).id][1] for g in scene.gripper_joints],
        )

    @property
    def time(self) -> float:
        """Simulated seconds since the start."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """Seconds of one physics step."""
        return float(self.model.opt.timestep)

    def reset(self, arm: Sequence[float], grippers: Sequence[float]) -> None:
        """The robot at rest at ``arm`` (arm joints) and ``grippers``; the time keeps running."""
        for name, position in zip(self.scene.arm_joints, arm, strict=True):
            self.data.qpos[self._qpos[name]] = position
            self.data.ctrl[self._actuator[name]] = position
        for name, position in zip(self.scene.gripper_joints, grippers, strict=True):
            self._set_gripper(name, position)
            self._gripper_target[name] = float(position)
            self.data.ctrl[self._actuator[name]] = position
        self.data.qvel[:] = 0.0
        self.data.qacc_warmstart[:] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def _set_gripper(self, name: str, position: float) -> None:
        """Both fingers of a gripper at ``position`` (the mimic joint as its equality says)."""
        self.data.qpos[self._qpos[name]] = position
        for index in range(self.model.neq):
            if self.model.eq_type[index] == mujoco.mjtEq.mjEQ_JOINT:
                first, second = self.model.eq_obj1id[index], self.model.eq_obj2id[index]
                if second == self.model.joint(name).id:
                    offset, scale = self.model.eq_data[index][:2]
                    self.data.qpos[self.model.jnt_qposadr[first]] = offset + scale * position

    def command_arm(
        self, joints: Sequence[str], positions: np.ndarray, velocities: np.ndarray
    ) -> None:
        """Position and velocity commands of arm ``joints`` (the servo's set-point)."""
        for name, position, velocity in zip(joints, positions, velocities, strict=True):
            self.data.ctrl[self._actuator[name]] = position + self._feed_forward[name] * velocity

    def command_gripper(self, joint: str, target: float) -> None:
        """Move gripper ``joint`` towards ``target`` (clipped to its range) from now on."""
        low, high = self.model.jnt_range[self.model.joint(joint).id]
        self._gripper_target[joint] = float(np.clip(target, low, high))

    def gripper_target(self, joint: str) -> float:
        """The target gripper ``joint`` moves towards."""
        return self._gripper_target[joint]

    def step(self) -> None:
        """One physics step; the gripper commands move towards their targets."""
        limit = self.gripper_speed * self.timestep
        for name, target in self._gripper_target.items():
            index = self._actuator[name]
            self.data.ctrl[index] += np.clip(target - self.data.ctrl[index], -limit, limit)
        mujoco.mj_step(self.model, self.data)

    def positions(self, joints: Sequence[str]) -> np.ndarray:
        """Measured positions of ``joints``."""
        return np.array([self.data.qpos[self._qpos[name]] for name in joints])

    def velocities(self, joints: Sequence[str]) -> np.ndarray:
        """Measured velocities of ``joints``."""
        return np.array([self.data.qvel[self._qvel[name]] for name in joints])

    def efforts(self, joints: Sequence[str]) -> np.ndarray:
        """Actuator forces of ``joints`` (N m, N)."""
        return np.array([self.data.actuator_force[self._actuator[name]] for name in joints])

    def place(self, body: str, position: Sequence[float], yaw: float = 0.0) -> None:
        """Put free body ``body`` at ``position`` turned by ``yaw`` about z, at rest."""
        joint = self.model.joint(body)
        address = int(self.model.jnt_qposadr[joint.id])
        self.data.qpos[address : address + 3] = position
        self.data.qpos[address + 3 : address + 7] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        velocity = int(self.model.jnt_dofadr[joint.id])
        self.data.qvel[velocity : velocity + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def body_position(self, body: str) -> np.ndarray:
        """World position of ``body``'s frame."""
        return self.data.body(body).xpos.copy()

    def body_velocity(self, body: str) -> float:
        """Linear speed of free body ``body``, m/s."""
        joint = self.model.joint(body)
        address = int(self.model.jnt_dofadr[joint.id])
        return float(np.linalg.norm(self.data.qvel[address : address + 3]))

    def site_position(self, site: str) -> np.ndarray:
        """World position of ``site``."""
        return self.data.site(site).xpos.copy()

    def touching_all(self, body: str, others: Sequence[str], count: int) -> bool:
        """Whether geoms of at least ``count`` bodies named in ``others`` touch ``body``."""
        target = self.model.body(body).id
        bodies = {self.model.body(name).id for name in others}
        geom_body = self.model.geom_bodyid
        found = set()
        for contact in self.data.contact[: self.data.ncon]:
            pair = {int(geom_body[contact.geom1]), int(geom_body[contact.geom2])}
            if target in pair:
                found |= (pair & bodies) - {target}
        return len(found) >= count

    def touching(self, body: str, others: Sequence[str]) -> bool:
        """Whether a geom of ``body`` is in contact with a geom of a body named in ``others``."""
        return self.touching_all(body, others, 1)
