# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The OpenPI server's opt-in predicted video, asked for by the reference openpi-client."""

from __future__ import annotations

import json

from openpi_support import SCRIPTS, run_openpi, tiny_engine
import pytest

from dreamzero_ros.openpi import OpenPIServer, ServerConfig

CHECK = str(SCRIPTS / 'openpi_return_video_check.py')


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    engine = tiny_engine(tmp_path_factory.mktemp('tiny-checkpoint'))
    handle = OpenPIServer(engine, ServerConfig(port=0)).start()
    yield handle
    handle.stop()


def test_return_video_answers_with_the_predicted_frames_and_others_get_todays_reply(server):
    out = run_openpi([CHECK, '--port', str(server.port)])
    assert out['plain_keys'] == ['actions', 'chunk_id', 'server_timing']
    assert out['video_keys'] == ['actions', 'chunk_id', 'predicted_video', 'server_timing']
    assert out['predicted_keys'] == ['cameras', 'frames', 'times_s']
    assert out['frames'] == {'shape': [8, 32, 64, 3], 'dtype': '|u1'}
    assert out['cameras'] == {
        key: {'shape': [8, 16, 32, 3], 'dtype': '|u1'}
        for key in ('exterior_image_1_left', 'exterior_image_2_left', 'wrist_image_left')
    }
    assert out['times_s'] == pytest.approx([0.2 * (j + 1) for j in range(8)])  # 24 / 15 Hz / 8
    assert out['actions_max_difference'] < 1e-5
    assert out['numpy_true_keys'] == out['video_keys']  # np.bool_(True): msgpack-numpy's scalar
    assert out['numpy_false_keys'] == out['plain_keys']
    body = json.loads(out['bad'].split('\n', 1)[1])
    assert body['error'] == 'MalformedRequest'
    assert body['message'] == 'return_video must be a boolean (true or false), got str'
    body = json.loads(out['bad_int'].split('\n', 1)[1])
    assert body['message'] == 'return_video must be a boolean (true or false), got numpy int64'
