# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Reference trajectories from command topics, node parameter files, CLI and progress output."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from replay_support import STEP, ScriptedPolicy, demo_bag

from dreamzero_ros.cli_options import parse_parameter
from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagReader, BagWriter
from dreamzero_ros.replay.cli import make_bag_main
from dreamzero_ros.replay.evaluation import EvaluationConfig, evaluate_bag
from dreamzero_ros.replay.progress import ProgressBar
from dreamzero_ros.replay.reference import read_trajectory
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.topics import ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES

CONFIG = Path(__file__).resolve().parents[1] / 'config'
NAMES = ReplayTopics().joint_names
START = 1_700_000_000.0


def test_trajectory_commands_replace_the_unreached_points(tmp_path):
    rows = np.tile(np.arange(8, dtype=float), (4, 1))
    with BagWriter(tmp_path / 'cmd', 'mcap') as writer:
        writer.add_topic('/cmd', 'trajectory_msgs/msg/JointTrajectory')
        # 4 points 0.1 s apart from t=10; a new trajectory at t=10.2 replaces points >= 10.2
        steps = [k * 10**8 for k in range(4)]
        writer.write('/cmd', to_ns(10.0), BAG_MESSAGES.trajectory(to_ns(10.0), NAMES, steps, rows))
        writer.write(
            '/cmd', to_ns(10.2), BAG_MESSAGES.trajectory(to_ns(10.2), NAMES, steps, rows + 1.0)
        )
        # a zero stamp starts on receipt (log time 11.0); gripper range maps 0..0.08 onto 0..1
        shuffled = [NAMES[7], *NAMES[:7]]
        hold = BAG_MESSAGES.trajectory(0, shuffled, [0], rows[:1] * 0 + 0.04)
        writer.write('/cmd', to_ns(11.0), hold)
    with BagReader(tmp_path / 'cmd') as reader:
        trajectory = read_trajectory(reader, '/cmd', tuple(NAMES), gripper_range=(0.0, 0.08))
    np.testing.assert_allclose(trajectory.times, [10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 11.0])
    np.testing.assert_allclose(trajectory.positions[:2, 0], [0.0, 0.0])
    np.testing.assert_allclose(trajectory.positions[2:6, 0], [1.0] * 4)
    np.testing.assert_allclose(trajectory.positions[0, 7], 1.0)  # 7 / 0.08 clipped to 1
    np.testing.assert_allclose(trajectory.positions[6], [0.04] * 7 + [0.5])
    np.testing.assert_allclose(
        trajectory.at(np.array([10.05, 10.45, 9.0]))[:, 1], [1.0, 2.0, np.nan]
    )


def test_reference_of_partial_joint_states_and_bad_messages(tmp_path):
    with BagWriter(tmp_path / 'js', 'sqlite3') as writer:
        writer.add_topic('/arm', 'sensor_msgs/msg/JointState')
        first = BAG_MESSAGES.joint_state(to_ns(1.0), NAMES[:7], np.ones(7))
        writer.write('/arm', to_ns(1.0), first)
        writer.write('/arm', to_ns(2.0), BAG_MESSAGES.joint_state(0, NAMES[:7], np.full(7, 3.0)))
    with BagReader(tmp_path / 'js') as reader:
        trajectory = read_trajectory(reader, '/arm', tuple(NAMES))
    np.testing.assert_allclose(trajectory.times, [1.0, 2.0])  # zero stamp: log time
    assert np.isnan(trajectory.positions[:, 7]).all()  # no gripper on this topic
    np.testing.assert_allclose(trajectory.at(np.array([1.5]))[0, :7], 2.0)

    with BagWriter(tmp_path / 'bad', 'mcap') as writer:
        writer.add_topic('/arm', 'sensor_msgs/msg/JointState')
        writer.write('/arm', to_ns(1.0), BAG_MESSAGES.joint_state(to_ns(1.0), NAMES, np.ones(3)))
    with BagReader(tmp_path / 'bad') as reader, pytest.raises(BagError, match='8 names but 3'):
        read_trajectory(reader, '/arm', tuple(NAMES))


