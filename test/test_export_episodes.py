# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Episodes, instructions, success, actions and appending of ``dreamzero-export``.

Bags are written with the project's own writers (BagWriter, dreamzero-make-bag) in mcap and
sqlite3: the node's ``~/task_events`` and ``~/prompt``, an operator's success marker, a user's
episode topic, commands, and a live-replay style recording of trajectories read with its bag.
"""

import json

from export_support import (
    ARM,
    START,
    episode_frame,
    key_values,
    read_meta,
    std_message,
    task_event,
    write_bag,
)
import numpy as np
import pytest

from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.export.cli import main
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.bag_maker import BagSpec, make_bag
from dreamzero_ros.replay.topics import ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES

EVENTS = '/dreamzero_policy/task_events'
PROMPT = '/dreamzero_policy/prompt'


def _export(*argv):
    return main([*map(str, argv), '--no-progress', '--min-frames', '5'])


@pytest.fixture(scope='module')
def task_bag(tmp_path_factory):
    """Two tasks; the operator marks the first a failure after it ended."""
    events = [
        (0.5, task_event(START + 0.5, 'a' * 32, 0, 'open the drawer')),
        (2.5, task_event(START + 2.5, 'a' * 32, 1, 'open the drawer', 'time_limit')),
        (3.0, task_event(START + 3.0, 'b' * 32, 0, 'close the drawer')),
        (5.5, task_event(START + 5.5, 'b' * 32, 1, 'close the drawer', 'canceled')),
    ]
    extra = {
        EVENTS: ('dreamzero_ros/msg/TaskEvent', events),
        '/marker': ('std_msgs/msg/Bool', [(2.8, std_message('Bool', False))]),
        PROMPT: ('std_msgs/msg/String', [(0.1, std_message('String', 'ignored by tasks'))]),
    }
    return write_bag(tmp_path_factory.mktemp('tasks') / 'bag', 6.0, extra=extra)


def test_tasks_are_episodes_with_their_instruction_and_outcome(task_bag, tmp_path):
    out = tmp_path / 'ds'
    assert _export(task_bag, '-o', out, '--episodes', 'task') == 0
    meta = read_meta(out)
    episodes = meta['episodes']
    assert [e['tasks'] for e in episodes] == [['open the drawer'], ['close the drawer']]
    assert [e['success'] for e in episodes] == [True, False]  # time_limit, canceled
    # each spans its task: 2.0 s and 2.5 s at 15 Hz (the last frame gives the last action)
    assert [e['length'] for e in episodes] == [30, 37]
    assert [e['recording']['start_s'] - START for e in episodes] == pytest.approx([0.5, 3.0])
    frame = episode_frame(out, meta, 1)
    assert list(frame['episode_index']) == [1] * 37
    assert list(frame['index']) == list(range(30, 67))
    assert meta['tasks'] == {0: 'open the drawer', 1: 'close the drawer'}
    assert frame['next.reward'].sum() == 0


def test_an_operator_marker_decides_success_and_only_success_keeps_those(task_bag, tmp_path):
    out = tmp_path / 'ds'
    argv = [task_bag, '-o', out, '--episodes', 'task', '--success-topic', '/marker']
    assert _export(*argv, '--success-outcomes', 'canceled', '--only-success') == 0
    meta = read_meta(out)
    # the marker (false) overrides the first task's time_limit; the second's canceled counts
    assert [e['tasks'] for e in meta['episodes']] == [['close the drawer']]
    assert meta['episodes'][0]['success'] is True
    frame = episode_frame(out, meta, 0)
    assert list(frame['next.reward']) == [0.0] * 36 + [1.0]
    assert list(frame['is_terminal']) == [False] * 36 + [True]


def test_a_string_topic_cuts_episodes_with_their_instructions(tmp_path):
    messages = [
        (0.3, std_message('String', 'wipe the table')),
        (2.0, std_message('String', '')),
        (2.5, std_message('String', 'stack the cups')),
    ]
    bag = write_bag(tmp_path / 'bag', 4.0, extra={'/episode': ('std_msgs/msg/String', messages)})
    out = tmp_path / 'ds'
    assert _export(bag, '-o', out, '--episodes', 'topic', '--episode-topic', 'episode') == 0
    episodes = read_meta(out)['episodes']
    assert [e['tasks'] for e in episodes] == [['wipe the table'], ['stack the cups']]
    assert [e['success'] for e in episodes] == [None, None]
    assert [e['length'] for e in episodes] == [25, 22]  # to the end of the bag


def test_a_bag_episode_follows_the_prompt_in_force_at_each_frame(tmp_path):
    prompts = [
        (0.0, std_message('String', 'pick the cup')),
        (2.0, std_message('String', 'place it')),
    ]
    bag = write_bag(tmp_path / 'bag', 3.0, extra={PROMPT: ('std_msgs/msg/String', prompts)})
    out = tmp_path / 'ds'
    assert _export(bag, '-o', out) == 0
    meta = read_meta(out)
    assert meta['episodes'][0]['tasks'] == ['pick the cup', 'place it']
    frame = episode_frame(out, meta, 0)
    texts = [meta['tasks'][i] for i in frame['annotation.language.language_instruction_2']]
    change = texts.index('place it')
    assert texts[:change] == ['pick the cup'] * change and change == 30


def test_a_bag_without_any_instruction_is_dropped_and_nothing_is_written(tmp_path, capsys):
    bag = write_bag(tmp_path / 'bag', 2.0)
    out = tmp_path / 'ds'
    assert _export(bag, '-o', out) == 1
    assert not out.exists() and not list(tmp_path.glob('.ds*'))
    err = capsys.readouterr().err
    assert 'dropped bag bag' in err and 'no_instruction' in err and 'not written' in err


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_append_keeps_indices_tasks_and_statistics_as_one_export(tmp_path, storage):
    first = write_bag(tmp_path / 'one', 2.0, storage)
    second = write_bag(tmp_path / 'two', 3.0, storage, image_format='jpeg')
    together, appended = tmp_path / 'together', tmp_path / 'appended'
    assert _export(first, second, '-o', together, '--task', 'stack') == 0
    assert _export(first, '-o', appended, '--task', 'stack') == 0
    assert _export(second, '-o', appended, '--append', '--task', 'stack') == 0
    for name in ('info.json', 'tasks.jsonl', 'stats.json', 'relative_stats_dreamzero.json',
                 'episodes.jsonl', 'episodes_stats.jsonl', 'modality.json'):  # fmt: skip
        assert (appended / 'meta' / name).read_text() == (together / 'meta' / name).read_text()
    meta = read_meta(appended)
    assert [e['episode_index'] for e in meta['episodes']] == [0, 1]
    assert list(episode_frame(appended, meta, 1)['index'])[0] == meta['episodes'][0]['length']
    # another task appended gets the next task index; a dataset of another layout is refused
    assert _export(first, '-o', appended, '--append', '--task', 'wipe') == 0
    assert read_meta(appended)['tasks'] == {0: 'stack', 1: 'wipe'}
    assert _export(first, '-o', appended, '--append', '--task', 'x', '--fps', '10') == 2


def test_command_actions_are_the_command_one_frame_ahead(tmp_path):
    topics = ReplayTopics(command='/joint_command')
    bag = make_bag(tmp_path / 'bag', BagSpec(num_frames=30, source='synthetic', topics=topics))
    out = tmp_path / 'ds'
    argv = [bag['path'], '-o', out, '--task', 't', '--actions', 'command']
    assert _export(*argv, '--command-topic', 'joint_command') == 0
    meta = read_meta(out)
    frame = episode_frame(out, meta, 0)
    start = meta['episodes'][0]['recording']['start_s'] - START
    times = start + np.arange(len(frame)) / 15 + 1 / 15
    # the maker's command leads the measured joints by one frame: the state two frames ahead
    from export_support import droid_clips_state

    expected = np.array([droid_clips_state(t + 1 / 15) for t in times])
    actions = key_values(frame, meta, 'action', 'joint_position')
    np.testing.assert_allclose(actions, expected[:, :7], atol=1e-6)


def test_a_recording_of_trajectories_is_read_with_the_bag_it_played(tmp_path):
    """A live-replay style recording (trajectories only) joined with its bag by a comma."""
    bag = write_bag(tmp_path / 'bag', 3.0)
    recording = tmp_path / 'recording'
    topic = '/joint_trajectory_controller/joint_trajectory'
    target = np.array([0.1, -0.5, 0.1, -2.0, 0.1, 1.5, 0.7])
    with BagWriter(recording) as writer:
        writer.add_topic(topic, 'trajectory_msgs/msg/JointTrajectory')
        for second in range(3):  # a chunk per second: from here to the target in 1 s
            stamp = to_ns(START + second)
            rows = np.linspace(target * second / 3, target * (second + 1) / 3, 16)[1:]
            offsets = [to_ns((i + 1) / 15) for i in range(15)]
            writer.write(topic, stamp, BAG_MESSAGES.trajectory(stamp, ARM, offsets, rows))
    out = tmp_path / 'ds'
    argv = [f'{bag},{recording}', '-o', out, '--task', 't', '--actions', 'command']
    assert _export(*argv, '--command-topic', topic) == 0
    meta = read_meta(out)
    actions = key_values(episode_frame(out, meta, 0), meta, 'action', 'joint_position')
    assert meta['episodes'][0]['recording']['bag'] == 'bag,recording'
    # within the first chunk the command at t is t * target / 3
    ahead = meta['episodes'][0]['recording']['start_s'] - START + np.arange(1, 15) / 15
    np.testing.assert_allclose(actions[:14], ahead[:, None] * target / 3, atol=1e-6)
    assert json.loads((out / 'meta/info.json').read_text())['total_episodes'] == 1


def _rewrite(source, target, compressed=False, split_at=None):
    """The bag again with rosbags' writer: zstd per message, or split into two files."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
    import yaml

    with Reader(source) as reader:
        connections = list(reader.connections)
        messages = [(c.id, log_ns, bytes(raw)) for c, log_ns, raw in reader.messages()]
    parts = [messages]
    if split_at is not None:
        cut = to_ns(START + split_at)
        parts = [[m for m in messages if m[1] < cut], [m for m in messages if m[1] >= cut]]
    names = []
    for index, part in enumerate(parts):
        path = target.parent / f'{target.name}_{index}'
        writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        if compressed:
            writer.set_compression(CompressionMode.MESSAGE, CompressionFormat.ZSTD)
        with writer:
            added = {
                c.id: writer.add_connection(
                    c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest
                )
                for c in connections
            }
            for connection, log_ns, raw in part:
                writer.write(added[connection], log_ns, raw)
        names.append(path)
    target.mkdir()
    info = yaml.safe_load((names[0] / 'metadata.yaml').read_text())
    files = []
    for path in names:
        (mcap,) = path.glob('*.mcap')
        mcap.rename(target / mcap.name)
        files.append(mcap.name)
    info['rosbag2_bagfile_information']['relative_file_paths'] = files
    (target / 'metadata.yaml').write_text(yaml.safe_dump(info))
    return target


def test_compressed_and_split_bags_export_as_the_plain_one(tmp_path):
    import pandas as pd

    plain = write_bag(tmp_path / 'plain', 3.0)
    variants = {
        'plain': plain,
        'compressed': _rewrite(plain, tmp_path / 'compressed', compressed=True),
        'split': _rewrite(plain, tmp_path / 'split', split_at=1.4),
    }
    frames = {}
    for name, bag in variants.items():
        out = tmp_path / f'ds_{name}'
        assert _export(bag, '-o', out, '--task', 'stack') == 0, name
        meta = read_meta(out)
        frames[name] = episode_frame(out, meta, 0)
        stats = (out / 'meta/stats.json').read_text()
        assert stats == (tmp_path / 'ds_plain/meta/stats.json').read_text(), name
    for name in ('compressed', 'split'):
        pd.testing.assert_frame_equal(frames[name], frames['plain'])
    assert len(list(variants['split'].glob('*.mcap'))) == 2
