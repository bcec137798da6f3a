# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulated arm's parameters (``dreamzero-sim-arm``), declared once as the node's are.

:class:`SimArmParameters` is a settings tree of :func:`~dreamzero_ros.parameter_schema.parameter`
fields (type, default, description, range, choices): the sim arm declares exactly these with
their descriptors and refuses any other name, and ``dreamzero-sim`` extends them
(:mod:`dreamzero_ros.sim.parameters`). Nothing here imports ROS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamzero_ros.core.config.node_parameters import POSITIONS
from dreamzero_ros.core.motion.envelope import EnvelopeConfig
from dreamzero_ros.core.robot.gripper import GRIPPER_INTERFACES
from dreamzero_ros.core.robot.panda import (
    PANDA_ARM_JOINTS,
    PANDA_MAX_ACCELERATION,
    PANDA_MAX_JERK,
    PANDA_READY,
)
from dreamzero_ros.parameter_schema import parameter

#: The points checked against the table: those the policy node's envelope checks (the
#: Panda's flange and both fingertips), so that both report the same table.
TABLE_POINTS = EnvelopeConfig()
_METRES = (-100.0, 100.0)


@dataclass(frozen=True)
class SimGripperParameters:
    """The single arm's gripper (``gripper.*``)."""

    joint: str = parameter(
        'panda_finger_joint1', 'Gripper joint in joint_states; empty: no gripper.'
    )
    interface: str = parameter(
        'joint_trajectory',
        'How the gripper is commanded (action needs control_msgs).',
        choices=GRIPPER_INTERFACES,
    )
    name: str = parameter(
        'gripper_controller/joint_trajectory',
        'Action name (action) or topic (float64, joint_trajectory) of the gripper command.',
    )
    initial_position: float = parameter(
        0.04, 'Start position of the gripper joint (Franka: open).', range=POSITIONS
    )
    speed: float = parameter(0.1, 'Finger speed, joint units per second.', range=(0.0, 100.0))


@dataclass(frozen=True)
class TableParameters:
    """The table the single arm stands at (``table.*``)."""

    height: float = parameter(
        0.0,
        'Height of the table plane in table.frame, m: points of table.links below it are '
        'reported on /diagnostics.',
        range=_METRES,
    )
    frame: str = parameter('panda_link0', 'Link of the description the table height is given in.')
    links: tuple[str, ...] = parameter(
        TABLE_POINTS.links,
        'Links whose points are checked against the table (as envelope.links: the flange and '
        'fingertips).',
    )
    link_offsets: tuple[float, ...] = parameter(
        tuple(TABLE_POINTS.offsets.ravel().tolist()),
        'x, y, z of each checked point in its link, m, 3 per link (Panda fingertips: 0.045).',
        range=_METRES,
    )


@dataclass(frozen=True)
class CommandLimitParameters:
    """The limits of the Franka checks of the 1 kHz command (``limits.*``)."""

    max_acceleration: tuple[float, ...] = parameter(
        PANDA_MAX_ACCELERATION,
        'Acceleration limit of each arm joint, rad/s^2, for the checks of the 1 kHz command '
        '(Panda datasheet); position and velocity limits come from the description.',
        range=(0.001, 10000.0),
    )
    max_jerk: tuple[float, ...] = parameter(
        PANDA_MAX_JERK,
        'Jerk limit of each arm joint, rad/s^3, for the checks of the 1 kHz command (Panda '
        'datasheet).',
        range=(0.001, 1.0e7),
    )


@dataclass(frozen=True)
class SimArmParameters:
    """Every parameter of the simulated arm."""

    joints: tuple[str, ...] = parameter(PANDA_ARM_JOINTS, 'Joints of the arm controller.')
    initial_positions: tuple[float, ...] = parameter(
        PANDA_READY, 'Start positions of the joints, rad.', range=POSITIONS
    )
    controller: str = parameter('joint_trajectory_controller', 'Controller name (topic namespace).')
    allow_partial_joints_goal: bool = parameter(
        False, 'JTC: accept trajectories naming some of the joints.'
    )
    allow_nonzero_velocity_at_trajectory_end: bool = parameter(
        False, 'JTC: accept trajectories whose last point moves.'
    )
    joint_states_topic: str = parameter('joint_states', 'sensor_msgs/JointState output.')
    rate_hz: float = parameter(100.0, 'Update and joint_states rate, Hz.', range=(0.1, 10000.0))
    gripper: SimGripperParameters = field(default_factory=SimGripperParameters)
    robot_description_file: str = parameter(
        '', 'URDF of the arm; empty: the packaged Franka Panda.'
    )
    publish_robot_description: bool = parameter(
        True,
        'Publish the description on robot_description (transient local), as '
        'robot_state_publisher does.',
    )
    publish_tf: bool = parameter(
        True,
        "Publish the description's link frames on /tf (moving joints, with each joint state) "
        'and /tf_static (fixed joints), as robot_state_publisher does; needs tf2_msgs.',
    )
    table: TableParameters = field(default_factory=TableParameters)
    limits: CommandLimitParameters = field(default_factory=CommandLimitParameters)
    action_groups: str = parameter(
        '',
        'Serve every group of this groups file or shipped embodiment tag (agibot, yam) '
        'instead of the single arm and gripper above; joints start at initial_positions when '
        'it has one value per trajectory joint, else at 0, grippers at their open position.',
    )
    base_timeout: float = parameter(
        0.5, 'A base stops when no Twist came for this long, s.', range=(0.0, 3600.0)
    )
