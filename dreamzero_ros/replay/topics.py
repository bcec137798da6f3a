# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Topic names and joint names that replay reads and writes, taken from the node's parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.policy_types import DROID_CAMERAS

IMAGE_TYPE = 'sensor_msgs/msg/Image'
COMPRESSED_IMAGE_TYPE = 'sensor_msgs/msg/CompressedImage'
IMAGE_TYPES = (IMAGE_TYPE, COMPRESSED_IMAGE_TYPE)
JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
TRAJECTORY_TYPE = 'trajectory_msgs/msg/JointTrajectory'
#: Types a command topic may have: position commands as JointState or as trajectories.
COMMAND_TYPES = (JOINT_STATE_TYPE, TRAJECTORY_TYPE)
#: image_transport's topic suffix of compressed images.
COMPRESSED_SUFFIX = '/compressed'

_DEFAULTS = NodeSettings()


def absolute(name: str, namespace: str = '/') -> str:
    """Resolve a relative topic name in ``namespace`` (``~`` names are the node's own)."""
    if name.startswith('/'):
        return name
    return namespace.rstrip('/') + '/' + name


@dataclass(frozen=True)
class ReplayTopics:
    """Where the observations and the robot's motion are in a bag.

    Attributes:
        cameras: policy camera name -> base image topic (absolute).
        image_transport: ``raw`` (sensor_msgs/Image on the base topic), ``compressed``
            (CompressedImage on ``<base>/compressed``), or ``auto``: whichever the bag holds.
        joint_states: sensor_msgs/JointState topic of the measured joints.
        command: optional topic of the commands the robot executed (JointState or
            JointTrajectory); the reference for evaluation where given.
        arm_joints: the arm joint names, in the policy's order (DROID: 7).
        gripper_joint: the gripper joint name; empty for a robot without one.

    """

    cameras: dict[str, str] = field(
        default_factory=lambda: dict(
            zip(DROID_CAMERAS, map(absolute, _DEFAULTS.camera_topics), strict=True)
        )
    )
    image_transport: str = 'auto'
    joint_states: str = absolute(_DEFAULTS.joint_states_topic)
    command: str | None = None
    arm_joints: tuple[str, ...] = _DEFAULTS.arm_joint_names
    gripper_joint: str = _DEFAULTS.gripper_joint_name

    @classmethod
    def from_settings(
        cls, settings: NodeSettings, command: str | None = None, transport: str | None = None
    ) -> ReplayTopics:
        """The topics of a node configured with ``settings`` (in the root namespace)."""
        return cls(
            cameras={camera: absolute(topic) for camera, topic in settings.cameras.items()},
            image_transport=transport or settings.image_transport,
            joint_states=absolute(settings.joint_states_topic),
            command=absolute(command) if command else None,
            arm_joints=settings.arm_joint_names,
            gripper_joint=settings.gripper_joint_name,
        )

    @property
    def joint_names(self) -> list[str]:
        """Arm joints then the gripper (if any): the column order of actions and references."""
        return (
            [*self.arm_joints, self.gripper_joint] if self.gripper_joint else list(self.arm_joints)
        )

    def image_topic(self, camera: str, compressed: bool) -> str:
        """The topic a camera's raw or compressed images are on."""
        base = self.cameras[camera]
        return base + COMPRESSED_SUFFIX if compressed else base
