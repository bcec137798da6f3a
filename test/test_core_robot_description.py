# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Joint limits from a URDF and a MoveIt-style joint_limits.yaml, and the parameters over them."""

import math

import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.control.joint_limits import ArmLimits, resolve_arm_limits, with_arm_limits
from dreamzero_ros.core.robot.panda import PANDA_MAX_ACCELERATION, PANDA_MAX_VELOCITY
from dreamzero_ros.core.robot.robot_description import RobotDescription

LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
ARM = tuple(f'panda_joint{i}' for i in range(1, 8))


def panda_urdf(upper=UPPER, velocity=PANDA_MAX_VELOCITY, extra=''):
    """A Panda-like URDF: 7 revolute joints with the Panda's limits, a hand, a mimic finger."""
    joints = []
    for i in range(7):
        joints.append(
            f'<joint name="panda_joint{i + 1}" type="revolute"><parent link="l{i}"/>'
            f'<child link="l{i + 1}"/><axis xyz="0 0 1"/><limit effort="87" '
            f'lower="{LOWER[i]}" upper="{upper[i]}" velocity="{velocity[i]}"/></joint>'
        )
    links = ''.join(f'<link name="l{i}"/>' for i in range(8))
    fingers = (
        '<link name="f1"/><link name="f2"/><link name="hand"/>'
        '<joint name="panda_hand_joint" type="fixed"><parent link="l7"/><child link="hand"/>'
        '</joint>'
        '<joint name="panda_finger_joint1" type="prismatic"><parent link="hand"/>'
        '<child link="f1"/><limit effort="20" lower="0.0" upper="0.04" velocity="0.2"/></joint>'
        '<joint name="panda_finger_joint2" type="prismatic"><parent link="hand"/>'
        '<child link="f2"/><limit effort="20" lower="0.0" upper="0.04" velocity="0.2"/>'
        '<mimic joint="panda_finger_joint1"/></joint>'
    )
    return (
        f'<?xml version="1.0"?><robot name="panda">{links}{"".join(joints)}{fingers}{extra}</robot>'
    )


MOVEIT_LIMITS = """
default_velocity_scaling_factor: 0.1
joint_limits:
""" + ''.join(
    f"""  panda_joint{i + 1}:
    has_velocity_limits: true
    max_velocity: {PANDA_MAX_VELOCITY[i]}
    has_acceleration_limits: true
    max_acceleration: {PANDA_MAX_ACCELERATION[i] / 4}
    has_jerk_limits: false
    max_jerk: 1.0
"""
    for i in range(7)
)


def test_urdf_limits_are_read_per_joint_and_mimic_and_fixed_joints_handled():
    description = RobotDescription.parse(panda_urdf(), source='test')
    assert description.name == 'panda'
    joint = description.joints['panda_joint4']
    assert (joint.lower, joint.upper, joint.max_velocity) == (-3.0718, -0.0698, 2.175)
    assert joint.max_acceleration is None and joint.max_jerk is None
    assert description.joints['panda_finger_joint2'].upper == 0.04  # mimic: its own limits
    assert 'panda_hand_joint' not in description.joints
    continuous = panda_urdf(
        extra='<link name="w"/><joint name="wheel" type="continuous"><parent link="l0"/>'
        '<child link="w"/><limit effort="1" velocity="3.0"/></joint>'
    )
    wheel = RobotDescription.parse(continuous).joints['wheel']
    assert wheel.lower == -math.inf and wheel.upper == math.inf and wheel.max_velocity == 3.0


def test_joint_limits_yaml_adds_accelerations_and_may_only_tighten():
    description = RobotDescription.parse(panda_urdf(), MOVEIT_LIMITS)
    assert description.joints['panda_joint2'].max_acceleration == 7.5 / 4
    assert description.joints['panda_joint2'].max_jerk is None  # has_jerk_limits: false
    wider = MOVEIT_LIMITS.replace('max_velocity: 2.61', 'max_velocity: 3.0', 1)
    with pytest.raises(ValueError, match=r"panda_joint5.max_velocity 3.0 is wider than the URDF's"):
        RobotDescription.parse(panda_urdf(), wider)
    with pytest.raises(ValueError, match='names joint .nope., which the URDF does not limit'):
        RobotDescription.parse(panda_urdf(), 'joint_limits: {nope: {has_velocity_limits: true}}')
    with pytest.raises(ValueError, match='does not parse'):
        RobotDescription.parse(panda_urdf(), 'joint_limits: [')


