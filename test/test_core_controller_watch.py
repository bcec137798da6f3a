# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Which node is a group's controller, and when commanding must stop (ROS-free)."""

import math

import pytest

from dreamzero_ros.core.control.controller_watch import ControllerWatch, odometry_problem
from dreamzero_ros.core.robot.action_groups import groups_from_mapping, load_groups
from dreamzero_ros.core.robot.controller_identity import (
    ANY_SUBSCRIBER,
    claim_of,
    controller_node,
    identify,
)
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR


def _resolve(name: str) -> str:
    return name if name.startswith('/') else f'/{name}'


def _claims(tag: str) -> dict:
    specs = load_groups(tag, EMBODIMENTS_DIR)
    claims = (claim_of(spec) for spec in specs)
    return {c.group: c.resolved(_resolve) for c in claims if c is not None}


def test_controller_names_follow_ros2_controllers():
    assert controller_node('left_arm_controller/joint_trajectory') == 'left_arm_controller'
    assert controller_node('/robot/arm_controller/follow_joint_trajectory') == (
        '/robot/arm_controller'
    )
    assert controller_node('cmd_vel') == '' and controller_node('/cmd_vel') == ''
    assert controller_node('~/joint_trajectory') == ''


def test_the_shipped_agibot_groups_name_their_controllers():
    claims = _claims('agibot')
    arm = claims['left_arm']
    assert (arm.node, arm.state_topic, arm.action) == (
        '/left_arm_controller',
        '/left_arm_controller/controller_state',
        False,
    )
    effector = claims['left_effector']
    assert effector.action and effector.node == '/left_gripper_controller'
    base = claims['base']  # cmd_vel has no namespace: the base is who also publishes odom
    assert (base.node, base.state_topic) == ('', '/odom')


def test_a_recorder_alone_on_the_command_topics_is_no_controller():
    claims = _claims('agibot')
    arm = identify(claims['left_arm'], ['/recorder'])
    assert not arm.found
    assert arm.problem == (
        'subscribed by /recorder, none of them /left_arm_controller or a publisher of '
        '/left_arm_controller/controller_state'
    )
    assert str(arm).startswith('left_arm (joint_trajectory left_arm_controller/joint_trajectory)')
    base = identify(claims['base'], ['/recorder'], state_publishers=['/base_driver'])
    assert not base.found and 'a publisher of /odom' in base.problem
    assert not identify(claims['left_effector'], servers=[]).found


def test_the_controller_is_found_by_name_by_its_state_topic_or_as_the_action_server():
    claims = _claims('agibot')
    by_name = identify(claims['head'], ['/recorder', '/head_controller'])
    assert str(by_name) == 'head: /head_controller (node name)'
    by_state = identify(
        claims['head'], ['/recorder', '/my_head'], ['/my_head', '/head_controller_spy']
    )
    assert str(by_state) == 'head: /my_head (publishes /head_controller/controller_state)'
    base = identify(claims['base'], ['/recorder', '/base_driver'], ['/base_driver'])
    assert str(base) == 'base: /base_driver (publishes /odom)'
    server = identify(claims['left_effector'], servers=['/left_gripper_controller'])
    assert str(server) == 'left_effector: /left_gripper_controller (action server)'


def test_a_named_controller_must_be_the_one_serving_or_subscribing():
    (spec,) = groups_from_mapping(
        [
            {
                'name': 'arm',
                'output': 'follow_joint_trajectory',
                'target': 'arm/follow_joint_trajectory',
                'joints': ['j1'],
                'controller': 'fr3_arm_controller',
            }
        ]
    )
    claim = claim_of(spec).resolved(_resolve)
    assert claim.named and claim.node == '/fr3_arm_controller'
    wrong = identify(claim, servers=['/arm'])
    assert not wrong.found and wrong.problem == 'served by /arm, not by /fr3_arm_controller'
    assert identify(claim, servers=['/arm', '/fr3_arm_controller']).found


def test_a_plain_topic_without_a_named_controller_takes_any_subscriber_and_says_so():
    (spec,) = groups_from_mapping(
        [{'name': 'g', 'output': 'gripper', 'target': 'grip', 'joint': 'f', 'interface': 'float64'}]
    )
    finding = identify(claim_of(spec).resolved(_resolve), ['/anything'])
    assert finding.found and finding.how == ANY_SUBSCRIBER
    (none,) = groups_from_mapping(
        [{'name': 'g', 'output': 'gripper', 'joint': 'f', 'interface': 'none'}]
    )
    assert claim_of(none) is None


def _watch(timeout=0.5):
    claims = _claims('agibot')
    names = {'head': ('idx11_head_joint1', 'idx12_head_joint2'), 'left_arm': ('l1',)}
    return claims, ControllerWatch(claims.values(), names, timeout)


