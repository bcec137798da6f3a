# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A scripted pick-and-place policy that reads the simulator's state: proof that a task can pass.

It implements the :class:`~dreamzero_ros.policy_types.Policy` contract of DreamZero (DROID
rows: 7 absolute joint positions and the gripper, 0 open .. 1 closed, 24 rows at 15 Hz) and is
served to the policy node over OpenPI like any remote policy, so the node, its limits and
hand-overs, the controller and the physics are the ones a model drives. Unlike a model it is
privileged: at the first query of an episode it reads where the object and the container are
and plans the whole motion (above the object, down, close, lift, over the container, down,
open, up; a ``pick_up`` task ends at the lift), each waypoint by inverse kinematics of the hand
pointing down (damped least squares on MuJoCo's Jacobian, on a copy of the model's data); every
query returns the next rows of that plan by the simulated time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import threading

import mujoco
import numpy as np

from dreamzero_ros.policy_types import ActionChunk, Observation
from dreamzero_ros.sim.physics import SimWorld
from dreamzero_ros.sim.tasks import TableTask

HORIZON = 24
STEP = 1.0 / 15.0
#: Heights of the tool centre point above an object's centre or the table, m.
APPROACH, LIFT, RELEASE = 0.12, 0.2, 0.13


def _down(yaw: float) -> np.ndarray:
    """Rotation of the hand pointing down (its z along -z), its finger axis (y) at ``yaw``."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[-s, c, 0.0], [c, s, 0.0], [0.0, 0.0, -1.0]])


@dataclass(frozen=True)
class Waypoint:
    """Joint positions and gripper closure (0 open, 1 closed) reached after ``duration`` s."""

    joints: np.ndarray
    gripper: float
    duration: float


class InverseKinematics:
    """Joint positions that put a site at a pose, by damped least squares."""

    def __init__(self, world: SimWorld, site: str) -> None:
        self.model = world.model
        self.data = mujoco.MjData(world.model)
        self.site = self.model.site(site).id
        joints = [self.model.joint(name).id for name in world.scene.arm_joints]
        self.qpos = np.array([self.model.jnt_qposadr[j] for j in joints])
        self.dofs = np.array([self.model.jnt_dofadr[j] for j in joints])
        self.lower, self.upper = self.model.jnt_range[joints].T

    def finger_yaw(self, joints: np.ndarray) -> float:
        """Yaw of the finger axis (the site's y) at ``joints``."""
        self.data.qpos[self.qpos] = joints
        mujoco.mj_kinematics(self.model, self.data)
        axis = self.data.site_xmat[self.site].reshape(3, 3)[:, 1]
        return float(np.arctan2(axis[1], axis[0]))

    def solve(self, start: np.ndarray, position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """Joint positions near ``start`` with the site at ``position`` and ``rotation``."""
        q = np.array(start, dtype=np.float64)
        jacp, jacr = np.zeros((3, self.model.nv)), np.zeros((3, self.model.nv))
        for _ in range(300):
            self.data.qpos[self.qpos] = q
            mujoco.mj_kinematics(self.model, self.data)
            mujoco.mj_comPos(self.model, self.data)
            current = self.data.site_xmat[self.site].reshape(3, 3)
            error = np.concatenate(
                [
                    position - self.data.site_xpos[self.site],
                    0.5 * sum(np.cross(current[:, i], rotation[:, i]) for i in range(3)),
                ]
            )
            if np.linalg.norm(error[:3]) < 5e-4 and np.linalg.norm(error[3:]) < 5e-3:
                break
            mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self.site)
            jacobian = np.vstack([jacp, jacr])[:, self.dofs]
            step = jacobian.T @ np.linalg.solve(jacobian @ jacobian.T + 1e-4 * np.eye(6), error)
            q = np.clip(q + step, self.lower + 0.01, self.upper - 0.01)
        return q


class ScriptedPickPlace:
    """Plans ``task`` on ``world`` at an episode's first query and plays the plan by sim time.

    ``lock`` is held while the world's state is read (the simulator steps it on its own
    thread).
    """

    metadata = {'action_horizon': HORIZON}

    def __init__(
        self,
        world: SimWorld,
        task: TableTask,
        lock: threading.Lock | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.world = world
        self.task = task
        self.lock = lock or threading.Lock()
        self.clock = clock or (lambda: world.time)
        self.ik = InverseKinematics(world, world.scene.tcp_sites[0])
        self._plan: tuple[float, np.ndarray, np.ndarray] | None = None
        self.chunks = 0

    def reset(self, session_id: str = 'default') -> None:
        """A new episode: the next query plans afresh."""
        self._plan = None
        self.chunks = 0

    def infer(self, observation: Observation) -> ActionChunk:
        """The next 24 rows of the episode's plan."""
        now = self.clock()
        if self._plan is None:
            self._plan = self._make_plan(np.asarray(observation.joint_position, float), now)
        start, times, rows = self._plan
        at = now + STEP * np.arange(HORIZON)
        actions = np.stack([np.interp(at, times, rows[:, c]) for c in range(rows.shape[1])], 1)
        self.chunks += 1
        return ActionChunk(actions.astype(np.float32), observation.stamp, STEP, self.chunks - 1)

    def _make_plan(self, joints: np.ndarray, now: float) -> tuple[float, np.ndarray, np.ndarray]:
        with self.lock:
            target = self.world.body_position(self.task.target_body)
            container = self.world.body_position(self.task.container_body)
            turn = _object_yaw(self.world.data.body(self.task.target_body).xmat.reshape(3, 3))
        yaw = self.ik.finger_yaw(joints)
        yaw += (turn - yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4
        table = 0.0
        grasp_height = max(target[2], table + 0.018)
        points = [
            (target + (0, 0, APPROACH), 0.0, 2.0),
            ((target[0], target[1], grasp_height), 0.0, 1.5),
            ((target[0], target[1], grasp_height), 1.0, 1.0),
            ((target[0], target[1], table + LIFT), 1.0, 1.5),
            ((container[0], container[1], table + LIFT), 1.0, 2.0),
            ((container[0], container[1], table + RELEASE), 1.0, 1.0),
            ((container[0], container[1], table + RELEASE), 0.0, 1.0),
            ((container[0], container[1], table + LIFT), 0.0, 1.5),
        ]
        if self.task.kind == 'pick_up':  # up to the lift, holding
            points = points[:4]
        waypoints, q = [], joints
        for position, gripper, duration in points:
            q = self.ik.solve(q, np.asarray(position, float), _down(yaw))
            waypoints.append(Waypoint(q, gripper, duration))
        times = [now]
        rows = [np.append(joints, 0.0)]
        for waypoint in waypoints:
            times.append(times[-1] + waypoint.duration)
            rows.append(np.append(waypoint.joints, waypoint.gripper))
        return now, np.array(times), np.array(rows)


def _object_yaw(rotation: np.ndarray) -> float:
    """Yaw of the object's x axis about z."""
    return float(np.arctan2(rotation[1, 0], rotation[0, 0]))
