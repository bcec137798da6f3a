# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every check of the policy node's parameters against each other, in one place.

A parameter alone is checked by its declaration (type, range, choices:
:meth:`~dreamzero_ros.parameter_schema.ParameterSpec.check`); what depends on several is checked
here, as joint_trajectory_controller's validators check its generated parameters:
:func:`validate` when the settings are built (each error a ``ValueError`` naming the parameters),
:func:`check_policy` once the policy is loaded and its cameras, joints and action columns are
known.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dreamzero_ros.core.config.node_parameters import PER_ARM_JOINT_LIMITS
from dreamzero_ros.core.control.task_runner import prompt_too_long

if TYPE_CHECKING:
    from dreamzero_ros.core.config.node_settings import NodeSettings
    from dreamzero_ros.core.robot.action_groups import GroupLayout
    from dreamzero_ros.core.robot.robot_layout import RobotLayout

#: The core configurations a single arm's settings must build (each checks the values it is
#: built from: limits ordered, clip offsets ascending, gripper hysteresis, envelope boxes).
SINGLE_ARM_CONFIGURATIONS = ('loop', 'cache', 'gripper_config', 'envelope_config')
#: Those of a robot with action groups (whose limit widths follow the policy's groups).
GROUP_CONFIGURATIONS = ('loop', 'cache')


def validate(settings: NodeSettings) -> None:
    """Raise ``ValueError`` unless the parameters of ``settings`` agree with each other."""
    _check_cameras(settings)
    if not settings.gripper_joint_name and settings.gripper.interface != 'none':
        raise ValueError(
            f'gripper.interface {settings.gripper.interface!r} needs a gripper_joint_name'
        )
    if (settings.image_height == 0) != (settings.image_width == 0):
        raise ValueError(
            f'image_height/image_width must both be > 0, or both 0 (any): '
            f'{settings.image_height}, {settings.image_width}'
        )
    if len(settings.prompt) > settings.max_prompt_length:
        raise ValueError(prompt_too_long('prompt', settings.prompt, settings.max_prompt_length))
    _check_camera_timing(settings)
    if len(settings.gripper_range) != 2:
        raise ValueError(f'gripper_range needs 2 values, got {list(settings.gripper_range)}')
    _configurations(settings, ('group_specs',), 'action_groups')
    widths = {name: len(getattr(settings.safety, name)) for name in PER_ARM_JOINT_LIMITS}
    if len(set(widths.values())) > 1:
        raise ValueError(
            'safety.' + '/'.join(PER_ARM_JOINT_LIMITS) + ' need one value per arm joint '
            f'each, got {", ".join(f"{n} {w}" for n, w in widths.items())}'
        )
    if settings.action_groups:  # the limits' widths are checked against the policy's groups
        _configurations(settings, GROUP_CONFIGURATIONS)
        return
    _check_single_arm(settings)


def _check_cameras(settings: NodeSettings) -> None:
    keys, topics = settings.camera_keys, settings.camera_topics
    if len(topics) != len(keys) or not all(topics):
        raise ValueError(
            f'camera_topics needs a topic name for each of camera_keys {list(keys)}, '
            f'got {list(topics)}'
        )
    if not keys or len(set(keys)) != len(keys) or not all(keys):
        raise ValueError(f'camera_keys must be distinct and non-empty, got {list(keys)}')


