# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A DROID bag exported, then read back the way upstream DreamZero's training reads it.

The bag is ``dreamzero-make-bag``'s (the real DROID clips where present, Franka joints); the
dataset is read through its meta files, ``modality.json`` and ``pd.read_parquet``, its videos at
the parquet timestamps (``export_support``, written from upstream's reader). Every value is
found in the bag: states at the latest joint state, actions at the next frame's, frames within
the codec's error; the statistics are upstream's own computation over the files; and the
observation the engine builds from an exported step equals the one built live from the bag.
"""

import json

from export_support import (
    bag_messages,
    episode_frame,
    key_values,
    latest_at,
    read_meta,
    upstream_relative_stats,
    upstream_stats,
    video_frames,
)
import numpy as np
import pytest

from dreamzero_ros.core.observations.image_codec import msg_to_rgb
from dreamzero_ros.engine.pipeline.model_inputs import prepare_views
from dreamzero_ros.export.cli import build_parser, config_from_args, main
from dreamzero_ros.export.episodes import EpisodeSpan, PromptTimeline
from dreamzero_ros.export.sampling import sample_bag
from dreamzero_ros.replay.bag_io import BagReader
from dreamzero_ros.replay.bag_maker import BagSpec, make_bag
from dreamzero_ros.replay.observations import observations, query_times

FRAMES = 45
TASK = 'Put the marker in the cup'
DROID_CAMERAS = ('exterior_image_1_left', 'exterior_image_2_left', 'wrist_image_left')


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """(bag, dataset folder, meta, the exported frames' times in the bag and the next one's)."""
    folder = tmp_path_factory.mktemp('round_trip')
    bag = folder / 'bag'
    make_bag(bag, BagSpec(num_frames=FRAMES, source='auto', image_format='rgb8'))
    dataset = folder / 'dataset'
    assert main([str(bag), '-o', str(dataset), '--task', TASK, '--min-frames', '10']) == 0
    meta = read_meta(dataset)
    with BagReader(bag) as reader:
        start = reader.start_ns / 1e9
    first = meta['episodes'][0]['recording']['start_s']
    skipped = round((first - start) * 15)
    length = meta['episodes'][0]['length']
    times = query_times(start, start + (skipped + length + 1) / 15, 1 / 15)[skipped:]
    return bag, dataset, meta, np.array(times[: length + 1])


def test_meta_files_are_lerobot_v21_with_droid_gear_metadata(exported):
    _, dataset, meta, times = exported
    times = times[:-1]
    info = meta['info']
    assert info['codebase_version'] == 'v2.1' and info['fps'] == 15 and info['robot_type']
    assert (info['total_episodes'], info['total_frames']) == (1, len(times))
    assert info['total_videos'] == 3 and info['chunks_size'] == 1000
    for camera in DROID_CAMERAS:
        video = info['features'][f'observation.images.{camera}']
        assert video['shape'] == [180, 320, 3]
        assert (
            video['info']['video.codec'] == 'h264' and video['info']['video.pix_fmt'] == 'yuv420p'
        )
    assert info['features']['observation.state']['shape'] == [14]
    assert info['features']['action']['shape'] == [28]
    assert json.loads((dataset / 'meta/embodiment.json').read_text())['embodiment_tag'] == (
        'oxe_droid'
    )
    # convert_droid.py's sub-keys, in its order
    assert list(meta['modality']['state']) == [
        'cartesian_position',
        'gripper_position',
        'joint_position',
    ]
    assert list(meta['modality']['action']) == [
        'cartesian_position',
        'cartesian_velocity',
        'gripper_position',
        'gripper_velocity',
        'joint_position',
        'joint_velocity',
    ]
    assert meta['modality']['action']['joint_position'] == {
        'start': 14,
        'end': 21,
        'original_key': 'action',
    }
    assert list(meta['modality']['video']) == list(DROID_CAMERAS)
    assert meta['tasks'] == {0: TASK}
    assert meta['episodes'][0]['tasks'] == [TASK] and meta['episodes'][0]['length'] == len(times)


def test_parquet_values_are_the_bags_states_and_next_states(exported):
    bag, dataset, meta, grid = exported
    times = grid[:-1]
    frame = episode_frame(dataset, meta, 0)
    assert list(frame['timestamp']) == [k / 15 for k in range(len(times))]
    assert list(frame['frame_index']) == list(range(len(times)))
    assert list(frame['index']) == list(range(len(times)))
    states = bag_messages(bag, '/joint_states')
    joints = [np.array(latest_at(states, t).position) for t in times]
    after = [np.array(latest_at(states, t).position) for t in grid[1:]]
    np.testing.assert_array_equal(
        key_values(frame, meta, 'state', 'joint_position'), [j[:7] for j in joints]
    )
    np.testing.assert_array_equal(
        key_values(frame, meta, 'state', 'gripper_position')[:, 0], [j[7] for j in joints]
    )
    np.testing.assert_array_equal(
        key_values(frame, meta, 'action', 'joint_position'), [j[:7] for j in after]
    )
    np.testing.assert_array_equal(
        key_values(frame, meta, 'action', 'gripper_position')[:, 0], [j[7] for j in after]
    )
    velocity = key_values(frame, meta, 'action', 'joint_velocity')
    np.testing.assert_allclose(velocity, (np.array(after)[:, :7] - np.array(joints)[:, :7]) / 0.2)
    # the language columns hold the task's index; the RLDS columns DROID's conventions
    for column in ('annotation.language.language_instruction', 'task_index'):
        assert [meta['tasks'][i] for i in frame[column]] == [TASK] * len(times)
    assert list(frame['is_first']) == [True] + [False] * (len(times) - 1)
    assert list(frame['next.done']) == [False] * (len(times) - 1) + [True]
    assert not frame['next.reward'].any() and (frame['discount'] == 1.0).all()


def test_video_frames_at_the_parquet_timestamps_are_the_bags_within_codec_error(exported):
    bag, dataset, meta, grid = exported
    times = grid[:-1]
    frame = episode_frame(dataset, meta, 0)
    for camera in DROID_CAMERAS:
        recorded = bag_messages(bag, f'/{camera}')
        decoded = video_frames(dataset, meta, 0, camera, frame['timestamp'].to_numpy())
        for k, time in enumerate(times):
            original = msg_to_rgb(latest_at(recorded, time)).astype(np.float64)
            error = np.abs(decoded[k].astype(np.float64) - original)
            psnr = 10 * np.log10(255**2 / np.mean(error**2))
            assert psnr > 28 and error.mean() < 4, (camera, k, psnr, error.mean())
            for other in grid[max(k - 1, 0) : k + 2]:  # and it is this frame, not a neighbour
                neighbour = msg_to_rgb(latest_at(recorded, other)).astype(np.float64)
                if not np.array_equal(neighbour, original):
                    assert np.abs(decoded[k] - neighbour).mean() > error.mean(), (camera, k)


def test_statistics_are_upstreams_computation_over_the_files(exported):
    _, dataset, meta, _ = exported
    stats = json.loads((dataset / 'meta/stats.json').read_text())
    expected = upstream_stats(dataset, meta['info'])
    assert set(stats) == {'observation.state', 'action', 'next.reward', 'discount', 'timestamp'}
    assert stats == expected
    relative = json.loads((dataset / 'meta/relative_stats_dreamzero.json').read_text())
    assert list(relative) == ['joint_position']  # droid_relative.yaml's relative_action_keys
    np.testing.assert_allclose(
        [relative['joint_position'][k] for k in ('mean', 'std', 'min', 'max', 'q01', 'q99')],
        [upstream_relative_stats(dataset, meta, 'joint_position', 24)[k]
         for k in ('mean', 'std', 'min', 'max', 'q01', 'q99')],
        rtol=0, atol=1e-15,
    )  # fmt: skip
    line = json.loads((dataset / 'meta/episodes_stats.jsonl').read_text().splitlines()[0])
    action = np.stack(episode_frame(dataset, meta, 0)['action'])
    assert line['stats']['action']['max'] == action.max(axis=0).tolist()
    assert line['stats']['observation.images.wrist_image_left']['mean'][0][0][0] > 0


def test_the_engine_sees_the_same_observation_from_the_dataset_as_live(exported):
    """The exported step t and the bag at t give the engine the same inputs (video: codec)."""
    bag, dataset, meta, grid = exported
    times = grid[:-1]
    args = build_parser().parse_args([str(bag), '--task', TASK])
    config = config_from_args(args)
    embodiment = config.embodiment
    frame = episode_frame(dataset, meta, 0)
    videos = {
        camera: video_frames(dataset, meta, 0, camera, frame['timestamp'].to_numpy())
        for camera in DROID_CAMERAS
    }
    with BagReader(bag) as reader:
        live = list(observations(reader, config.topics, config.cache, list(times), TASK))
    for k, query in enumerate(live):
        observation = query.result
        state = embodiment.state_vector(
            key_values(frame, meta, 'state', 'joint_position')[k],
            key_values(frame, meta, 'state', 'gripper_position')[k],
        )
        np.testing.assert_array_equal(
            state,
            embodiment.state_vector(observation.joint_position, observation.gripper_position),
        )
        task = meta['tasks'][frame['task_index'][k]]
        assert embodiment.prompt(task) == embodiment.prompt(observation.prompt)
        exported_views = prepare_views(
            {c: videos[c][k][None] for c in DROID_CAMERAS}, embodiment, 'cpu'
        )
        live_views = prepare_views(
            {c: observation.images[c][None] for c in DROID_CAMERAS}, embodiment, 'cpu'
        )
        difference = np.abs(exported_views.numpy().astype(float) - live_views.numpy())
        assert difference.mean() < 4, (k, difference.mean())


def test_the_frames_encoded_are_exactly_the_live_observations(exported):
    """Before the codec, each exported frame is the node's observation at that time."""
    bag, _, _, grid = exported
    times = grid[:-1]
    config = config_from_args(build_parser().parse_args([str(bag), '--task', TASK]))

    class Capture:
        frames = []

        def add(self, images):
            self.frames.append({c: np.array(images[c]) for c in images})

        def discard(self):
            raise AssertionError('the episode was refused')

    with BagReader(bag) as reader:
        span = EpisodeSpan(reader.start_ns / 1e9, (reader.end_ns - 1) / 1e9)
        (episode,) = sample_bag(
            reader, config.topics, config.cache, [span], config.sampling, PromptTimeline(), Capture
        )
        live = list(observations(reader, config.topics, config.cache, list(episode.times), TASK))
    assert len(Capture.frames) == len(episode.times) == len(times)
    np.testing.assert_array_equal(episode.times, times)
    for captured, query in zip(Capture.frames, live, strict=True):
        for camera in DROID_CAMERAS:
            np.testing.assert_array_equal(captured[camera], query.result.images[camera])
