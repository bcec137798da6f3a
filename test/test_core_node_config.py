# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The typed settings tree: parameters generated from it, the YAML check, values and ranges."""

from pathlib import Path

import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import (
    PARAMETERS,
    build_settings,
    defaults,
    read_params_file,
    unknown_parameters,
)
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.parameter_schema import Kind

CONFIG = Path(__file__).resolve().parents[1] / 'config'


def test_every_parameter_is_described_and_unique():
    names = [spec.name for spec in PARAMETERS]
    assert len(names) == len(set(names))
    assert all(spec.description.strip() for spec in PARAMETERS)


@pytest.mark.parametrize('name', ['droid.yaml', 'cpu_small.yaml'])
def test_shipped_configs_load_and_build(name):
    values = read_params_file(CONFIG / name)
    settings = build_settings(
        {**values, 'engine.checkpoint': values.get('engine.checkpoint') or 'x'}
    )
    assert settings.command_joint_names[:7] == list(settings.cache.arm_joints)


def test_unknown_parameter_in_yaml_is_an_error(tmp_path):
    path = tmp_path / 'bad.yaml'
    path.write_text('/**:\n  ros__parameters:\n    max_age: 1.0\n    engine:\n      chekpoint: x\n')
    with pytest.raises(ValueError, match=r"unknown parameters \['engine.chekpoint'\]"):
        read_params_file(path)


def test_yaml_without_node_section_is_an_error(tmp_path):
    path = tmp_path / 'other.yaml'
    path.write_text('other_node:\n  ros__parameters:\n    x: 1\n')
    with pytest.raises(ValueError, match='no "/\\*\\*:"'):
        read_params_file(path)


def test_named_node_sections_apply_after_wildcard(tmp_path):
    path = tmp_path / 'two.yaml'
    path.write_text(
        '/**:\n  ros__parameters:\n    max_age: 1.0\n'
        'dreamzero_policy:\n  ros__parameters:\n    max_age: 2.0\n'
    )
    assert read_params_file(path)['max_age'] == 2.0


def test_builtin_parameters_are_allowed():
    assert unknown_parameters(['use_sim_time', 'qos_overrides./x.depth', 'nope']) == ['nope']


@pytest.mark.parametrize(
    ('override', 'message'),
    [
        ({'engine.backend': 'cloud'}, r"engine.backend: must be one of \['local', 'remote'\]"),
        ({'camera_topics': ['a', 'b']}, 'camera_topics needs a topic name for each of camera_keys'),
        ({'camera_keys': ['a', 'a', 'b']}, 'camera_keys must be distinct'),
        ({'image_height': 180}, 'image_height/image_width'),
        ({'gripper_joint_name': ''}, r'safety limits need 7 values \(the 7 arm joints\), got 8'),
        (
            {'gripper_joint_name': '', 'gripper.interface': 'action'},
            "gripper.interface 'action' needs a gripper_joint_name",
        ),
        ({'safety.joint_lower': [0.0] * 7}, 'invalid parameters'),
        ({'arm_joint_names': ['a'] * 7}, 'invalid parameters'),
        ({'typo': 1}, 'unknown parameters'),
        ({'control_rate_hz': 0.0}, r'control_rate_hz: 0.0 is outside the range \[0.1, 1000.0\]'),
        ({'max_age': -1}, r'max_age: -1.0 is outside the range'),
        ({'max_age': float('nan')}, 'max_age: nan is outside the range'),
        ({'safety.max_step_delta': [0.1] * 7 + [20.0]}, r'safety.max_step_delta\[7\]: 20.0'),
        ({'engine.cfg_parallel': 3}, r'engine.cfg_parallel: 3 is outside the range \[1, 2\]'),
        ({'image_width': 320.0}, 'image_width: expected an integer, got 320.0'),
        ({'dry_run': 'yes'}, "dry_run: expected a bool, got 'yes'"),
        ({'camera_topics': 'wrist'}, 'camera_topics: expected a string array'),
    ],
)
def test_bad_values_name_the_parameter(override, message):
    with pytest.raises(ValueError, match=message):
        build_settings({'engine.checkpoint': 'ckpt', **override})


def test_integers_are_accepted_where_doubles_are_declared():
    settings = build_settings({'max_age': 1, 'gripper_range': [0, 1], 'clip_offsets': [-1, 0]})
    assert settings.max_age == 1.0 and isinstance(settings.max_age, float)
    assert settings.gripper_range == (0.0, 1.0) and isinstance(settings.gripper_range[1], float)
    assert settings.cache.clip_offsets == (-1.0, 0.0)


def test_settings_are_read_by_attribute_and_frozen():
    settings = build_settings({'engine.checkpoint': 'ckpt', 'engine.cfg_parallel': 2})
    assert settings.engine.checkpoint == 'ckpt' and settings.engine.cfg_parallel == 2
    assert settings.safety.delta_mode == 'clamp' and settings.scheduler.blend_max_steps == 12
    with pytest.raises(AttributeError):
        settings.engine.checkpoint = 'other'  # type: ignore[misc]


def test_every_number_parameter_has_a_range_and_its_default_is_valid():
    numbers = {Kind.INTEGER, Kind.DOUBLE, Kind.INTEGER_ARRAY, Kind.DOUBLE_ARRAY}
    for spec in PARAMETERS:
        assert spec.kind not in numbers or spec.range is not None, spec.name
        assert spec.check(spec.default) == spec.default, spec.name
    assert NodeSettings() == build_settings({})


def test_only_task_parameters_change_at_run_time():
    assert {spec.name for spec in PARAMETERS if spec.runtime} == {
        'prompt',
        'session_id',
        'dry_run',
    }


def test_gripper_mapping_to_joint_units():
    settings = build_settings({'engine.checkpoint': 'c', 'gripper_range': [0.0, 0.08]})
    groups = settings.group_layout(RobotLayout.from_metadata({}))  # DROID's
    rows = np.array([[0.0] * 7 + [0.5]])
    assert groups.to_joint_units(rows)[0, 7] == pytest.approx(0.04)
    assert rows[0, 7] == 0.5


def test_defaults_cover_every_spec():
    assert set(defaults()) == {spec.name for spec in PARAMETERS}


def test_node_documentation_lists_every_parameter_with_its_description():
    text = (Path(__file__).resolve().parents[1] / 'docs' / 'policy_node.md').read_text()
    rows = {line.split('`')[1]: line for line in text.splitlines() if line.startswith('| `')}
    missing = [spec.name for spec in PARAMETERS if spec.name not in rows]
    assert not missing, f'docs/policy_node.md lacks {missing}'
    stale = [
        spec.name
        for spec in PARAMETERS
        if spec.description.replace('|', '\\|') not in rows[spec.name]
    ]
    assert not stale, f'docs/policy_node.md: rows of {stale} differ from the declaration'


def test_local_engine_without_checkpoint_is_refused_at_configure():
    from dreamzero_ros.core.policy.policy_factory import create_policy

    with pytest.raises(ValueError, match='engine.checkpoint is required'):
        create_policy(build_settings({}), log=lambda text: None)