def _check_camera_timing(settings: NodeSettings) -> None:
    rates = settings.camera_rates_hz
    if len(rates) not in (1, len(settings.camera_topics)):
        raise ValueError(
            f'camera_rates_hz needs one value, or one per camera_topics entry '
            f'({len(settings.camera_topics)}), got {list(rates)}'
        )
    period = 1.0 / min(rates)
    if settings.max_skew and settings.max_skew <= period:
        raise ValueError(
            f'max_skew {settings.max_skew} s is not longer than one period of the slowest camera '
            f'({min(rates):g} Hz: {period:.3g} s): its frames would be refused as skewed; '
            f'set max_skew > {period:.3g}, or 0 for {settings.default_skew:.3g} s'
        )
    if settings.max_age <= period:
        raise ValueError(
            f'max_age {settings.max_age} s is not longer than one period of the slowest camera '
            f'({min(rates):g} Hz: {period:.3g} s): its frames would be refused as stale'
        )
    fastest = max(rates)
    needed = math.ceil(fastest / settings.control_rate_hz) + 1
    if settings.camera_qos.depth < needed:
        raise ValueError(
            f'camera_qos.depth {settings.camera_qos.depth} holds fewer frames than a '
            f'{fastest:g} Hz camera sends between two reads at control_rate_hz '
            f'{settings.control_rate_hz:g}, plus one: set it >= {needed}'
        )


def _check_single_arm(settings: NodeSettings) -> None:
    """The single arm's limits: one per arm joint, one per command column (gripper included)."""
    arm = len(settings.arm_joint_names)
    if settings.robot_description.source == 'file' and not settings.robot_description.file:
        raise ValueError('robot_description.source file needs robot_description.file')
    for name in PER_ARM_JOINT_LIMITS:
        if len(getattr(settings.safety, name)) != arm:
            raise ValueError(
                f'safety.{name} needs one value per arm joint ({arm}), got '
                f'{list(getattr(settings.safety, name))}'
            )
    limits = _configurations(settings, SINGLE_ARM_CONFIGURATIONS)['loop'].limits
    columns = len(settings.command_joint_names)
    if limits.lower.shape != (columns,):
        raise ValueError(
            f'safety limits need {columns} values (the {arm} arm joints'
            f'{" and the gripper" if settings.gripper_joint_name else ""}), got '
            f'{limits.lower.shape[0]}'
        )


def _configurations(
    settings: NodeSettings, names: tuple[str, ...], what: str = 'invalid parameters'
) -> dict[str, Any]:
    """The core configurations ``names`` built from ``settings`` (each checks its values).

    Raises:
        ValueError: ``<what>: <the first configuration's error>``.

    """
    try:
        return {name: getattr(settings, name) for name in names}
    except ValueError as error:
        raise ValueError(f'{what}: {error}') from error


def check_policy(settings: NodeSettings, layout: RobotLayout) -> None:
    """Raise ``ValueError`` unless ``settings`` can drive a policy of ``layout``."""
    if settings.action_groups:  # the groups name the joints: they must fit first
        groups = _fitted_groups(settings, layout)
        arm_joints, grippers = groups.arm_joints, [g[0] for g in groups.grippers]
    else:
        cache = settings.cache
        arm_joints, grippers = cache.arm_joints, [g[0] for g in cache.grippers]
    source = 'action_groups' if settings.action_groups else 'arm_joint_names'
    problems = layout.mismatches(settings.camera_keys, arm_joints, grippers, source)
    if problems:
        raise ValueError('the parameters do not fit the policy: ' + '; '.join(problems))
    groups = _fitted_groups(settings, layout)
    width, arm = layout.command_width, len(layout.arm_columns)
    limits, motion = settings.loop.limits, settings.loop.motion
    if limits.lower.shape != (width,):
        problems.append(
            f'safety.joint_lower/joint_upper/max_step_delta need {width} values (the '
            f'command columns {groups.command_names}), got {limits.lower.shape[0]}'
        )
    if len(motion.max_velocity) != arm:
        problems.append(
            'safety.' + '/'.join(PER_ARM_JOINT_LIMITS) + f' need one value per arm joint ({arm}), '
            f'got {len(motion.max_velocity)}'
        )
    if problems:
        raise ValueError('the parameters do not fit the policy: ' + '; '.join(problems))


def _fitted_groups(settings: NodeSettings, layout: RobotLayout) -> GroupLayout:
    try:
        return settings.group_layout(layout)
    except ValueError as error:
        raise ValueError(f'the action groups do not fit the policy: {error}') from error