def _all_found(claims, **overrides):
    found = {g: identify(c, ['/x'], ['/x'], ['/x']) for g, c in claims.items()}
    found.update(overrides)
    return found


def test_a_controller_seen_and_then_gone_is_a_fault_that_latches_until_restart():
    claims, watch = _watch()
    assert watch.check(0.0, _all_found(claims)) is None
    gone = identify(claims['head'], ['/recorder'])
    fault = watch.check(0.1, _all_found(claims, head=gone))
    assert fault.group == 'head' and fault.reason.startswith('controller gone (subscribed by')
    assert watch.check(0.2, _all_found(claims, head=gone)) is None  # reported once
    assert watch.fault == fault
    watch.restart(0.25)
    assert watch.fault is None
    # never seen since the restart (controllers still coming up): not a fault
    assert watch.check(0.3, _all_found(claims, head=gone)) is None


def test_joint_states_that_stop_are_a_fault_naming_the_group():
    claims, watch = _watch(timeout=0.5)
    watch.note_joint_state(['idx11_head_joint1'], 0.0)
    # a group whose joints were not all seen yet is not watched (the input is refused anyway)
    assert watch.check(2.0, _all_found(claims)) is None
    watch.note_joint_state(['idx12_head_joint2', 'idx11_head_joint1', 'l1'], 2.0)
    watch.note_joint_state(['l1'], 2.4)
    assert watch.check(2.45, _all_found(claims)) is None
    fault = watch.check(2.6, _all_found(claims))
    assert (fault.group, fault.reason) == (
        'head',
        'no joint states for 0.60 s (controller_watch.state_timeout 0.5 s)',
    )
    # enable names it; once enabled, the stopped group has state_timeout to come back
    assert watch.state_problems(10.0) == [
        'head: no joint states for 8.00 s (controller_watch.state_timeout 0.5 s)',
        'left_arm: no joint states for 7.60 s (controller_watch.state_timeout 0.5 s)',
    ]
    watch.restart(10.0)
    watch.note_joint_state(['l1'], 10.4)
    assert watch.check(10.45, _all_found(claims)) is None
    assert str(watch.check(10.55, _all_found(claims))).startswith('head: no joint states for 8.55')


def test_odometry_refused_is_counted_and_a_fault_and_stopped_odometry_too():
    claims, watch = _watch(timeout=0.5)
    watch.note_state('base', 0.0)
    assert watch.check(0.1, _all_found(claims)) is None
    assert str(watch.check(0.7, _all_found(claims))) == (
        'base: no odometry for 0.70 s (controller_watch.state_timeout 0.5 s)'
    )
    watch.restart(0.8)
    watch.note_state('base', 1.0, 'linear.x is nan')
    assert watch.states_refused == 1 and watch.last_state_refusal == 'base: linear.x is nan'
    assert watch.state_problems() == ['base: linear.x is nan']
    assert str(watch.check(1.0, _all_found(claims))) == 'base: state refused: linear.x is nan'
    watch.restart(1.05)
    watch.note_state('base', 1.1)
    assert watch.state_problems() == [] and watch.check(1.2, _all_found(claims)) is None


@pytest.mark.parametrize(
    ('value', 'problem'),
    [
        (math.nan, 'linear.x is nan'),
        (math.inf, 'linear.x is inf'),
        (-math.inf, 'linear.x is -inf'),
        (1e308, 'linear.x is 1e+308, beyond [-0.6, 0.6]'),
        (0.61, 'linear.x is 0.61, beyond [-0.6, 0.6]'),
    ],
)
def test_odometry_problem_refuses_non_finite_and_absurd_speeds(value, problem):
    assert odometry_problem(['linear.x', 'angular.z'], [value, 0.0], [-0.2, -0.5], [0.2, 0.5]) == (
        problem
    )


def test_odometry_problem_takes_a_base_pushed_past_its_limits():
    assert odometry_problem(['linear.x', 'angular.z'], [0.5, -1.4], [-0.2, -0.5], [0.2, 0.5]) == ''


def test_a_subscriber_of_another_message_type_is_no_controller():
    claims = _claims('agibot')
    assert claims['left_arm'].message_type == 'trajectory_msgs/msg/JointTrajectory'
    assert claims['base'].message_type == 'geometry_msgs/msg/Twist'
    finding = identify(
        claims['left_arm'], [], other_types=['/left_arm_controller (std_msgs/msg/Float64)']
    )
    assert not finding.found and finding.problem == (
        'subscribed only with another type than trajectory_msgs/msg/JointTrajectory: '
        '/left_arm_controller (std_msgs/msg/Float64)'
    )