@pytest.mark.parametrize(
    ('urdf', 'message'),
    [
        ('<robot name="x"><joint', 'does not parse as XML'),
        ('<sdf/>', 'root element is <sdf>, not <robot>'),
        (panda_urdf().replace('velocity="2.175"', 'velocity="fast"', 1), 'is not a number'),
        (panda_urdf().replace('velocity="2.175"', 'velocity="0"', 1), 'needs <limit velocity> > 0'),
    ],
)
def test_a_bad_description_is_a_clear_error(urdf, message):
    with pytest.raises(ValueError, match=message):
        RobotDescription.parse(urdf)


def test_missing_joints_and_joints_without_limits_are_named():
    description = RobotDescription.parse(panda_urdf(), source='/robot_description')
    with pytest.raises(ValueError, match=r"has no joint 'panda_joint8'"):
        description.limits_of([*ARM[:6], 'panda_joint8'])
    with pytest.raises(ValueError, match=r"joint 'panda_hand_joint' has no limits"):
        description.limits_of(['panda_hand_joint'])


def _settings(**values):
    return build_settings({'engine.checkpoint': 'c', **values})


def test_the_description_sets_the_limits_and_typed_values_only_tighten():
    tighter_upper = (*UPPER[:6], 2.5)  # the description is tighter than the defaults on joint 7
    description = RobotDescription.parse(panda_urdf(upper=tighter_upper), MOVEIT_LIMITS)
    loop, line = _settings().loop_for(description)
    assert loop.limits.upper[6] == 2.5
    np.testing.assert_allclose(loop.motion.max_acceleration, np.array(PANDA_MAX_ACCELERATION) / 4)
    # braking never exceeds the acceleration limit
    assert np.all(loop.motion.stop_deceleration <= loop.motion.max_acceleration)
    assert 'from the description' in line
    # a typed tightening applies and is reported
    typed = _settings(**{'safety.max_velocity': [1.0] * 7})
    loop, line = typed.loop_for(description)
    np.testing.assert_allclose(loop.motion.max_velocity, 1.0)
    assert 'panda_joint1.max_velocity' in line
    # a typed bound wider than the description is refused, naming joint and bound
    wide = _settings(**{'safety.joint_upper': [*UPPER[:6], 2.8, 1.0]})
    with pytest.raises(
        ValueError,
        match=r"safety.joint_upper\[6\] = 2.8 for joint 'panda_joint7' "
        r"is wider than the robot description's upper 2.5",
    ):
        wide.loop_for(description)
    fast = _settings(**{'safety.max_acceleration': [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 19.0]})
    # joint 1's value is the default (not typed): the description's applies; joint 7's is typed
    with pytest.raises(ValueError, match=r"max_acceleration\[6\] = 19.0 for joint 'panda_joint7'"):
        fast.loop_for(description)
    # without a description: the parameters as typed
    settings = _settings()
    loop, line = settings.loop_for(None)
    assert loop is settings.loop and loop.limits.upper[6] == UPPER[6]
    assert 'no robot description' in line


def test_a_configured_joint_the_description_lacks_is_refused():
    description = RobotDescription.parse(panda_urdf())
    settings = _settings(**{'arm_joint_names': [*ARM[:6], 'fr3_joint7']})
    with pytest.raises(ValueError, match=r"has no joint 'fr3_joint7'"):
        settings.loop_for(description)


def test_a_description_without_accelerations_keeps_the_parameters():
    description = RobotDescription.parse(panda_urdf())
    configured = ArmLimits(LOWER, UPPER, PANDA_MAX_VELOCITY, PANDA_MAX_ACCELERATION, None)
    resolved = resolve_arm_limits(description, ARM, configured, configured)
    assert resolved.limits.max_acceleration == PANDA_MAX_ACCELERATION
    assert resolved.limits.max_jerk is None
    loop = with_arm_limits(_settings().loop, resolved.limits)
    assert loop.motion.max_jerk is None


def test_a_description_is_read_from_files(tmp_path):
    (tmp_path / 'panda.urdf').write_text(panda_urdf())
    (tmp_path / 'joint_limits.yaml').write_text(MOVEIT_LIMITS)
    description = RobotDescription.read(tmp_path / 'panda.urdf', tmp_path / 'joint_limits.yaml')
    assert description.source.endswith('panda.urdf') and description.urdf == panda_urdf()
    assert description.joints['panda_joint1'].max_acceleration == 15.0 / 4
    with pytest.raises(ValueError, match='robot description: .*No such file'):
        RobotDescription.read(tmp_path / 'missing.urdf')
    with pytest.raises(ValueError, match='robot_description.source file needs'):
        _settings(**{'robot_description.source': 'file'})
