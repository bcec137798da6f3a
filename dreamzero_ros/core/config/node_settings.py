# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's settings: its parameters, checked, and the core configurations built from them.

:class:`NodeSettings` is :class:`~dreamzero_ros.core.config.node_parameters.NodeParameters` (every
parameter, declared once) checked by :func:`~dreamzero_ros.core.config.node_validation.validate`
when it is made, with what the ROS-free core needs built from it: the observation cache's
configuration (:meth:`NodeSettings.cache_for`), the control loop's (:attr:`NodeSettings.loop`,
:meth:`NodeSettings.loop_for` with a robot description's limits), the action groups, the
gripper and the envelope. Nothing here imports ROS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import functools

import numpy as np

from dreamzero_ros.core.config.node_parameters import NodeParameters, SafetySettings
from dreamzero_ros.core.config.node_validation import validate
from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.control.joint_limits import ArmLimits, resolve_arm_limits, with_arm_limits
from dreamzero_ros.core.motion.chunk_scheduler import BlendConfig
from dreamzero_ros.core.motion.envelope import EnvelopeConfig
from dreamzero_ros.core.motion.safety import SafetyLimits
from dreamzero_ros.core.motion.trajectory import MotionConfig
from dreamzero_ros.core.observations.observation_cache import CacheConfig
from dreamzero_ros.core.robot.action_groups import (
    GroupLayout,
    GroupSpec,
    load_groups,
    resolve_groups,
    single_arm_groups,
)
from dreamzero_ros.core.robot.gripper import GripperConfig
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR

#: ``max_skew`` 0 means the larger of this, seconds, and SKEW_PERIODS periods of the slowest
#: camera: 0.2 s for cameras of 7.5 Hz and faster, 0.3 s at 5 Hz.
DEFAULT_MAX_SKEW = 0.2
SKEW_PERIODS = 1.5


