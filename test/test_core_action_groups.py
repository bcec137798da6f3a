# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Action groups: the shipped embodiments' controllers placed on their policies' action rows."""

import dataclasses

from embodiment_support import droid_embodiment, statistics
import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import build_settings, defaults
from dreamzero_ros.core.config.node_validation import check_policy
from dreamzero_ros.core.robot.action_groups import (
    GroupSpec,
    KeySlice,
    groups_from_mapping,
    load_groups,
    resolve_groups,
)
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.engine.checkpoint.data_files import read_yaml
from dreamzero_ros.engine.checkpoint.experiment_cfg import KNOWN_PROMPT_TEMPLATES
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR, Embodiment
from dreamzero_ros.errors import EmbodimentError


def shipped(tag: str) -> Embodiment:
    """A shipped embodiment file, with statistics made up for its keys."""
    data = dict(read_yaml(EMBODIMENTS_DIR / f'{tag}.yaml', EmbodimentError))
    data['statistics'] = {
        group: {
            entry['key']: statistics([-1.0] * entry['dim'], [1.0] * entry['dim']).to_mapping()
            for entry in data[group]
        }
        for group in ('state', 'action')
    }
    return Embodiment.from_mapping(data, tag)


def layout_of(embodiment: Embodiment) -> RobotLayout:
    e = embodiment
    return RobotLayout.from_metadata(
        {
            'cameras': list(e.camera_keys),
            'arm_dof': e.arm_state_dim,
            'gripper_dof': e.gripper_state_dim,
            'action_dim': e.action_dim,
            'gripper_columns': list(e.gripper_columns),
            'velocity_columns': list(e.velocity_columns),
            'action_keys': [k.key for k in e.action],
            'action_dims': [k.dim for k in e.action],
        }
    )


def place(specs, layout: RobotLayout):
    return resolve_groups(
        specs,
        layout.action_keys,
        layout.action_dims,
        layout.arm_columns,
        layout.gripper_columns,
        layout.velocity_columns,
    )


def test_agibot_effectors_are_grippers_and_its_velocity_no_arm_joint():
    agibot = shipped('agibot')
    assert agibot.prompt_template == KNOWN_PROMPT_TEMPLATES['agibot']
    assert (agibot.state_dim, agibot.action_dim) == (20, 22)
    assert (agibot.arm_state_dim, agibot.gripper_state_dim) == (18, 2)
    assert agibot.gripper_columns == (14, 15)
    assert agibot.velocity_columns == (20, 21)
    assert agibot.arm_columns == (*range(14), 16, 17, 18, 19)
    # without the flags, as a checkpoint's conf.yaml gives them, the names decide
    data = agibot.to_mapping()
    for entry in (*data['state'], *data['action']):
        del entry['gripper'], entry['velocity']
    again = Embodiment.from_mapping(data)
    assert (again.gripper_columns, again.velocity_columns) == ((14, 15), (20, 21))


def test_agibot_groups_give_every_controller_its_columns():
    layout = layout_of(shipped('agibot'))
    groups = place(load_groups('agibot', EMBODIMENTS_DIR), layout)
    names = [g.name for g in groups.groups]
    assert names == [
        'left_arm',
        'right_arm',
        'left_effector',
        'right_effector',
        'head',
        'waist',
        'base',
    ]
    columns = {g.name: g.columns for g in groups.groups}
    # command row: 18 arm columns (left, right, head, waist), 2 effectors, 2 velocities
    assert columns['left_arm'] == tuple(range(7))
    assert columns['right_arm'] == tuple(range(7, 14))
    assert columns['head'] == (14, 15) and columns['waist'] == (16, 17)
    assert columns['left_effector'] == (18,) and columns['right_effector'] == (19,)
    assert columns['base'] == (20, 21)
    assert len(groups.arm_joints) == 18 and groups.arm_joints[14] == 'idx11_head_joint1'
    assert [g[0] for g in groups.grippers] == ['left_effector_joint', 'right_effector_joint']
    assert groups.velocity_names == ('base/linear.x', 'base/angular.z')
    # the action row (policy order) reordered and sliced per group
    row = np.arange(22.0)[None]
    command = layout.command_rows(row)
    assert groups.of('twist')[0].rows(command).tolist() == [[20.0, 21.0]]
    assert groups.of('gripper')[0].rows(command).tolist() == [[14.0]]
    assert groups.groups[4].rows(command).tolist() == [[16.0, 17.0]]  # head_position


