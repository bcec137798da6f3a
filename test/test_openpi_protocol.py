# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Protocol rules: metadata, session ids, endpoints, error frames, server settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dreamzero_ros.openpi import ServerConfig, protocol
from dreamzero_ros.policy_types import ObservationError

ENGINE_METADATA = {
    'image_resolution': (180, 320),
    'n_external_cameras': 2,
    'needs_wrist_camera': True,
    'needs_stereo_camera': False,
    'needs_session_id': True,
    'action_space': 'joint_position',
    'action_horizon': 24,
    'control_hz': 15.0,
    'cameras': ['wrist_image_left', 'exterior_image_1_left', 'exterior_image_2_left'],
    'internal': object(),
}


def test_metadata_holds_exactly_the_roboarena_fields_by_default():
    metadata = protocol.build_metadata(ENGINE_METADATA)
    assert list(metadata) == list(protocol.CLIENT_CONFIG_KEYS)
    assert metadata['image_resolution'] == [180, 320]


def test_metadata_extras_add_plain_values_only():
    metadata = protocol.build_metadata(ENGINE_METADATA, extras=True)
    assert metadata['action_horizon'] == 24 and metadata['control_hz'] == 15.0
    assert metadata['cameras'][0] == 'wrist_image_left'
    assert 'internal' not in metadata


def test_metadata_falls_back_to_dreamzero_defaults():
    assert protocol.build_metadata({}) == {
        **protocol.DREAMZERO_CLIENT_CONFIG,
        'image_resolution': [180, 320],
    }


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        (None, None),
        ('episode-1', 'episode-1'),
        (b'raw', 'raw'),
        (42, '42'),
        (np.zeros(1, dtype=np.int32), '0'),
        (np.array([3, 4]), '3,4'),
        (np.str_('np'), 'np'),
    ],
)
def test_session_ids_are_normalised_to_str(value, expected):
    request = {} if value is None else {'session_id': value}
    assert protocol.session_id_of(request) == expected


@pytest.mark.parametrize('value', [1.5, ['a'], 'x' * 300, np.zeros(2, np.float32), True])
def test_bad_session_ids_are_refused(value):
    with pytest.raises(ObservationError, match='session_id'):
        protocol.session_id_of({'session_id': value})


def test_endpoints():
    assert protocol.endpoint_of({}) == 'infer'
    assert protocol.endpoint_of({'endpoint': 'reset'}) == 'reset'
    with pytest.raises(ObservationError, match='unknown endpoint'):
        protocol.endpoint_of({'endpoint': 'train'})


def test_error_frames_round_trip_and_foreign_text_is_an_unknown_error():
    text = protocol.error_text('ObservationError', 'missing camera', 'infer')
    assert json.loads(text) == {
        'error': 'ObservationError',
        'message': 'missing camera',
        'endpoint': 'infer',
    }
    assert protocol.parse_error_text(text) == ('ObservationError', 'missing camera')
    assert protocol.parse_error_text('Traceback ...') == ('ServerError', 'Traceback ...')


def test_server_config_is_safe_by_default_and_validated():
    config = ServerConfig()
    assert config.host == '127.0.0.1' and config.api_key is None
    assert config.max_payload_bytes == 16 * 2**20 and config.idle_timeout_s == 600.0
    with pytest.raises(ValueError, match='reply_format'):
        ServerConfig(reply_format='json')
    with pytest.raises(ValueError, match='max_payload_bytes'):
        ServerConfig(max_payload_bytes=10)
