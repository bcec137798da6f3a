# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay of real bags with unreadable parts: types it cannot decode, damaged bytes."""

import json
import subprocess
import sys

from node_support import ros_env
import numpy as np
import pytest
from replay_support import ScriptedPolicy, demo_bag, rewrite_bag
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from dreamzero_ros.replay.bag_io import BagError, BagReader
from dreamzero_ros.replay.evaluation import EvaluationConfig, evaluate_bag
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.topics import ReplayTopics

START_NS = 1_700_000_000 * 10**9
CUSTOM_TYPE = 'acme_msgs/msg/GripperStatus'
CUSTOM_DEFINITION = 'string state\nfloat64 force\n'
BROKEN_TYPE = 'acme_msgs/msg/Diagnostics'
BROKEN_DEFINITION = 'uint8[ data\n'  # what a damaged or foreign schema looks like to a parser
JOINT_STATES = 27  # 8 frames at 15 Hz: 0.53 s of joint states at 50 Hz


def _custom_connection():
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(CUSTOM_DEFINITION, CUSTOM_TYPE))
    kind = store.types[CUSTOM_TYPE]
    messages = [
        (START_NS + i * 100_000_000, store.serialize_cdr(kind('open', 1.5 * i), CUSTOM_TYPE))
        for i in range(3)
    ]
    digest = store.hash_rihs01(CUSTOM_TYPE)
    return '/gripper_status', CUSTOM_TYPE, CUSTOM_DEFINITION, digest, messages


def _broken_connection():
    payload = b'\x00\x01\x00\x00' + bytes(range(16))
    messages = [(START_NS + i * 100_000_000, payload) for i in range(3)]
    return '/diagnostics_raw', BROKEN_TYPE, BROKEN_DEFINITION, 'RIHS01_' + '0' * 64, messages


@pytest.fixture(scope='module', params=['mcap', 'sqlite3'])
def bag_with_foreign_types(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f'foreign_{request.param}')
    source = demo_bag(folder, 'source', storage=request.param, num_frames=8, image_format='jpeg')
    extra = [_custom_connection(), _broken_connection()]
    return rewrite_bag(source, folder / 'bag', request.param, extra)


def _evaluation_config():
    settings = node_settings()
    return EvaluationConfig(
        ReplayTopics.from_settings(settings, transport='auto'), settings.cache, 'stack', 0.2
    )


def test_a_topic_whose_definition_does_not_parse_costs_only_that_topic(bag_with_foreign_types):
    with BagReader(bag_with_foreign_types) as reader:
        assert reader.topics['/diagnostics_raw'] == BROKEN_TYPE
        assert [m.state for _, _, m in reader.messages(['/gripper_status'])] == ['open'] * 3
        assert len(list(reader.messages(['/joint_states']))) == JOINT_STATES
        with pytest.raises(BagError, match=r"'/diagnostics_raw' .* definition of .* parsed"):
            list(reader.messages(['/diagnostics_raw']))
        assert len(list(reader.raw_messages(['/diagnostics_raw']))) == 3
    policy = ScriptedPolicy(np.full((4, 8), 0.01))
    evaluation = evaluate_bag(bag_with_foreign_types, policy, _evaluation_config())
    assert evaluation.metrics()['chunks'] == 3


def _live_replay(*args):
    command = [sys.executable, '-c', 'from dreamzero_ros.replay.cli import live_main; '
               'raise SystemExit(live_main())', *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=ros_env())


def test_live_replay_skips_types_rclpy_lacks_and_plays_the_rest(bag_with_foreign_types):
    result = _live_replay(str(bag_with_foreign_types), '--wait', '0', '--linger', '0')
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary['published']['/joint_states'] == JOINT_STATES
    assert summary['published']['/wrist_image_left/compressed'] == 8
    assert set(summary['skipped_topics']) == {'/gripper_status', '/diagnostics_raw'}
    assert 'acme_msgs' in summary['skipped_topics']['/gripper_status']
    assert 'not playing /gripper_status' in result.stderr
    asked = _live_replay(str(bag_with_foreign_types), '--topic', '/gripper_status', '--wait', '0')
    assert asked.returncode == 2
    assert f'message type {CUSTOM_TYPE} is not available' in asked.stderr
