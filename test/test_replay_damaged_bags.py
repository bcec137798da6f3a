# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay of real bags with unreadable parts: types it cannot decode, damaged bytes."""

from dataclasses import replace
import json
import shutil
import sqlite3
import struct
import subprocess
import sys

from node_support import ros_env
import numpy as np
import pytest
from replay_support import ScriptedPolicy, demo_bag, rewrite_bag
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.cli import replay_main
from dreamzero_ros.replay.evaluation import EvaluationConfig, evaluate_bag
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.topics import ReplayTopics
from dreamzero_ros.replay.typestore import replay_typestore

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


# ---------------------------------------------------------------- damaged bytes
NEEDED = ['/exterior_image_1_left', '/exterior_image_2_left', '/joint_states', '/wrist_image_left']


@pytest.fixture(scope='module')
def mcap_bag(tmp_path_factory):
    """A made mcap bag of several chunks (raw images: about 0.5 MB per frame)."""
    return demo_bag(tmp_path_factory.mktemp('mcap'), num_frames=12, image_format='rgb8')


def _damaged_copy(bag, target, change):
    shutil.copytree(bag, target)
    data_file = next(target.glob('*.mcap'))
    content = bytearray(data_file.read_bytes())
    change(content)
    data_file.write_bytes(bytes(content))
    return target


def _counts(bag, allow_partial=False):
    with BagReader(bag, allow_partial) as reader:
        counts = {topic: 0 for topic in NEEDED}
        for topic, _, _ in reader.messages(NEEDED):
            counts[topic] += 1
        return counts


def _joint_state_payload(bag, index):
    with Reader(bag) as reader:
        connection = next(c for c in reader.connections if c.topic == '/joint_states')
        messages = list(reader.messages([connection]))
    log_ns, raw = messages[index][1], bytes(messages[index][2])
    store = replay_typestore()
    return log_ns, raw, store.deserialize_cdr(raw, 'sensor_msgs/msg/JointState')


def test_a_byte_flipped_inside_an_mcap_chunk_is_caught_by_its_crc(mcap_bag, tmp_path):
    log_ns, raw, message = _joint_state_payload(mcap_bag, 30)
    # flip a mantissa bit of panda_joint1's position: the payload still decodes, as a wrong value
    at = raw.index(struct.pack('<d', message.position[0])) + 5
    target = raw[:at] + bytes([raw[at] ^ 0x10]) + raw[at + 1 :]
    wrong = replay_typestore().deserialize_cdr(target, 'sensor_msgs/msg/JointState')
    assert 0 < abs(wrong.position[0] - message.position[0]) < 0.01

    def flip(content):
        at = content.find(raw)
        assert at > 0 and content.find(raw, at + 1) < 0
        content[at : at + len(raw)] = target

    damaged = _damaged_copy(mcap_bag, tmp_path / 'flipped', flip)
    with pytest.raises(BagError, match=r'chunk at byte \d+: CRC mismatch'):
        _counts(damaged)
    config = _evaluation_config()
    with pytest.raises(BagError, match='CRC mismatch .*--allow-partial'):
        evaluate_bag(damaged, ScriptedPolicy(np.zeros((4, 8))), config)

    with BagReader(damaged, allow_partial=True) as reader:
        report = reader.verify(NEEDED)
        stamps = [t for _, t, _ in reader.messages(['/joint_states'])]
    assert not report.complete
    [part] = report.damaged
    assert part.file.endswith('.mcap') and part.reason == 'CRC mismatch'
    assert part.messages['/joint_states'] > 0
    intact, partial = _counts(mcap_bag), _counts(damaged, allow_partial=True)
    assert report.skipped == {
        topic: {'damaged_chunk': intact[topic] - partial[topic]}
        for topic in NEEDED
        if intact[topic] != partial[topic]
    }
    assert report.skipped['/joint_states']['damaged_chunk'] == part.messages['/joint_states']
    assert log_ns not in stamps

    evaluation = evaluate_bag(
        damaged, ScriptedPolicy(np.zeros((4, 8))), replace(config, allow_partial=True)
    )
    assert evaluation.metrics()['integrity'] == report.to_json()
    assert evaluation.metrics()['chunks'] > 0


def test_replay_cli_exit_code_and_metrics_of_a_damaged_mcap(mcap_bag, tmp_path, capsys):
    _, raw, _ = _joint_state_payload(mcap_bag, 5)

    def flip(content):
        at = content.find(raw) + len(raw) - 3
        content[at] ^= 0xFF

    damaged = _damaged_copy(mcap_bag, tmp_path / 'flipped', flip)
    arguments = [str(damaged), '--preset', 'tiny', '--device', 'cpu', '--max-chunks', '1',
                 '--no-progress', '--param', 'image_transport=raw']  # fmt: skip
    assert replay_main([*arguments, '--out', str(tmp_path / 'strict')]) == 2
    assert 'CRC mismatch' in capsys.readouterr().err
    assert not (tmp_path / 'strict').exists()
    status = replay_main([*arguments, '--out', str(tmp_path / 'partial'), '--allow-partial'])
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    metrics = json.loads((tmp_path / 'partial' / 'metrics.json').read_text())
    integrity = metrics['integrity']
    assert integrity['complete'] is False
    assert integrity['skipped_messages']['/joint_states']['damaged_chunk'] > 0
    assert summary['skipped_messages'] == integrity['skipped_messages']
    assert integrity['damaged_parts'][0]['reason'] == 'CRC mismatch'


