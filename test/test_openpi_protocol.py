# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Protocol rules: metadata, session ids, endpoints, reset and error replies, server settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dreamzero_ros.openpi import ServerConfig, msgpack_numpy, protocol
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


@pytest.mark.parametrize(
    'value', [1.5, ['a'], 'x' * 300, np.zeros(2, np.float32), True, np.arange(17)]
)
def test_bad_session_ids_are_refused(value):
    with pytest.raises(ObservationError, match='session_id'):
        protocol.session_id_of({'session_id': value})


def test_endpoints():
    assert protocol.endpoint_of({}) == 'infer'
    assert protocol.endpoint_of({'endpoint': 'reset'}) == 'reset'
    assert protocol.endpoint_of({'endpoint': b'reset'}) == 'reset'
    with pytest.raises(ObservationError, match='unknown endpoint'):
        protocol.endpoint_of({'endpoint': 'train'})
    with pytest.raises(ObservationError) as error:
        protocol.endpoint_of({'endpoint': 'x' * 100_000})
    assert len(str(error.value)) < 200 and '(100000 long)' in str(error.value)


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        ('short', "'short'"),
        ('y' * 1000, "'" + 'y' * 48 + "'... (1000 long)"),
        (b'\0' * 100, repr(b'\0' * 48) + '... (100 long)'),
        (np.zeros((3, 4), np.uint8), 'uint8 array of shape (3, 4)'),
        ([0] * 10**6, 'list'),
        (7, '7'),
    ],
)
def test_previews_of_client_values_are_short(value, expected):
    assert protocol.preview(value) == expected


def test_reset_replies_suit_every_client():
    reply = msgpack_numpy.unpackb(protocol.reset_reply('episode-2'))
    # openpi-client decodes any map; the seed's example client checks the status.
    assert reply == {'status': 'reset successful', 'reset': True, 'session_id': 'episode-2'}
    # Upstream DreamZero's and RoboArena's servers answer this text, the seed's sim-eval
    # client accepts nothing else.
    assert protocol.reset_reply('episode-2', as_text=True) == 'reset successful'


def test_error_frames_round_trip_and_foreign_text_is_an_unknown_error():
    text = protocol.error_text('ObservationError', 'missing camera', 'infer')
    assert json.loads(text) == {
        'error': 'ObservationError',
        'message': 'missing camera',
        'endpoint': 'infer',
    }
    assert protocol.parse_error_text(text) == ('ObservationError', 'missing camera')
    assert protocol.parse_error_text('Traceback ...') == ('ServerError', 'Traceback ...')
    long = json.loads(protocol.error_text('ObservationError', 'e' * 10**6, 'infer', limit=100))
    assert long['message'] == 'e' * 100 + '... (1000000 characters)'


def test_server_config_is_safe_by_default_and_validated():
    config = ServerConfig()
    assert config.host == '127.0.0.1' and config.api_key is None
    assert config.max_payload_bytes == 16 * 2**20 and config.max_prompt_chars == 4096
    assert config.decode_limits() == msgpack_numpy.DecodeLimits(10_000, 16, 4 * 4096)
    limits = config.capacity_limits(default_sessions=3)
    assert (limits.max_sessions, limits.max_sessions_per_client) == (3, 3)
    assert limits.max_sessions_per_connection == 1 and limits.idle_evict_after_s == 60.0
    with pytest.raises(ValueError, match='reply_format'):
        ServerConfig(reply_format='json')
    with pytest.raises(ValueError, match='max_payload_bytes'):
        ServerConfig(max_payload_bytes=10)
    with pytest.raises(ValueError, match='max_connections_per_client'):
        ServerConfig(max_connections_per_client=0)
    with pytest.raises(ValueError, match='max_prompt_chars'):
        ServerConfig(max_prompt_chars=0)
