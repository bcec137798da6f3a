# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The parameters of ``dreamzero-sim``: the simulated arm's, then the scene, task and cameras.

Declared once, as the policy node's and the sim arm's are
(:func:`~dreamzero_ros.parameter_schema.parameter` fields with ranges and choices). Nothing here
imports ROS or MuJoCo.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamzero_ros.core.config.sim_arm_parameters import SimArmParameters
from dreamzero_ros.parameter_schema import parameter
from dreamzero_ros.sim.scenes import IMAGE_SIZE, SCENES
from dreamzero_ros.sim.tasks import TASKS


@dataclass(frozen=True)
class TaskParameters:
    """The task of each episode (``task.*``)."""

    name: str = parameter('put_in', 'The task (dreamzero_ros/sim/tasks.py).', choices=TASKS)
    object: str = parameter('', 'Object to move (a body of the scene); empty: drawn from the seed.')
    container: str = parameter('', 'Container (a body of the scene); empty: drawn from the seed.')


@dataclass(frozen=True)
class CameraParameters:
    """The rendered cameras (``cameras.*``)."""

    rate_hz: float = parameter(
        15.0, 'Camera frame rate, Hz of simulated time.', range=(0.01, 1000.0)
    )
    topics: tuple[str, ...] = parameter(
        ('',),
        "Image topic of each of the scene's cameras, in its order; [''] names them after the "
        'cameras (DROID: wrist_image_left, exterior_image_1_left, exterior_image_2_left; '
        'bimanual: top_camera_images_rgb, left_camera_images_rgb, right_camera_images_rgb).',
    )
    height: int = parameter(IMAGE_SIZE[0], 'Image height, pixels.', range=(1, 16384))
    width: int = parameter(IMAGE_SIZE[1], 'Image width, pixels.', range=(1, 16384))


@dataclass(frozen=True)
class SimulatorParameters(SimArmParameters):
    """Every parameter of ``dreamzero-sim``: the simulated arm's, then its own."""

    scene: str = parameter('droid', 'The scene.', choices=SCENES)
    seed: int = parameter(
        0,
        'Seed of the next episode (object placement); each reset advances it by one.',
        range=(0, 2**62),
        runtime=True,
    )
    task: TaskParameters = field(default_factory=TaskParameters)
    cameras: CameraParameters = field(default_factory=CameraParameters)
    clock_period: float = parameter(
        0.01, 'Simulated seconds between /clock messages.', range=(1e-6, 10.0)
    )
    real_time_factor: float = parameter(
        1.0,
        'Most simulated seconds per wall-clock second (slower where rendering is); 0: as fast '
        'as possible.',
        range=(0.0, 1000.0),
    )