def test_droid_parameter_file_gives_four_frame_clips(tmp_path):
    # the demo bag's gripper joint is the normalised panda_gripper, not the Franka hand's finger
    demo_gripper = {'gripper_joint_name': 'panda_gripper', 'gripper_range': [0.0, 1.0]}
    settings = node_settings(CONFIG / 'droid.yaml', {'max_age': 2.0, **demo_gripper})
    assert settings.cache.max_age == 2.0 and len(settings.cache.clip_offsets) == 4
    topics = ReplayTopics.from_settings(settings, None, 'auto')
    bag = demo_bag(tmp_path, num_frames=30, image_format='jpeg')
    policy = ScriptedPolicy(np.zeros((3, 8)), start_s=START)
    config = EvaluationConfig(topics, settings.cache, 'p', query_period_s=1.5)
    evaluate_bag(bag, policy, config)
    clips = [obs.images['wrist_image_left'].shape for obs in policy.observations]
    assert clips == [(4, 180, 320, 3)] * 2
    with pytest.raises(ValueError, match=r"unknown node parameters \['max_agee'\]"):
        node_settings(overrides={'max_agee': 1.0})
    assert parse_parameter('clip_offsets=[-0.5, 0.0]') == ('clip_offsets', [-0.5, 0.0])
    assert parse_parameter('clip_offsets:=[-0.5]') == ('clip_offsets', [-0.5])
    with pytest.raises(ValueError, match='expected NAME:=VALUE'):
        parse_parameter(':=1')


def test_make_bag_console_script(tmp_path, capsys):
    out = tmp_path / 'demo'
    status = make_bag_main([
        '-o', str(out), '--storage', 'sqlite3', '--frames', '4', '--source', 'synthetic',
        '--command-topic', 'joint_command', '-p', 'joint_states_topic:=/robot/joints',
        '-p', 'image_transport:=compressed',  # jpeg, as that node reads them
    ])  # fmt: skip
    assert status == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary['camera_frames'] == 4 and summary['storage'] == 'sqlite3'
    lines = captured.err.splitlines()  # what it does first, then its progress
    assert lines[0] == f'dreamzero-make-bag: writing {out} (sqlite3)'
    assert lines[1].startswith('make-bag [') and lines[-1].startswith('make-bag [#####')
    assert '100.0% 0.3/0.3 s of bag' in lines[-1]
    with BagReader(out) as reader:
        assert reader.topics['/robot/joints'] == 'sensor_msgs/msg/JointState'
        assert reader.topics['/joint_command'] == 'sensor_msgs/msg/JointState'
        assert reader.topics['/wrist_image_left/compressed'] == 'sensor_msgs/msg/CompressedImage'
    assert make_bag_main(['--output', str(out)]) == 2  # exists
    assert 'exists' in capsys.readouterr().err


def test_progress_bar_prints_every_tenth_when_not_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar('replay', stream=stream)
    for step in range(101):
        bar(step * STEP, 100 * STEP)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11
    assert lines[0].startswith('replay [') and '0.0%' in lines[0]
    assert '100.0%' in lines[-1] and '6.7/6.7 s' in lines[-1]


def test_replay_interrupted_while_writing_leaves_no_output_folder(tmp_path, monkeypatch, capsys):
    from dreamzero_ros.console import EXIT_INTERRUPTED
    from dreamzero_ros.replay import report
    from dreamzero_ros.replay.cli import replay_main

    bag = tmp_path / 'bag'
    assert make_bag_main(['-o', str(bag), '--frames', '8', '--source', 'synthetic']) == 0
    arguments = [str(bag), '--preset', 'tiny', '--max-chunks', '1', '--no-progress']
    write_outputs = report.write_outputs

    def interrupted(evaluation, out_dir, *args):
        Path(out_dir).mkdir(parents=True, exist_ok=True)  # as write_outputs does
        (Path(out_dir) / 'metrics.json').write_text('{}')  # half written
        raise KeyboardInterrupt

    monkeypatch.setattr(report, 'write_outputs', interrupted)
    out = tmp_path / 'replay'
    assert replay_main([*arguments, '-o', str(out)]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines()[-1] == 'dreamzero-replay: interrupted'
    assert sorted(path.name for path in tmp_path.iterdir()) == ['bag']  # nor a partial one

    monkeypatch.setattr(report, 'write_outputs', write_outputs)
    assert replay_main([*arguments, '-o', str(out)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    notes = captured.err.splitlines()  # what it does, and the load per checkpoint shard
    assert notes[0] == f'dreamzero-replay: checking {bag} (topics, stamps, CRCs)'
    assert any(n.startswith('dreamzero-replay: loading weights: ') for n in notes), notes
    for shard in ('file 1/2 model-00001-of-00002', 'file 2/2 model-00002-of-00002'):
        assert any(n.startswith(f'dreamzero-replay: loaded weights: {shard}') for n in notes)
    assert summary['outputs']['report'] == str(out / 'report.html')
    assert (out / 'report.html').is_file() and (out / 'metrics.json').is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ['bag', 'replay']
