# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's safety parameters: joint limits, robot description, trajectory, envelope.

Declarations only (:func:`~dreamzero_ros.parameter_schema.parameter` fields, as the rest of
:class:`~dreamzero_ros.core.node_parameters.NodeParameters`): the checks between them are in
:mod:`~dreamzero_ros.core.node_validation`, the core configurations built from them in
:class:`~dreamzero_ros.core.node_settings.NodeSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dreamzero_ros.core.description_bounds import DescriptionBounds
from dreamzero_ros.core.envelope import EnvelopeConfig
from dreamzero_ros.core.panda import (
    PANDA_LOWER,
    PANDA_MAX_ACCELERATION,
    PANDA_MAX_JERK,
    PANDA_MAX_VELOCITY,
    PANDA_STOP_DECELERATION,
    PANDA_UPPER,
)
from dreamzero_ros.core.safety import DELTA_MODES, OUTSIDE_LIMITS_MODES
from dreamzero_ros.parameter_schema import parameter

#: The safety.* limits with one value per arm joint.
PER_ARM_JOINT_LIMITS = ('max_velocity', 'stop_deceleration', 'max_acceleration', 'max_jerk')
#: Range of a position parameter: rad (or m for a prismatic joint), and gripper units.
POSITIONS = (-10.0, 10.0)
_METRES = (-100.0, 100.0)
_ENVELOPE_DEFAULT = EnvelopeConfig()


@dataclass(frozen=True)
class SafetySettings:
    """Position and step limits applied to every command (``safety.*``)."""

    joint_lower: tuple[float, ...] = parameter(
        PANDA_LOWER,
        'Lower position limits: the arm joints (rad; DROID: 7) then the gripper, if any '
        '(policy units, DROID 0..1).',
        range=POSITIONS,
    )
    joint_upper: tuple[float, ...] = parameter(
        PANDA_UPPER, 'Upper position limits, same layout.', range=POSITIONS
    )
    max_step_delta: tuple[float, ...] = parameter(
        (0.1,) * 7 + (1.0,),
        'Largest change per control step, same layout (each > 0).',
        range=(0.0, 10.0),
    )
    delta_mode: str = parameter(
        'clamp',
        'clamp: rate-limit steps beyond max_step_delta; refuse: drop the chunk and hold.',
        choices=DELTA_MODES,
    )
    outside_limits: str = parameter(
        'approach',
        'A start outside the position limits (a joint measured beyond them): approach: move '
        'into the limits at most max_step_delta per step; hold: refuse chunks and hold.',
        choices=OUTSIDE_LIMITS_MODES,
    )
    max_velocity: tuple[float, ...] = parameter(
        PANDA_MAX_VELOCITY,
        'Largest speed of each arm joint anywhere on the trajectory the controller '
        'interpolates, rad/s, one value per arm joint (Panda datasheet). Segments too fast '
        'for it are played slower (trajectory.max_stretch).',
        range=(0.001, 100.0),
    )
    stop_deceleration: tuple[float, ...] = parameter(
        PANDA_STOP_DECELERATION,
        'Peak deceleration of each arm joint when a hold brakes a motion, rad/s^2, one value '
        'per arm joint (half the Panda limits; lowered onto max_acceleration where above it); '
        'the braking is lengthened where the acceleration or jerk limits need it.',
        range=(0.001, 1000.0),
    )
    max_acceleration: tuple[float, ...] = parameter(
        PANDA_MAX_ACCELERATION,
        'Largest acceleration of each arm joint anywhere on the trajectory the controller '
        'interpolates, rad/s^2, one value per arm joint (Panda datasheet). Segments that need '
        'more are played slower (trajectory.max_stretch).',
        range=(0.001, 10000.0),
    )
    max_jerk: tuple[float, ...] = parameter(
        PANDA_MAX_JERK,
        'Largest jerk of each arm joint anywhere on the trajectory the controller interpolates, '
        'hand-overs and holds included, rad/s^3, one value per arm joint (Panda datasheet); '
        'enforced like max_acceleration.',
        range=(0.001, 1.0e7),
    )


@dataclass(frozen=True)
class RobotDescriptionSettings:
    """Where the robot description (URDF) and its limits come from (``robot_description.*``)."""

    source: str = parameter(
        'none',
        'topic: the URDF on robot_description.topic (std_msgs/String, transient local, as '
        'robot_state_publisher publishes it), waited for at configure; file: the URDF in '
        'robot_description.file; none: no description, the safety.* limits as typed. With a '
        'description, its joint limits apply; safety.* values other than their defaults may '
        'only tighten them (configure refuses a wider one).',
        choices=('none', 'topic', 'file'),
    )
    topic: str = parameter('robot_description', 'Topic of the URDF (source topic).')
    file: str = parameter('', 'URDF file (source file).')
    joint_limits_file: str = parameter(
        '',
        "MoveIt-style joint_limits.yaml over the description's limits (acceleration, jerk, "
        'tighter positions and velocities); empty: none.',
    )
    timeout: float = parameter(
        10.0,
        'Longest wait at configure for the description on robot_description.topic, seconds.',
        range=(0.0, 3600.0),
    )
    max_bytes: int = parameter(
        DescriptionBounds.max_bytes,
        'Largest URDF accepted, bytes; a bigger one is refused before it is parsed.',
        range=(1024, 2**30),
    )
    max_links: int = parameter(
        DescriptionBounds.max_links,
        'Most links (and most joints) a URDF may have; checked before the kinematics library '
        'builds its tree (time grows with the square of the links there).',
        range=(1, 100_000),
    )
    max_depth: int = parameter(
        DescriptionBounds.max_depth,
        'Most joints between the root link and any other (the kinematics library recurses '
        'along them).',
        range=(1, 1000),
    )
    max_length: float = parameter(
        DescriptionBounds.max_length,
        'Largest magnitude of a length in the URDF (origin xyz, geometry sizes), metres.',
        range=(1e-3, 1e9),
    )
    max_value: float = parameter(
        DescriptionBounds.max_value,
        'Largest magnitude of any other number in the URDF (limits, inertia, rpy, ...).',
        range=(1.0, 1e300),
    )

    @property
    def bounds(self) -> DescriptionBounds:
        """What a description may hold (``max_*``)."""
        return DescriptionBounds(
            self.max_bytes, self.max_links, self.max_depth, self.max_length, self.max_value
        )


@dataclass(frozen=True)
class TrajectorySettings:
    """How merged rows become the arm trajectory (``trajectory.*``)."""

    handover_lead: float = parameter(
        0.05,
        "Seconds from a chunk's arrival to its hand-over point (on the motion in force; the "
        "trajectory's points before it repeat that motion): time for the message to reach the "
        'controller.',
        range=(0.0, 10.0),
    )
    max_stretch: float = parameter(
        4.0,
        "How much longer than the policy's timing a chunk's rows may take to respect "
        'safety.max_velocity, max_acceleration and max_jerk (a segment alone may be slowed '
        'more); a chunk that needs more is refused with a hold.',
        range=(1.0, 100.0),
    )


@dataclass(frozen=True)
class EnvelopeSettings:
    """Where the robot's links may go, from its description (``envelope.*``)."""

    enabled: bool = parameter(
        False,
        'Cut every trajectory before a configured link point would leave the envelope (workspace '
        'box, above the table, out of keep_out boxes), ending in a braking hold. Needs the '
        'robot description (robot_description.source topic or file).',
    )
    links: tuple[str, ...] = parameter(
        _ENVELOPE_DEFAULT.links,
        'Links of the description whose points are checked (Panda: the flange and both fingers).',
    )
    link_offsets: tuple[float, ...] = parameter(
        tuple(_ENVELOPE_DEFAULT.offsets.ravel().tolist()),
        'x, y, z of each point in its link, metres, 3 values per link (Panda fingertips: 0.045 '
        'beyond the finger links).',
        range=_METRES,
    )
    frame: str = parameter(
        _ENVELOPE_DEFAULT.frame,
        'Link of the description the bounds are given in; it must not move with the arm '
        'joints. Empty: the description root.',
    )
    workspace_min: tuple[float, ...] = parameter(
        tuple(_ENVELOPE_DEFAULT.workspace_min.tolist()),
        'Lower corner x, y, z of the workspace box, metres.',
        range=_METRES,
    )
    workspace_max: tuple[float, ...] = parameter(
        tuple(_ENVELOPE_DEFAULT.workspace_max.tolist()),
        'Upper corner x, y, z of the workspace box, metres.',
        range=_METRES,
    )
    table_height: float = parameter(
        _ENVELOPE_DEFAULT.table_height,
        'Height (z) of the table plane in the frame, metres; every point stays above it.',
        range=_METRES,
    )
    keep_out: tuple[float, ...] = parameter(
        (),
        'Boxes no point may enter, 6 values each: min x, y, z then max x, y, z, metres.',
        range=_METRES,
    )
    resolution: float = parameter(
        _ENVELOPE_DEFAULT.resolution,
        'Largest motion of a point between two checked samples of the trajectory, metres; '
        'each sample must lie this far inside every bound.',
        range=(0.0001, 1.0),
    )