def test_yam_groups_interleaved_keys_and_all_relative():
    yam = shipped('yam')
    assert yam.prompt_template == KNOWN_PROMPT_TEMPLATES['yam']
    assert all(key.relative for key in yam.action)
    layout = layout_of(yam)
    groups = place(load_groups('yam', EMBODIMENTS_DIR), layout)
    columns = {g.name: g.columns for g in groups.groups}
    assert columns == {
        'left_arm': tuple(range(6)),
        'left_gripper': (12,),
        'right_arm': tuple(range(6, 12)),
        'right_gripper': (13,),
    }
    command = layout.command_rows(np.arange(14.0)[None])
    assert groups.groups[2].rows(command).tolist() == [list(range(7, 13))]
    assert groups.groups[3].rows(command).tolist() == [[13.0]]


def test_droid_file_groups_are_the_default_parameters_groups():
    settings = build_settings(defaults())
    from_file = load_groups('oxe_droid', EMBODIMENTS_DIR)
    strip = [dataclasses.replace(spec, keys=()) for spec in from_file]
    assert tuple(strip) == settings.group_specs
    layout = layout_of(droid_embodiment())
    by_file, by_parameters = place(from_file, layout), place(settings.group_specs, layout)
    assert by_file.arm_joints == by_parameters.arm_joints == settings.cache.arm_joints
    assert by_file.grippers == by_parameters.grippers == (('panda_gripper', 0.0, 1.0),)
    assert [g.columns for g in by_file.groups] == [tuple(range(7)), (7,)]


def test_a_mapping_leaving_a_column_unused_is_refused_naming_it():
    layout = layout_of(shipped('agibot'))
    specs = [s for s in load_groups('agibot', EMBODIMENTS_DIR) if s.name != 'base']
    with pytest.raises(ValueError, match=r'action column 20 \(robot_velocity\[0\]\) is sent to no'):
        place(specs, layout)
    # the robot has no base: output none keeps the columns planned, sent nowhere
    place([*specs, GroupSpec('base', 'none', (KeySlice('robot_velocity'),))], layout)


def test_a_joint_named_twice_or_a_column_taken_twice_is_refused():
    layout = layout_of(shipped('yam'))
    specs = list(load_groups('yam', EMBODIMENTS_DIR))
    specs[2] = dataclasses.replace(specs[2], joints=('left_joint1', *specs[2].joints[1:]))
    with pytest.raises(ValueError, match=r"joint 'left_joint1' is named twice"):
        place(specs, layout)
    specs = list(load_groups('yam', EMBODIMENTS_DIR))
    specs[0] = dataclasses.replace(
        specs[0], keys=(KeySlice('left_joint_pos', 0, 5), KeySlice('right_joint_pos', 0, 1))
    )
    with pytest.raises(ValueError, match=r'action column 7 \(right_joint_pos\[0\]\) is taken by'):
        place(specs, layout)


def test_outputs_take_only_columns_of_their_kind():
    layout = layout_of(shipped('agibot'))
    specs = list(load_groups('agibot', EMBODIMENTS_DIR))
    specs[-1] = dataclasses.replace(specs[-1], keys=(KeySlice('waist_position'),))
    specs[5] = dataclasses.replace(specs[5], keys=(KeySlice('robot_velocity'),))
    with pytest.raises(ValueError, match=r"action group 'waist': output joint_trajectory takes"):
        place(specs, layout)


def test_bad_group_entries_are_refused_naming_the_entry():
    with pytest.raises(ValueError, match=r'unknown key groups\[0\]\.joint_names'):
        groups_from_mapping([{'name': 'a', 'output': 'none', 'joint_names': []}])
    with pytest.raises(ValueError, match=r'groups\[0\] \(arm\).*needs joints'):
        groups_from_mapping([{'name': 'arm', 'output': 'joint_trajectory', 'target': 't'}])
    with pytest.raises(ValueError, match=r'axes must be distinct entries'):
        groups_from_mapping([{'name': 'b', 'output': 'twist', 'target': 'v', 'axes': ['x']}])
    with pytest.raises(ValueError, match=r"group name 'a' is used twice"):
        groups_from_mapping([{'name': 'a', 'output': 'none'}] * 2)
    with pytest.raises(ValueError, match=r'action_groups: no file'):
        build_settings({**defaults(), 'action_groups': '/nonexistent/groups.yaml'})


