# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Tasks: an instruction, object poses drawn from a seed, and a success check on the physics.

The objects and the container are placed on the table at random, apart from each other and
within the arm's reach, from ``numpy``'s generator seeded with the episode's seed (the same
seed, the same scene). Two kinds:

- ``put_in``, "put the <object> in the <container>": succeeded once the object lies inside the
  container (its centre within the container's walls, its bottom below their rim), at rest and
  touched by no finger, for ``settle`` seconds: a grasp that merely carries it over the
  container does not count;
- ``pick_up``, "pick up the <object>": succeeded once the object is held between the fingers
  (touched by two of them) with its centre ``lift`` m above its resting height, for ``settle``
  seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dreamzero_ros.sim.scenes import SceneObject

if TYPE_CHECKING:  # the physics imports mujoco, which the caller loads (sim/cameras.py)
    from dreamzero_ros.sim.physics import SimWorld

#: Smallest distance between two placed objects' centres, m (the container needs more).
MIN_GAP = 0.09
CONTAINER_GAP = 0.17
TASKS = ('put_in', 'pick_up')


@dataclass(frozen=True)
class Layout:
    """Where an episode's objects start: body -> (x, y, yaw)."""

    seed: int
    poses: dict[str, tuple[float, float, float]]


@dataclass
class TableTask:
    """A task (``kind``, one of :data:`TASKS`) over the scene's ``objects``.

    ``target`` and ``container`` are body names; empty: drawn from the seed.
    """

    objects: tuple[SceneObject, ...]
    target: str = ''
    container: str = ''
    settle: float = 0.5
    kind: str = 'put_in'
    lift: float = 0.08
    fingers: tuple[str, ...] = ('panda_leftfinger', 'panda_rightfinger')
    #: x and y ranges of the table area in reach (world frame, m), where objects are placed.
    workspace: tuple[tuple[float, float], tuple[float, float]] = ((0.38, 0.66), (-0.26, 0.26))

    def __post_init__(self) -> None:
        if self.kind not in TASKS:
            raise ValueError(f'task {self.kind!r} is not one of {", ".join(TASKS)}')
        self._by_name = {item.name: item for item in self.objects}
        self.containers = [item.name for item in self.objects if item.shape == 'bin']
        self.graspable = [item.name for item in self.objects if item.shape != 'bin']
        for name, allowed in ((self.target, self.graspable), (self.container, self.containers)):
            if name and name not in allowed:
                raise ValueError(f'{name!r} is not one of {", ".join(allowed)}')
        self._chosen = (self.target, self.container)
        self._inside_since: float | None = None
        self.succeeded_at: float | None = None

    def instruction(self) -> str:
        """The instruction of the episode drawn last."""
        target, container = self._chosen
        if self.kind == 'pick_up':
            return f'pick up the {self._by_name[target].spoken}'
        return f'put the {self._by_name[target].spoken} in the {self._by_name[container].spoken}'

    def layout(self, seed: int) -> Layout:
        """The episode's placement of every object, from ``seed``."""
        rng = np.random.default_rng(seed)
        target = self.target or str(rng.choice(self.graspable))
        container = self.container or str(rng.choice(self.containers))
        self._chosen = (target, container)
        poses: dict[str, tuple[float, float, float]] = {}
        order = [container, *(name for name in self.graspable)]
        for name in order:
            for _ in range(1000):
                x, y = (rng.uniform(*self.workspace[0]), rng.uniform(*self.workspace[1]))
                if all(
                    np.hypot(x - px, y - py)
                    >= (CONTAINER_GAP if container in (name, other) else MIN_GAP)
                    for other, (px, py, _) in poses.items()
                ):
                    poses[name] = (float(x), float(y), float(rng.uniform(-np.pi, np.pi)))
                    break
            else:
                raise RuntimeError(f'no room for {name} on the table (seed {seed})')
        return Layout(seed, poses)

    def reset(self, world: SimWorld, seed: int) -> Layout:
        """Place the objects for episode ``seed``; the check starts afresh."""
        layout = self.layout(seed)
        for name, (x, y, yaw) in layout.poses.items():
            item = self._by_name[name]
            height = item.size[-1] if item.shape != 'bin' else 0.0
            world.place(name, (x, y, height + 0.001), yaw)
        self._inside_since = None
        self.succeeded_at = None
        return layout

    def inside(self, world: SimWorld) -> bool:
        """Whether the object's centre is within the container's walls, its bottom below the rim."""
        target, container = self._chosen
        half_x, half_y, height = self._by_name[container].size
        frame = world.data.body(container)
        offset = world.body_position(target) - frame.xpos
        local = frame.xmat.reshape(3, 3).T @ offset
        rim = height + self._by_name[target].size[-1]
        return bool(abs(local[0]) < half_x and abs(local[1]) < half_y and 0.0 < local[2] < rim)

    def check(self, world: SimWorld) -> bool:
        """Update the check at the world's time; True once the task has succeeded."""
        if self.succeeded_at is not None:
            return True
        target, _ = self._chosen
        if self.kind == 'pick_up':
            height = world.body_position(target)[2] - self._by_name[target].size[-1]
            resting = height > self.lift and world.touching_all(target, self.fingers, 2)
        else:
            resting = (
                self.inside(world)
                and world.body_velocity(target) < 0.02
                and not world.touching(target, self.fingers)
            )
        now = world.time
        if not resting:
            self._inside_since = None
        elif self._inside_since is None:
            self._inside_since = now
        elif now - self._inside_since >= self.settle:
            self.succeeded_at = now
        return self.succeeded_at is not None

    @property
    def target_body(self) -> str:
        """Body name of the object to move."""
        return self._chosen[0]

    @property
    def container_body(self) -> str:
        """Body name of the container."""
        return self._chosen[1]
