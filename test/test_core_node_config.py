# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of the parameter table, the YAML check and the settings builder."""

from pathlib import Path

import numpy as np
import pytest

from dreamzero_ros.core.node_config import (
    PARAMETERS,
    build_settings,
    defaults,
    read_params_file,
    unknown_parameters,
)

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
        ({'engine.backend': 'cloud'}, 'engine.backend must be one of'),
        ({'camera_topics': ['a', 'b']}, 'camera_topics needs 3'),
        ({'image_height': 0}, 'image_height/image_width'),
        ({'safety.joint_lower': [0.0] * 7}, 'invalid parameters'),
        ({'arm_joint_names': ['a'] * 7}, 'invalid parameters'),
        ({'engine.checkpoint': ''}, 'engine.checkpoint is required'),
        ({'typo': 1}, 'unknown parameters'),
        ({'control_rate_hz': 0.0}, 'control_rate_hz must be > 0'),
    ],
)
def test_bad_values_name_the_parameter(override, message):
    with pytest.raises(ValueError, match=message):
        build_settings({'engine.checkpoint': 'ckpt', **override})


def test_gripper_mapping_to_joint_units():
    settings = build_settings({'engine.checkpoint': 'c', 'gripper_range': [0.0, 0.08]})
    rows = np.array([[0.0] * 7 + [0.5]])
    assert settings.gripper_to_joint(rows)[0, 7] == pytest.approx(0.04)
    assert rows[0, 7] == 0.5


def test_defaults_cover_every_spec():
    assert set(defaults()) == {spec.name for spec in PARAMETERS}


def test_node_documentation_lists_every_parameter():
    text = (Path(__file__).resolve().parents[1] / 'docs' / 'policy_node.md').read_text()
    missing = [spec.name for spec in PARAMETERS if f'| `{spec.name}` |' not in text]
    assert not missing, f'docs/policy_node.md lacks {missing}'
