# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The arm's limits in force: from the robot description, tightened by hand-typed parameters.

:func:`resolve_arm_limits` decides each bound of each arm joint (position, velocity,
acceleration, jerk). Where the description gives the bound, it applies, unless the parameter is
hand-typed (differs from its built-in default), which may only tighten it: a hand-typed bound
wider than the description's is refused, naming the joint and the bound. Where the description
has no such bound (a URDF carries no acceleration or jerk; a continuous joint no position
limits) the parameter applies. :func:`with_arm_limits` puts the result into the control loop's
configuration. Nothing here imports ROS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import math

import numpy as np

from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.robot.robot_description import JointLimits, RobotDescription, is_wider

#: Slack of the "wider than the description" test, for values typed with fewer decimals.
_SLACK = 1e-9


@dataclass(frozen=True)
class ArmLimits:
    """One value per arm joint of each bound; ``max_jerk`` None: no jerk limit."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_velocity: tuple[float, ...]
    max_acceleration: tuple[float, ...]
    max_jerk: tuple[float, ...] | None = None


@dataclass(frozen=True)
class ResolvedLimits:
    """Outcome of :func:`resolve_arm_limits`: the limits and where each bound came from.

    Attributes:
        limits: the arm limits in force.
        from_description: ``joint.bound`` names taken from the description.
        tightened: ``joint.bound`` names a hand-typed parameter tightened.

    """

    limits: ArmLimits
    from_description: tuple[str, ...] = ()
    tightened: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for the log."""
        return (
            f'{len(self.from_description)} bounds from the description, '
            f'{len(self.tightened)} tightened by parameters'
            + (f' ({", ".join(self.tightened)})' if self.tightened else '')
        )


#: JointLimits field (and ArmLimits field) -> the parameter that sets it.
_PARAMETERS = {
    'lower': 'safety.joint_lower',
    'upper': 'safety.joint_upper',
    'max_velocity': 'safety.max_velocity',
    'max_acceleration': 'safety.max_acceleration',
    'max_jerk': 'safety.max_jerk',
}


def resolve_arm_limits(
    description: RobotDescription,
    joint_names: tuple[str, ...] | list[str],
    configured: ArmLimits,
    defaults: ArmLimits,
) -> ResolvedLimits:
    """The limits of ``joint_names`` from ``description``, tightened by hand-typed parameters.

    A configured value is hand-typed when it differs from its default.

    Raises:
        ValueError: the description lacks a joint or its limits, or a hand-typed bound is wider
            than the description's (naming parameter, joint and both values).

    """
    joints = description.limits_of(joint_names)
    result: dict[str, list[float] | None] = {}
    taken: list[str] = []
    tightened: list[str] = []
    for bound, parameter in _PARAMETERS.items():
        values, typed_values = getattr(configured, bound), getattr(defaults, bound)
        if values is None and all(getattr(j, bound) is None for j in joints):
            result[bound] = None
            continue
        column: list[float] = []
        for index, (name, joint) in enumerate(zip(joint_names, joints, strict=True)):
            value = None if values is None else float(values[index])
            default = None if typed_values is None else float(typed_values[index])
            limit = _description_bound(joint, bound)
            if limit is None:
                if value is None:
                    raise ValueError(
                        f'joint {name!r}: {parameter} is empty and the robot description '
                        f'gives no {bound}'
                    )
                column.append(value)
                continue
            if value is None or value == default:
                column.append(limit)
                taken.append(f'{name}.{bound}')
                continue
            if is_wider(bound, value, limit) and abs(value - limit) > _SLACK * max(1.0, abs(limit)):
                raise ValueError(
                    f'{parameter}[{index}] = {value} for joint {name!r} is wider than the robot '
                    f"description's {bound} {limit}: a parameter may only tighten it"
                )
            column.append(value)
            if value != limit:
                tightened.append(f'{name}.{bound}')
        result[bound] = column
    limits = ArmLimits(
        tuple(result['lower']),
        tuple(result['upper']),
        tuple(result['max_velocity']),
        tuple(result['max_acceleration']),
        None if result['max_jerk'] is None else tuple(result['max_jerk']),
    )
    return ResolvedLimits(limits, tuple(taken), tuple(tightened))


def _description_bound(joint: JointLimits, attribute: str) -> float | None:
    value = getattr(joint, attribute)
    return None if value is None or math.isinf(value) else float(value)


def with_arm_limits(loop: LoopConfig, limits: ArmLimits) -> LoopConfig:
    """``loop`` with ``limits`` on its arm columns (the gripper column keeps its limits).

    A braking deceleration above the acceleration limit is lowered onto it.
    """
    arm = loop.motion.arm_joints
    if len(limits.lower) != arm:
        raise ValueError(f'{len(limits.lower)} arm limits for {arm} arm joints')
    lower, upper = loop.limits.lower.copy(), loop.limits.upper.copy()
    lower[:arm], upper[:arm] = limits.lower, limits.upper
    acceleration = np.asarray(limits.max_acceleration, dtype=np.float64)
    motion = replace(
        loop.motion,
        max_velocity=np.asarray(limits.max_velocity, dtype=np.float64),
        max_acceleration=acceleration,
        max_jerk=None if limits.max_jerk is None else np.asarray(limits.max_jerk, np.float64),
        stop_deceleration=np.minimum(loop.motion.stop_deceleration, acceleration),
    )
    return replace(loop, limits=replace(loop.limits, lower=lower, upper=upper), motion=motion)