def test_a_plan_starts_the_base_at_its_measured_velocity_and_ramps_within_the_limits():
    from dreamzero_ros.core.control.control_loop import ControlLoop, LoopConfig
    from dreamzero_ros.core.motion.chunk_scheduler import BlendConfig
    from dreamzero_ros.core.motion.safety import SafetyLimits
    from dreamzero_ros.core.observations.observation_cache import CacheConfig, ObservationCache
    from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk

    arm = tuple(f'j{i}' for i in range(7))
    cache = ObservationCache(CacheConfig(arm, 'g', max_age=0.5, max_skew=0.2))
    delta = np.array([0.5] * 7 + [1.0] + [0.05, 0.05])  # the base: 0.05 m/s per step at most
    limits = SafetyLimits(np.full(10, -3.0), np.full(10, 3.0), delta, delta_mode='clamp')
    loop = ControlLoop(cache, LoopConfig(limits, BlendConfig(2, 12)), prompt='go')
    loop.measured_velocities = np.array([0.3, -0.1])  # odometry: moving and turning
    for camera in DROID_CAMERAS:
        cache.add_image(camera, np.zeros((4, 4, 3), np.uint8), 1.0)
    cache.add_joint_state([*arm, 'g'], [0.0] * 7 + [0.5], 1.0)
    query = loop.poll(1.0).query
    np.testing.assert_allclose(query.measured_command[8:], [0.3, -0.1])
    actions = np.zeros((24, 10), np.float32)
    actions[:, 7] = 0.5
    outcome = loop.on_chunk(query, ActionChunk(actions, stamp=1.0, step_duration=1 / 15), 1.0)
    base = outcome.plan.rows[:, 8:]
    # from the measured velocity towards the policy's stop, no faster than the limit allows
    assert abs(base[0, 0] - 0.3) <= 0.05 + 1e-9 and abs(base[0, 1] + 0.1) <= 0.05 + 1e-9
    assert np.all(np.abs(np.diff(base, axis=0)) <= 0.05 + 1e-9)
    np.testing.assert_allclose(base[-1], 0.0, atol=1e-9)


def test_the_safety_arrays_must_cover_every_command_column_of_the_groups():
    yam = shipped('yam')
    layout = layout_of(yam)
    values = {
        **defaults(),
        'action_groups': 'yam',
        'camera_keys': list(yam.camera_keys),
        'camera_topics': ['a', 'b', 'c'],
    }
    with pytest.raises(ValueError, match=r'joint_lower/joint_upper/max_step_delta need 14 values'):
        check_policy(build_settings(values), layout)
    fitted = {
        **values,
        'safety.joint_lower': [-3.0] * 12 + [0.0] * 2,
        'safety.joint_upper': [3.0] * 12 + [1.0] * 2,
        'safety.max_step_delta': [0.1] * 14,
    }
    with pytest.raises(ValueError, match=r'max_velocity/stop_deceleration/max_acceleration/'
                       r'max_jerk need one value per arm'):  # fmt: skip
        check_policy(build_settings(fitted), layout)
    per_joint = {'max_velocity': 2.0, 'stop_deceleration': 5.0, 'max_acceleration': 10.0,
                 'max_jerk': 5000.0}  # fmt: skip
    with pytest.raises(ValueError, match=r'need one value per arm joint each, got max_velocity 12'):
        build_settings({**fitted, 'safety.max_velocity': [2.0] * 12})
    settings = build_settings(
        {**fitted, **{f'safety.{name}': [value] * 12 for name, value in per_joint.items()}}
    )
    check_policy(settings, layout)
    cache = settings.cache_for(layout)
    assert cache.arm_joints[:7] == (*(f'left_joint{i}' for i in range(1, 7)), 'right_joint1')
    assert [g[0] for g in cache.grippers] == ['left_gripper', 'right_gripper']


def test_a_checkpoints_training_config_gives_agibots_effectors_and_velocity(tmp_path):
    from dreamzero_ros.engine.checkpoint.experiment_cfg import (
        embodiment_from_checkpoint,
        write_experiment_cfg,
    )

    write_experiment_cfg(tmp_path, shipped('agibot'))  # conf.yaml names keys, no flags
    agibot = embodiment_from_checkpoint(tmp_path, 'agibot')
    assert [k.key for k in agibot.state if k.gripper] == [
        'left_effector_position',
        'right_effector_position',
    ]
    assert (agibot.arm_state_dim, agibot.gripper_state_dim) == (18, 2)
    assert agibot.velocity_columns == (20, 21) and len(agibot.arm_columns) == 18