@dataclass(frozen=True)
class NodeSettings(NodeParameters):
    """Every parameter of the policy node, checked and typed; read by attribute.

    Groups are nested settings (``settings.engine.checkpoint`` is the parameter
    ``engine.checkpoint``). Derived core configurations: :attr:`cache`, :attr:`loop`, ...

    Raises:
        ValueError: parameters that disagree
            (:func:`~dreamzero_ros.core.config.node_validation.validate`).

    """

    def __post_init__(self) -> None:
        validate(self)

    @property
    def skew_limit(self) -> float:
        """``max_skew``, or where it is 0 :attr:`default_skew`."""
        return self.max_skew or self.default_skew

    @property
    def default_skew(self) -> float:
        """The ``max_skew`` that 0 stands for, from ``camera_rates_hz``."""
        return max(DEFAULT_MAX_SKEW, SKEW_PERIODS / min(self.camera_rates_hz))

    @property
    def camera_rates(self) -> dict[str, float]:
        """Policy camera name -> expected frame rate, Hz."""
        rates = self.camera_rates_hz
        if len(rates) == 1:
            rates = rates * len(self.camera_keys)
        return dict(zip(self.camera_keys, rates, strict=True))

    @functools.cached_property
    def cache(self) -> CacheConfig:
        """The observation cache's configuration, before the policy is known.

        Frames keep their own size unless ``image_height``/``image_width`` say otherwise; see
        :meth:`cache_for` for the policy's resolutions.
        """
        return self.cache_for(None)

    @functools.cached_property
    def group_specs(self) -> tuple[GroupSpec, ...]:
        """The robot's action groups (``action_groups``, or the single arm's parameters)."""
        if self.action_groups:
            return load_groups(self.action_groups, EMBODIMENTS_DIR)
        gripper = self.gripper
        return single_arm_groups(
            self.arm_joint_names,
            self.trajectory_topic,
            self.gripper_joint_name,
            gripper.interface,
            gripper.command_name,
            self.gripper_config,
            gripper.max_effort,
            gripper.move_time,
        )

    def group_layout(self, layout: RobotLayout) -> GroupLayout:
        """The action groups placed on the command row of a policy of ``layout``."""
        return resolve_groups(
            self.group_specs,
            layout.action_keys,
            layout.action_dims,
            layout.arm_columns,
            layout.gripper_columns,
            layout.velocity_columns,
            self.joint_states_topic,
        )

    def cache_for(self, layout: RobotLayout | None) -> CacheConfig:
        """The observation cache's configuration for a policy of ``layout``.

        With ``image_height``/``image_width`` 0, each camera's frames are fitted to the
        policy's resolution of that camera.
        """
        cameras = tuple(self.camera_keys)
        sizes: tuple[tuple[int, int], ...] = ()
        if layout is not None and all(camera in layout.camera_sizes for camera in cameras):
            sizes = tuple(layout.camera_sizes[camera] for camera in cameras)
        arm_joints = self.arm_joint_names
        grippers = (
            ((self.gripper_joint_name, *self.gripper_range),) if self.gripper_joint_name else ()
        )
        if layout is not None:
            groups = self.group_layout(layout)
            arm_joints, grippers = groups.arm_joints, groups.grippers
        elif self.action_groups:
            specs = self.group_specs
            arm_joints = tuple(j for spec in specs if spec.output != 'gripper' for j in spec.joints)
            grippers = tuple(
                (spec.gripper_joint, spec.gripper.open_position, spec.gripper.closed_position)
                for spec in specs
                if spec.output == 'gripper'
            )
        first = grippers[0] if grippers else ('', *self.gripper_range)
        return CacheConfig(
            arm_joints=arm_joints,
            gripper_joint=first[0],
            more_grippers=tuple(grippers[1:]),
            cameras=cameras,
            max_age=self.max_age,
            max_skew=self.skew_limit,
            image_size=(self.image_height, self.image_width) if self.image_height else None,
            camera_sizes=sizes,
            image_fit=self.image_fit,
            gripper_range=(first[1], first[2]),
            clip_offsets=self.clip_offsets,
        )

    @functools.cached_property
    def loop(self) -> LoopConfig:
        """The control loop's configuration (safety limits, hand-over, pacing)."""
        safety, scheduler = self.safety, self.scheduler
        return LoopConfig(
            limits=SafetyLimits(
                lower=np.array(safety.joint_lower, dtype=np.float64),
                upper=np.array(safety.joint_upper, dtype=np.float64),
                max_step_delta=np.array(safety.max_step_delta, dtype=np.float64),
                delta_mode=safety.delta_mode,
                outside_limits=safety.outside_limits,
            ),
            blend=BlendConfig(scheduler.blend_min_steps, scheduler.blend_max_steps),
            min_replan_period=scheduler.min_replan_period,
            step_duration=scheduler.step_duration,
            motion=MotionConfig(
                max_velocity=np.array(safety.max_velocity, dtype=np.float64),
                stop_deceleration=np.minimum(safety.stop_deceleration, safety.max_acceleration),
                lead=self.trajectory.handover_lead,
                hold_time=1.0 / self.control_rate_hz,
                max_stretch=self.trajectory.max_stretch,
                max_acceleration=np.array(safety.max_acceleration, dtype=np.float64),
                max_jerk=np.array(safety.max_jerk, dtype=np.float64),
            ),
        )

    def loop_for(
        self, description: RobotDescription | None, arm_joints: Sequence[str] | None = None
    ) -> tuple[LoopConfig, str]:
        """The control loop's configuration with ``description``'s arm limits, and a log line.

        ``arm_joints``: the joint of each arm column (default: the single arm's
        ``arm_joint_names``, or every trajectory group's joints in the groups' order; the
        node passes the command row's order once the policy is loaded). Without a
        description: :attr:`loop` (the safety.* limits as typed).

        Raises:
            ValueError: the description lacks an arm joint or its limits, or a safety.* value
                that differs from its default is wider than the description's bound.

        """
        if description is None:
            return self.loop, 'no robot description: joint limits from the safety.* parameters'
        arm_joints = tuple(self.cache.arm_joints if arm_joints is None else arm_joints)
        arm = len(arm_joints)

        def limits(safety: SafetySettings) -> ArmLimits:
            def column(values: tuple[float, ...]) -> tuple[float, ...]:
                return tuple(values[i] if i < len(values) else float('nan') for i in range(arm))

            return ArmLimits(
                column(safety.joint_lower),
                column(safety.joint_upper),
                column(safety.max_velocity),
                column(safety.max_acceleration),
                column(safety.max_jerk),
            )

        resolved = resolve_arm_limits(
            description, arm_joints, limits(self.safety), limits(SafetySettings())
        )
        where = description.source or 'robot description'
        return (
            with_arm_limits(self.loop, resolved.limits),
            f'joint limits of {arm} arm joints from {where} ({description.name!r}): '
            + resolved.summary(),
        )

    @functools.cached_property
    def envelope_config(self) -> EnvelopeConfig:
        """The Cartesian envelope (``envelope.*``), checked whether enabled or not."""
        envelope = self.envelope
        boxes = np.asarray(envelope.keep_out, dtype=np.float64)
        if boxes.size % 6:
            raise ValueError(f'envelope.keep_out needs 6 values per box, got {boxes.size} values')
        try:
            return EnvelopeConfig(
                links=envelope.links,
                offsets=envelope.link_offsets,
                frame=envelope.frame,
                workspace_min=envelope.workspace_min,
                workspace_max=envelope.workspace_max,
                table_height=envelope.table_height,
                keep_out=tuple((box[:3], box[3:]) for box in boxes.reshape(-1, 6)),
                resolution=envelope.resolution,
            )
        except ValueError as error:
            raise ValueError(f'envelope: {error}') from None

    @functools.cached_property
    def gripper_config(self) -> GripperConfig:
        """The gripper command's position range and switching rule."""
        gripper = self.gripper
        return GripperConfig(
            open_position=self.gripper_range[0],
            closed_position=self.gripper_range[1],
            binary=gripper.binary,
            close_above=gripper.close_above,
            open_below=gripper.open_below,
            min_change=gripper.min_change,
        )

    @property
    def cameras(self) -> dict[str, str]:
        """Policy camera name -> image topic."""
        return dict(zip(self.camera_keys, self.camera_topics, strict=True))

    @property
    def command_joint_names(self) -> list[str]:
        """Names of the command columns: the arm joints, then the gripper (if any)."""
        gripper = [self.gripper_joint_name] if self.gripper_joint_name else []
        return [*self.arm_joint_names, *gripper]
