# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Bag maker and bag reader: both storages, both image formats, and bad bags."""

from pathlib import Path
import shutil

import numpy as np
import pytest
from replay_support import demo_bag, demo_state
from rosbags.highlevel import AnyReader

from dreamzero_ros import droid_clips
from dreamzero_ros.core.observations.image_codec import msg_to_rgb
from dreamzero_ros.core.observations.messages import ACTION_CHUNK_TYPE, to_ns
from dreamzero_ros.errors import BagError
from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk
from dreamzero_ros.replay.bag_io import BagReader, BagWriter
from dreamzero_ros.replay.bag_maker import BagSpec, make_bag
from dreamzero_ros.replay.topics import ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES, replay_typestore

START = 1_700_000_000.0


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
@pytest.mark.parametrize('image_format', ['rgb8', 'jpeg'])
def test_made_bag_reads_back_with_plain_rosbags(tmp_path, storage, image_format):
    path = demo_bag(
        tmp_path,
        storage=storage,
        image_format=image_format,
        joint_rate_hz=30.0,
        topics=ReplayTopics(command='/joint_command'),
    )
    assert (path / 'metadata.yaml').is_file()
    assert any(p.suffix == ('.mcap' if storage == 'mcap' else '.db3') for p in path.iterdir())
    frames = droid_clips.synthetic_clips(6)
    suffix = '/compressed' if image_format == 'jpeg' else ''
    image_type = 'CompressedImage' if image_format == 'jpeg' else 'Image'
    with AnyReader([path]) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        for camera in DROID_CAMERAS:
            assert topics[f'/{camera}{suffix}'] == f'sensor_msgs/msg/{image_type}'
        assert topics['/joint_states'] == 'sensor_msgs/msg/JointState'
        assert topics['/joint_command'] == 'sensor_msgs/msg/JointState'
        counts = {topic: 0 for topic in topics}
        for connection, log_ns, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            stamp_ns = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            assert stamp_ns == log_ns
            index = counts[connection.topic]
            counts[connection.topic] += 1
            t = stamp_ns / 1e9 - START
            if connection.topic == '/joint_states':
                assert list(msg.name) == ReplayTopics().joint_names
                np.testing.assert_allclose(msg.position, demo_state([index / 30.0])[0])
            elif connection.topic == '/joint_command':
                np.testing.assert_allclose(msg.position, demo_state([t + 1 / 15])[0], atol=1e-6)
            else:
                camera = connection.topic.strip('/').removesuffix('/compressed')
                assert t == pytest.approx(index / 15.0, abs=1e-6)
                rgb = msg_to_rgb(msg)
                expected = frames[camera][index].astype(int)
                tolerance = 0 if image_format == 'rgb8' else 12
                assert np.abs(rgb.astype(int) - expected).mean() <= tolerance
    assert counts['/joint_states'] == 12  # 6 frames at 15 Hz = 0.4 s at 30 Hz
    assert counts['/joint_command'] == 6
    assert all(counts[f'/{c}{suffix}'] == 6 for c in DROID_CAMERAS)


def test_bag_from_real_droid_clips(tmp_path):
    if droid_clips.find_clips_dir() is None:
        pytest.skip('DROID clips not found (../shared/data/droid_videos)')
    summary = make_bag(tmp_path / 'droid', BagSpec(num_frames=3, source='droid'))
    assert summary['frames'] == 'DROID clips'
    clips = droid_clips.load_clips(max_frames=3)
    with BagReader(tmp_path / 'droid') as reader:
        wrist = [msg_to_rgb(m) for _, _, m in reader.messages(['/wrist_image_left'])]
    assert len(wrist) == 3
    np.testing.assert_array_equal(wrist[2], clips['wrist_image_left'][2])


