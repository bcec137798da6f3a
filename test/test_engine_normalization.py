# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Normalisation of an embodiment's state and actions: order, relative keys, padding, errors."""

import json

from embodiment_support import DROID_FILE, ur_embodiment, yam_embodiment
import numpy as np
import pytest
import yaml

from dreamzero_ros.engine.checkpoint.experiment_cfg import load_metadata
from dreamzero_ros.engine.embodiment import Embodiment, KeyStatistics
from dreamzero_ros.engine.pipeline.normalization import (
    StateActionNormalizer,
    denormalize,
    normalize,
)
from dreamzero_ros.errors import EmbodimentError, MetadataError, ObservationError


def _metadata():
    return {
        'oxe_droid': {
            'statistics': {
                'state': {
                    'joint_position': {'q01': [-2.0] * 7, 'q99': [2.0] * 7, 'mean': [0.0] * 7},
                    'gripper_position': {'q01': [0.0], 'q99': [1.0]},
                    'cartesian_position': {'q01': [-1.0] * 6, 'q99': [1.0] * 6},
                },
                'action': {
                    'joint_position': {'q01': [-0.5] * 7, 'q99': [0.5] * 7},
                    'gripper_position': {'q01': [0.0], 'q99': [1.0]},
                },
            },
            'modalities': {},
        }
    }


def _droid(metadata=None) -> Embodiment:
    statistics = (metadata or _metadata())['oxe_droid']['statistics']
    return Embodiment.from_mapping(yaml.safe_load(DROID_FILE.read_text()), statistics=statistics)


def _normalizer(metadata=None, **dims) -> StateActionNormalizer:
    return StateActionNormalizer(_droid(metadata), **dims)


def test_state_is_normalized_in_concat_order_and_padded():
    norm = _normalizer()
    state = np.array([-2.0, 0.0, 2.0, 1.0, -1.0, 3.0, -3.0, 0.25])
    out = norm.normalize_state(state)
    assert out.shape == (64,) and out.dtype == np.float32
    expected = [-1.0, 0.0, 1.0, 0.5, -0.5, 1.0, -1.0, -0.5]  # clipped beyond q01/q99
    np.testing.assert_allclose(out[:8], expected, atol=1e-7)
    assert np.all(out[8:] == 0)


def test_joint_actions_are_relative_and_gripper_absolute():
    norm = _normalizer()
    state = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9])
    model_out = np.zeros((24, 32))
    model_out[:, :7] = 1.0  # q99 delta = +0.5 rad
    model_out[:, 7] = -1.0  # gripper q01 = 0.0 (absolute)
    model_out[:, 8:] = 123.0  # padding is ignored
    actions = norm.denormalize_actions(model_out, state)
    assert actions.shape == (24, 8) and actions.dtype == np.float32
    np.testing.assert_allclose(actions[:, :7], np.tile(state[:7] + 0.5, (24, 1)), atol=1e-6)
    np.testing.assert_allclose(actions[:, 7], 0.0)


def _quantiles(q01, q99) -> KeyStatistics:
    return KeyStatistics({'q01': np.array(q01), 'q99': np.array(q99)})


def test_round_trip_inside_the_range():
    q = _quantiles([-1.0, 0.0, 3.0], [2.0, 10.0, 3.0])
    values = np.array([0.5, 7.0, 0.2])
    np.testing.assert_allclose(normalize(q, values, 'q99'), [0.0, 0.4, 0.2])
    np.testing.assert_allclose(denormalize(q, normalize(q, values, 'q99'), 'q99')[:2], values[:2])


def test_degenerate_statistics_pass_through_then_clip():
    q = _quantiles([1.0, 1.0], [1.0, 1.0])
    np.testing.assert_allclose(normalize(q, np.array([0.3, 5.0]), 'q99'), [0.3, 1.0])


def test_statistics_are_rounded_to_float32_like_upstream():
    metadata = _metadata()
    metadata['oxe_droid']['statistics']['state']['gripper_position'] = {'q01': [0.1], 'q99': [0.7]}
    gripper = _droid(metadata).state[1]
    assert gripper.statistics.values['q01'][0] == float(np.float32(0.1))


def test_errors_name_what_is_wrong(tmp_path):
    norm = _normalizer()
    with pytest.raises(ObservationError, match='finite'):
        norm.normalize_state(np.array([np.nan] * 8))
    with pytest.raises(ObservationError, match='shape'):
        norm.normalize_state(np.zeros(7))
    with pytest.raises(MetadataError, match='missing statistics file'):
        load_metadata(tmp_path / 'metadata.json')
    (tmp_path / 'metadata.json').write_text('{not json')
    with pytest.raises(MetadataError, match='not valid JSON'):
        load_metadata(tmp_path / 'metadata.json')
    (tmp_path / 'metadata.json').write_text(json.dumps(_metadata()))
    assert 'oxe_droid' in load_metadata(tmp_path / 'metadata.json')


def test_widths_beyond_the_model_maximum_are_refused():
    with pytest.raises(EmbodimentError, match='exceed'):
        _normalizer(max_action_dim=4)


def test_relative_keys_of_a_bimanual_embodiment_use_their_own_state():
    yam = yam_embodiment()
    norm = StateActionNormalizer(yam)
    state = np.arange(14, dtype=float) / 10  # left 6 + grip, right 6 + grip
    model_out = np.zeros((3, 32))  # relative deltas of 0 sit at the middle of +-0.2: 0
    actions = norm.denormalize_actions(model_out, state)
    np.testing.assert_allclose(actions[:, 0:6], np.tile(state[0:6], (3, 1)), atol=1e-6)
    np.testing.assert_allclose(actions[:, 7:13], np.tile(state[7:13], (3, 1)), atol=1e-6)
    np.testing.assert_allclose(actions[:, [6, 13]], 0.5)  # absolute grippers: middle of [0, 1]


def test_absolute_actions_and_min_max_gripper_of_a_ur_arm():
    ur = ur_embodiment()
    norm = StateActionNormalizer(ur)
    state = np.array([0.3, -0.2, 1.0, 0.0, 0.5, -1.0, 0.04])
    normalized = norm.normalize_state(state)
    np.testing.assert_allclose(normalized[6], 2 * (0.04 + 0.1) / 0.285 - 1, rtol=1e-6)
    model_out = np.zeros((2, 32))
    model_out[:, 6] = 1.0
    actions = norm.denormalize_actions(model_out, state)
    np.testing.assert_allclose(actions[:, :6], 0.0, atol=1e-6)  # absolute: not state-relative
    np.testing.assert_allclose(actions[:, 6], 0.185, rtol=1e-6)  # gripper max