def test_a_damaged_mcap_summary_costs_no_message_but_is_reported(mcap_bag, tmp_path):
    def rename_in_summary(content):
        at = content.rfind(b'/joint_states')  # the summary's copy of the channel record
        content[at + 11] ^= 0x01

    damaged = _damaged_copy(mcap_bag, tmp_path / 'summary', rename_in_summary)
    with pytest.raises(BagError, match='summary: CRC mismatch'):
        BagReader(damaged)
    with BagReader(damaged, allow_partial=True) as reader:
        assert '/joint_states' in reader.topics
        report = reader.verify(NEEDED)
    assert [(p.part, p.messages) for p in report.damaged] == [('summary', {})]
    assert report.skipped == {}
    assert _counts(damaged, allow_partial=True) == _counts(mcap_bag)


def test_an_mcap_cut_short_keeps_its_complete_chunks(mcap_bag, tmp_path):
    def cut(content):
        del content[len(content) // 2 :]

    damaged = _damaged_copy(mcap_bag, tmp_path / 'cut', cut)
    with pytest.raises(BagError, match='no footer'):
        BagReader(damaged)
    with BagReader(damaged, allow_partial=True) as reader:
        report = reader.verify(NEEDED)
    parts = {p.part: p.reason for p in report.damaged}
    assert 'no footer' in parts['end of file']
    counts, intact = _counts(damaged, allow_partial=True), _counts(mcap_bag)
    assert 0 < counts['/joint_states'] < intact['/joint_states']


def test_truncated_sqlite_rows_are_skipped_and_counted(tmp_path):
    bag = demo_bag(tmp_path, storage='sqlite3', num_frames=8, image_format='jpeg')
    database = next(bag.glob('*.db3'))
    with sqlite3.connect(database) as connection:
        topic_id = connection.execute(
            "SELECT id FROM topics WHERE name = '/joint_states'"
        ).fetchone()[0]
        rows = [r[0] for r in connection.execute(
            'SELECT id FROM messages WHERE topic_id = ? ORDER BY id LIMIT 2 OFFSET 5', (topic_id,)
        )]  # fmt: skip
        connection.executemany(
            'UPDATE messages SET data = substr(data, 1, 40) WHERE id = ?', [(r,) for r in rows]
        )
    with pytest.raises(BagError, match='/joint_states .* does not decode'):
        list(BagReader(bag).messages(['/joint_states']))
    with BagReader(bag, allow_partial=True) as reader:
        report = reader.verify(['/joint_states', '/wrist_image_left/compressed'])
        read = len(list(reader.messages(['/joint_states'])))
    assert report.damaged == []
    assert report.skipped == {'/joint_states': {'undecodable': 2}}
    assert read == JOINT_STATES - 2


def test_live_replay_refuses_a_damaged_mcap_unless_allowed_partial(mcap_bag, tmp_path):
    _, raw, _ = _joint_state_payload(mcap_bag, 5)

    def flip(content):
        content[content.find(raw) + len(raw) - 3] ^= 0xFF

    damaged = _damaged_copy(mcap_bag, tmp_path / 'flipped', flip)
    strict = _live_replay(
        str(damaged), '--wait', '0', '--linger', '0', '--record', str(tmp_path / 'a')
    )
    assert strict.returncode == 2
    assert 'CRC mismatch' in strict.stderr
    assert not (tmp_path / 'a').exists()
    partial = _live_replay(str(damaged), '--wait', '0', '--linger', '0', '--allow-partial')
    assert partial.returncode == 0, partial.stderr
    summary = json.loads(partial.stdout)
    skipped = summary['integrity']['skipped_messages']['/joint_states']['damaged_chunk']
    assert summary['published']['/joint_states'] == _counts(mcap_bag)['/joint_states'] - skipped


def test_an_mcap_cut_before_its_first_complete_chunk_names_the_truncation(mcap_bag, tmp_path):
    def cut(content):
        del content[4096:]  # the header and the start of the first chunk

    damaged = _damaged_copy(mcap_bag, tmp_path / 'early', cut)
    with BagReader(damaged, allow_partial=True) as reader:
        with pytest.raises(BagError) as error:
            reader.require('/joint_states', ['sensor_msgs/msg/JointState'], 'joint state')
    message = str(error.value)
    assert 'damaged' in message and 'no footer' in message, message
    assert 'is not in bag' not in message
