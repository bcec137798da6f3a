# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Predicted frames beside the recorded ones: from an evaluation and from a recorded bag."""

import numpy as np
import pytest
from replay_support import demo_bag, evaluate_two_chunks

from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.live_replay import recorded_outputs
from dreamzero_ros.replay.report import write_outputs
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.topics import COMPRESSED_IMAGE_TYPE, ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES
from dreamzero_ros.replay.video import ImaginationStrips, recorded_predictions

START = 1_700_000_000.0
PNG = b'\x89PNG'


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    return demo_bag(tmp_path_factory.mktemp('bag'), num_frames=15, image_format='jpeg')


def test_report_shows_each_chunks_predicted_frames_per_camera(tmp_path, bag):
    checkpoint = write_random_checkpoint(tmp_path / 'tiny', 'tiny')
    strips = ImaginationStrips()
    _, topics, evaluation = evaluate_two_chunks(bag, checkpoint, strips.add_chunk)
    assert len(strips.chunks) == 2
    for chunk, record in zip(strips.chunks, evaluation.records, strict=True):
        assert sorted(chunk.cameras) == sorted(topics.cameras)
        assert all(len(frames) == 8 for frames in chunk.cameras.values())
        horizon = record.step_duration * len(record.actions)
        np.testing.assert_allclose(
            np.array(chunk.times) - record.stamp, (np.arange(8) + 1) * horizon / 8, atol=1e-6
        )
    figures = strips.render(bag, topics)
    assert list(figures) == ['imagination_0', 'imagination_1']
    assert all(png.startswith(PNG) for png in figures.values())
    written = write_outputs(evaluation, tmp_path / 'out', None, figures)
    assert written['imagination_0'].read_bytes().startswith(PNG)
    html = written['report'].read_text()
    assert html.count('data:image/png;base64,') == 4 + 2
    assert 'predicted frames (upper row of each camera)' in html


def test_predicted_frames_are_read_back_from_a_recording_chunk_by_chunk(tmp_path, bag):
    cameras = ['exterior_image_1_left', 'wrist_image_left']
    recording = tmp_path / 'recorded'
    writer = BagWriter(recording, 'mcap')
    for camera in cameras:
        writer.add_topic(
            f'/dreamzero_policy/predicted_video/{camera}/compressed', COMPRESSED_IMAGE_TYPE
        )
    # two chunks whose predicted times overlap (a chunk every 0.5 s, 8 frames over 1.6 s)
    for chunk_index, stamp in enumerate((START, START + 0.5)):
        for camera in cameras:
            for j in range(8):
                rgb = np.full((16, 32, 3), 30 * chunk_index + j, dtype=np.uint8)
                msg = BAG_MESSAGES.compressed_image(to_ns(stamp + (j + 1) * 0.2), rgb, camera)
                topic = f'/dreamzero_policy/predicted_video/{camera}/compressed'
                writer.write(topic, to_ns(stamp + 0.3), msg)
    writer.close()
    chunks = recorded_predictions(recording, 'dreamzero_policy', cameras)
    assert [c.stamp - START for c in chunks] == pytest.approx([0.0, 0.5])
    for chunk in chunks:
        assert sorted(chunk.cameras) == sorted(cameras)
        assert [len(v) for v in chunk.cameras.values()] == [8, 8]
    strips = ImaginationStrips()
    for chunk in chunks:
        strips.add(chunk)
    topics = ReplayTopics.from_settings(node_settings(), None, 'auto')
    figures = strips.render(bag, topics)
    assert len(figures) == 2 and all(png.startswith(PNG) for png in figures.values())


def test_live_replay_records_the_view_topics():
    outputs = recorded_outputs(node_settings())
    node = '/dreamzero_policy'
    assert outputs[f'{node}/task_events'] == 'dreamzero_ros/msg/TaskEvent'  # the tasks too
    assert outputs[f'{node}/model_input/compressed'] == COMPRESSED_IMAGE_TYPE
    assert outputs[f'{node}/predicted_video/compressed'] == COMPRESSED_IMAGE_TYPE
    assert outputs[f'{node}/predicted_video/wrist_image_left/compressed'] == COMPRESSED_IMAGE_TYPE
    raw = recorded_outputs(node_settings(None, {'views.encoding': 'raw'}))
    assert raw['/dreamzero_policy/model_input'] == 'sensor_msgs/msg/Image'
    off = recorded_outputs(node_settings(None, {'views.enabled': False}))
    assert not [topic for topic in off if 'predicted_video' in topic or 'model_input' in topic]