def test_action_chunk_type_round_trips_through_a_bag(tmp_path):
    chunk = ActionChunk(np.arange(24, dtype=np.float32).reshape(3, 8), stamp=12.5, chunk_id=7)
    names = ReplayTopics().joint_names
    with BagWriter(tmp_path / 'chunks', 'sqlite3') as writer:
        writer.add_topic('/dreamzero_policy/action_chunk', ACTION_CHUNK_TYPE)
        writer.add_topic('/trajectory', 'trajectory_msgs/msg/JointTrajectory')
        message = BAG_MESSAGES.action_chunk(
            to_ns(chunk.stamp),
            names,
            chunk.actions,
            to_ns(chunk.step_duration),
            chunk.chunk_id,
            0.5,
            's',
        )
        writer.write('/dreamzero_policy/action_chunk', to_ns(13.0), message)
        trajectory = BAG_MESSAGES.trajectory(to_ns(12.5), names, [0, 10, 20], chunk.actions)
        writer.write('/trajectory', to_ns(13.0), trajectory)
    with AnyReader([tmp_path / 'chunks']) as reader:
        assert reader.topics['/dreamzero_policy/action_chunk'].msgtype == ACTION_CHUNK_TYPE
        messages = {c.topic: reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages()}
    msg = messages['/dreamzero_policy/action_chunk']
    assert (msg.horizon, msg.chunk_id, msg.session_id) == (3, 7, 's')
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 500_000_000)
    assert msg.inference_latency == pytest.approx(0.5)
    np.testing.assert_array_equal(msg.positions.reshape(3, 8), chunk.actions)
    trajectory = messages['/trajectory']
    assert [p.time_from_start.nanosec for p in trajectory.points] == [0, 10, 20]
    msgdef = (Path(__file__).resolve().parents[1] / 'msg/ActionChunk.msg').read_text()
    assert 'float64[] positions' in msgdef
    assert set(replay_typestore().types[ACTION_CHUNK_TYPE].__dataclass_fields__) >= {
        'header', 'step_duration', 'joint_names', 'positions', 'horizon', 'chunk_id'
    }  # fmt: skip


def _data_file(bag: Path) -> Path:
    return next(p for p in bag.iterdir() if p.suffix in ('.mcap', '.db3'))


@pytest.fixture(scope='module')
def good_bags(tmp_path_factory):
    folder = tmp_path_factory.mktemp('good')
    return {s: demo_bag(folder, s, storage=s, num_frames=4) for s in ('mcap', 'sqlite3')}


def _read_all(path):
    with BagReader(path) as reader:
        return sum(1 for _ in reader.messages(list(reader.topics)))


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_truncated_bag_is_a_clear_error(tmp_path, good_bags, storage):
    copy = tmp_path / 'truncated'
    shutil.copytree(good_bags[storage], copy)
    data = _data_file(copy)
    with open(data, 'r+b') as handle:
        handle.truncate(data.stat().st_size // 2)
    with pytest.raises(BagError, match=r'truncated|cannot open bag|corrupt'):
        _read_all(copy)


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
@pytest.mark.parametrize('where', ['head', 'tail'])
def test_corrupt_bag_is_a_clear_error(tmp_path, good_bags, storage, where):
    """64 garbage bytes over the records after the file header, or over the index at the end."""
    copy = tmp_path / 'corrupt'
    shutil.copytree(good_bags[storage], copy)
    data = _data_file(copy)
    content = bytearray(data.read_bytes())
    start = 100 if where == 'head' else len(content) - 200
    content[start : start + 64] = b'\xff' * 64
    data.write_bytes(bytes(content))
    with pytest.raises(BagError, match=r'corrupt|cannot open bag'):
        _read_all(copy)


def test_missing_metadata_and_missing_folder(tmp_path, good_bags):
    copy = tmp_path / 'nometa'
    shutil.copytree(good_bags['mcap'], copy)
    (copy / 'metadata.yaml').unlink()
    with pytest.raises(BagError, match='cannot open bag'):
        BagReader(copy)
    with pytest.raises(BagError, match='does not exist'):
        BagReader(tmp_path / 'nowhere')


def test_require_names_missing_topic_and_wrong_type(good_bags):
    with BagReader(good_bags['mcap']) as reader:
        with pytest.raises(BagError, match=r"camera topic '/nope' is not in bag .* /joint_states"):
            reader.require('/nope', ('sensor_msgs/msg/Image',), 'camera')
        with pytest.raises(
            BagError, match=r'has type sensor_msgs/msg/JointState, expected sensor_msgs/msg/Image'
        ):
            reader.require('/joint_states', ('sensor_msgs/msg/Image',), 'camera')


def test_writer_refuses_existing_folder_and_unknown_storage(tmp_path, good_bags):
    with pytest.raises(BagError, match='exists'):
        BagWriter(good_bags['mcap'])
    with pytest.raises(BagError, match='unknown storage'):
        BagWriter(tmp_path / 'x', 'rosbag1')


def test_bag_spec_validation():
    with pytest.raises(ValueError, match='image_format'):
        BagSpec(image_format='png')
    with pytest.raises(ValueError, match='source'):
        BagSpec(source='youtube')
