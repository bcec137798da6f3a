# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""q01/q99 normalisation, relative joint actions, padding and metadata errors."""

import json

import numpy as np
import pytest

from dreamzero_ros.engine.normalization import Quantiles, StateActionNormalizer, load_metadata
from dreamzero_ros.errors import MetadataError, ObservationError


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


def test_state_is_normalized_in_concat_order_and_padded():
    norm = StateActionNormalizer.from_metadata(_metadata(), 'oxe_droid')
    state = np.array([-2.0, 0.0, 2.0, 1.0, -1.0, 3.0, -3.0, 0.25])
    out = norm.normalize_state(state)
    assert out.shape == (64,) and out.dtype == np.float32
    expected = [-1.0, 0.0, 1.0, 0.5, -0.5, 1.0, -1.0, -0.5]  # clipped beyond q01/q99
    np.testing.assert_allclose(out[:8], expected, atol=1e-7)
    assert np.all(out[8:] == 0)


def test_joint_actions_are_relative_and_gripper_absolute():
    norm = StateActionNormalizer.from_metadata(_metadata(), 'oxe_droid')
    state = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9])
    model_out = np.zeros((24, 32))
    model_out[:, :7] = 1.0  # q99 delta = +0.5 rad
    model_out[:, 7] = -1.0  # gripper q01 = 0.0 (absolute)
    model_out[:, 8:] = 123.0  # padding is ignored
    actions = norm.denormalize_actions(model_out, state)
    assert actions.shape == (24, 8) and actions.dtype == np.float32
    np.testing.assert_allclose(actions[:, :7], np.tile(state[:7] + 0.5, (24, 1)), atol=1e-6)
    np.testing.assert_allclose(actions[:, 7], 0.0)


def test_round_trip_inside_the_range():
    q = Quantiles(np.array([-1.0, 0.0, 3.0]), np.array([2.0, 10.0, 3.0]))
    values = np.array([0.5, 7.0, 0.2])
    np.testing.assert_allclose(q.normalize(values), [0.0, 0.4, 0.2])
    np.testing.assert_allclose(q.denormalize(q.normalize(values))[:2], values[:2])


def test_degenerate_statistics_pass_through_then_clip():
    q = Quantiles(np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    np.testing.assert_allclose(q.normalize(np.array([0.3, 5.0])), [0.3, 1.0])


def test_statistics_are_rounded_to_float32_like_upstream():
    metadata = _metadata()
    metadata['oxe_droid']['statistics']['state']['gripper_position'] = {'q01': [0.1], 'q99': [0.7]}
    norm = StateActionNormalizer.from_metadata(metadata, 'oxe_droid')
    assert norm.state_stats['gripper_position'].q01[0] == float(np.float32(0.1))


def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ObservationError, match="unknown embodiment 'franka'"):
        StateActionNormalizer.from_metadata(_metadata(), 'franka')
    with pytest.raises(MetadataError, match='no statistics for embodiment'):
        StateActionNormalizer.from_metadata({'agibot': {}}, 'oxe_droid')
    broken = _metadata()
    del broken['oxe_droid']['statistics']['action']['gripper_position']
    with pytest.raises(MetadataError, match='statistics.action.gripper_position'):
        StateActionNormalizer.from_metadata(broken, 'oxe_droid')
    broken = _metadata()
    broken['oxe_droid']['statistics']['state']['joint_position']['q99'] = [1.0] * 6
    with pytest.raises(MetadataError, match='joint_position: q01'):
        StateActionNormalizer.from_metadata(broken, 'oxe_droid')
    broken = _metadata()
    broken['oxe_droid']['statistics']['state']['joint_position']['q99'] = [float('nan')] * 7
    with pytest.raises(MetadataError, match='finite'):
        StateActionNormalizer.from_metadata(broken, 'oxe_droid')
    norm = StateActionNormalizer.from_metadata(_metadata(), 'oxe_droid')
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
    with pytest.raises(MetadataError, match='exceed'):
        StateActionNormalizer.from_metadata(_metadata(), 'oxe_droid', max_action_dim=4)
