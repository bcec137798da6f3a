"""Topic names and joint names that replay reads and writes, with the node's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamzero_ros.policy_types import DROID_CAMERAS

#: Franka arm joints in DROID order, then the gripper joint.
FRANKA_ARM_JOINTS: tuple[str, ...] = tuple(f'panda_joint{i}' for i in range(1, 8))
FRANKA_GRIPPER_JOINT = 'panda_gripper'

IMAGE_TYPES = ('sensor_msgs/msg/Image', 'sensor_msgs/msg/CompressedImage')
JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
TRAJECTORY_TYPE = 'trajectory_msgs/msg/JointTrajectory'
#: Types a command topic may have: position commands as JointState or as trajectories.
COMMAND_TYPES = (JOINT_STATE_TYPE, TRAJECTORY_TYPE)


@dataclass(frozen=True)
class ReplayTopics:
    """Where the observations and the robot's motion are in a bag.

    Attributes:
        cameras: policy camera name -> image topic.
        joint_states: sensor_msgs/JointState topic of the measured joints.
        command: optional topic of the commands the robot executed (JointState or
            JointTrajectory); the reference for evaluation where given.
        arm_joints: the 7 arm joint names in DROID order.
        gripper_joint: the gripper joint name.

    """

    cameras: dict[str, str] = field(
        default_factory=lambda: {camera: f'/{camera}' for camera in DROID_CAMERAS}
    )
    joint_states: str = '/joint_states'
    command: str | None = None
    arm_joints: tuple[str, ...] = FRANKA_ARM_JOINTS
    gripper_joint: str = FRANKA_GRIPPER_JOINT

    @property
    def joint_names(self) -> list[str]:
        """Arm joints then the gripper: the column order of actions and references."""
        return [*self.arm_joints, self.gripper_joint]
