# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Live replay over real DDS: bag -> topics with /clock -> a use_sim_time process -> new bag."""

import json
from pathlib import Path
import subprocess
import sys

from node_support import ros_env
import numpy as np
import pytest
from replay_support import demo_bag, demo_state

from dreamzero_ros.core.observations.messages import ACTION_CHUNK_TYPE, stamp_to_ns, to_ns
from dreamzero_ros.replay.bag_io import BagReader, BagWriter
from dreamzero_ros.replay.live_replay import LiveReplayConfig, _Recorder, node_topic
from dreamzero_ros.replay.topics import ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES, replay_typestore
from dreamzero_ros.replay.video import recorded_predictions

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

HERE = Path(__file__).resolve().parent
START = 1_700_000_000.0


def _live_replay(*args, timeout=60):
    command = [sys.executable, '-c', 'from dreamzero_ros.replay.cli import live_main; '
               'raise SystemExit(live_main())', *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ros_env())


def test_bag_is_played_with_clock_and_answers_are_recorded(tmp_path):
    bag = demo_bag(tmp_path, num_frames=15, image_format='rgb8')  # 1 s, joints at 50 Hz
    peer = subprocess.Popen(
        [sys.executable, str(HERE / 'replay_live_peer.py')],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ros_env(),
    )
    try:
        assert peer.stdout.readline().strip() == 'ready'
        out = tmp_path / 'recorded'
        result = _live_replay(str(bag), '--record', str(out), '--linger', '0.5', '--wait', '20')
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        peer_out, _ = peer.communicate(timeout=30)
    finally:
        peer.kill()
    heard = json.loads(peer_out.strip().splitlines()[-1])

    assert summary['published'] == {
        '/wrist_image_left': 15,
        '/exterior_image_1_left': 15,
        '/exterior_image_2_left': 15,
        '/joint_states': 50,
    }
    assert summary['without_subscribers'] == []
    assert heard['images'] == 45 and heard['joint_states'] == 50
    # the peer's sim-time clock reached each joint state's stamp by its arrival (within a
    # tick: the topics are not ordered), and was never further ahead than the node's max_skew
    assert -0.011 <= heard['clock_lag_min'] <= heard['clock_lag_max'] < 0.2
    assert heard['clock'] >= 100  # 1.5 s of 10 ms ticks, plus one per message
    assert heard['answers'] == 5

    preview = node_topic('~/preview_trajectory')
    chunk_topic = node_topic('~/action_chunk')
    with BagReader(out) as reader:
        assert reader.topics[preview] == 'trajectory_msgs/msg/JointTrajectory'
        assert reader.topics[chunk_topic] == ACTION_CHUNK_TYPE
        trajectories = list(reader.messages([preview]))
        chunks = list(reader.messages([chunk_topic]))
    assert len(trajectories) == 5
    for index, (_, log_ns, msg) in enumerate(trajectories):
        stamp_ns = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        # the 10th, 20th, ... joint state (every 0.2 s), recorded at sim time of arrival
        assert stamp_ns == to_ns(START + (10 * index + 9) * 0.02)
        assert 0 <= log_ns - stamp_ns <= 20_000_000
        state = demo_state([(10 * index + 9) * 0.02])[0]
        np.testing.assert_allclose(msg.points[2].positions, state + 0.2, atol=1e-9)
    if heard['chunks_built']:
        assert [m.chunk_id for _, _, m in chunks] == [0, 1, 2, 3, 4]
        assert all(m.horizon == 3 and m.session_id == 'peer' for _, _, m in chunks)
        assert list(chunks[0][2].joint_names) == ReplayTopics().joint_names


def test_chunks_are_rebuilt_from_previews_where_the_interface_is_not_built(tmp_path):
    config = LiveReplayConfig()
    names = ReplayTopics().joint_names
    rows = np.arange(24, dtype=np.float64).reshape(3, 8)
    store = replay_typestore()
    with BagWriter(tmp_path / 'out', 'sqlite3') as writer:
        writer.add_topic(config.preview_topic, 'trajectory_msgs/msg/JointTrajectory')
        writer.add_topic(config.chunk_topic, ACTION_CHUNK_TYPE)
        recorder = _Recorder(writer, config)
        recorder.rebuild_chunks = True
        # chunks (first point at their arrival), a hold at rest (zero stamp) and a braking hold
        # (stamped when made, first point there)
        for stamp_s, arrival_s, first_s in (
            (10.0, 10.4, 0.4),
            (0.0, 10.5, 0.0),
            (10.6, 10.6, 0.0),
            (11.0, 11.25, 0.25),
        ):
            recorder.sim_ns = to_ns(arrival_s)
            offsets = [to_ns(first_s) + k * 66_666_667 for k in range(len(rows))]
            msg = BAG_MESSAGES.trajectory(to_ns(stamp_s), names, offsets, rows)
            recorder.on_message(config.preview_topic, store.serialize_cdr(msg, msg.__msgtype__))
    assert recorder.counts == {config.preview_topic: 4, 'rebuilt_chunks': 2}
    with BagReader(tmp_path / 'out') as reader:
        chunks = [m for _, _, m in reader.messages([config.chunk_topic])]
    assert [c.chunk_id for c in chunks] == [0, 1]  # the holds are no chunks
    assert chunks[0].horizon == 3 and chunks[0].step_duration.nanosec == 66_666_667
    assert chunks[0].inference_latency == pytest.approx(0.4)
    assert chunks[1].inference_latency == pytest.approx(0.25)
    np.testing.assert_array_equal(chunks[0].positions.reshape(3, 8), rows)


def test_cli_errors(tmp_path):
    result = _live_replay(str(tmp_path / 'missing'), '--wait', '0')
    assert result.returncode == 2
    assert 'does not exist' in result.stderr
    bag = demo_bag(tmp_path, num_frames=2)
    result = _live_replay(str(bag), '--topic', '/nope', '--wait', '0')
    assert result.returncode == 2
    assert "topic '/nope' is not in bag" in result.stderr
    result = _live_replay(str(bag), '--param', 'no_such_parameter=1')
    assert result.returncode == 2
    assert 'unknown' in result.stderr


def test_policy_node_runs_on_the_bag_clock_and_its_chunks_are_recorded(tmp_path):
    """The real node (tiny engine, use_sim_time) driven by a played bag; its outputs recorded."""
    from node_support import CONFIG, NodeProcess

    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', 'tiny')
    bag = demo_bag(tmp_path, num_frames=30, image_format='rgb8')  # 2 s
    node = NodeProcess(
        tmp_path / 'node.log',
        'use_sim_time:=true',
        f'engine.checkpoint:={checkpoint}',
        # the demo bag's gripper is the normalised panda_gripper, not the sim arm's finger
        'gripper_joint_name:=panda_gripper',
        'gripper_range:=[0.0, 1.0]',
        'gripper.interface:=none',
        # the bag's slow motion (--rate) stands for cpu_small's; the predicted frames play at
        # the times they stand for, a newer chunk's replacing those still to come: the next
        # chunk comes after the first one's 24 rows at 15 Hz (1.6 s) have played
        'scheduler.step_duration:=0.0',
        'scheduler.min_replan_period:=1.7',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    out = tmp_path / 'recorded'
    try:
        # slow motion: the CPU engine's wall-clock latency stays short in bag time
        result = _live_replay(
            str(bag), '--record', str(out), '--rate', '0.1', '--linger', '10',
            '--until-chunks', '2', '--wait', '120', '--imagination', str(tmp_path / 'imagined'),
            timeout=300,
        )  # fmt: skip
    finally:
        # with the bag over, /clock is paused: SIGINT must still end the node cleanly
        node_status = node.stop(timeout=15.0)
    assert result.returncode == 0, result.stderr + node.log()[-3000:]
    assert node_status == 0, node.log()[-3000:]
    summary = json.loads(result.stdout)
    assert summary['without_subscribers'] == []

    chunk_topic, preview = node_topic('~/action_chunk'), node_topic('~/preview_trajectory')
    with BagReader(out) as reader:
        chunks = list(reader.messages([chunk_topic]))
        previews = [m for _, _, m in reader.messages([preview])]
    assert len(chunks) >= 2, node.log()[-3000:]
    bag_end_ns = to_ns(START + 2.0)
    for log_ns, (_, _, msg) in ((c[1], c) for c in chunks):
        stamp_ns = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        # stamped with a recorded observation time, recorded on the bag clock after it
        assert to_ns(START) <= stamp_ns <= bag_end_ns
        assert stamp_ns <= log_ns <= bag_end_ns + to_ns(10.0)
        assert msg.horizon == 24 and list(msg.joint_names) == ReplayTopics().joint_names
        assert msg.inference_latency == pytest.approx((log_ns - stamp_ns) / 1e9, abs=0.05)
        positions = np.asarray(msg.positions).reshape(24, 8)
        assert np.all(np.isfinite(positions))
    assert [m.chunk_id for _, _, m in chunks][:2] == [0, 1]
    planned = [m for m in previews if m.header.stamp.sec != 0]  # not the zero-stamp holds
    assert planned and all(len(m.points) > 1 for m in planned)
    # the recorder subscribed to the view topics, so the node decoded and published them
    with BagReader(out) as reader:
        assert list(reader.messages([node_topic('~/model_input/compressed')]))
    cameras = list(ReplayTopics().cameras)
    predictions = recorded_predictions(out, 'dreamzero_policy', cameras)
    assert predictions and all(len(v) == 8 for v in predictions[0].cameras.values())
    with BagReader(out) as reader:  # each published when the bag's clock reached its time
        camera = node_topic(f'~/predicted_video/{cameras[0]}')
        topics = [topic for topic in reader.topics if topic.startswith(camera)]
        played = [(log_ns, stamp_to_ns(m.header.stamp)) for _, log_ns, m in reader.messages(topics)]
    assert played and all(log_ns >= stamp_ns for log_ns, stamp_ns in played)
    # --imagination drew them over the camera frames, one figure per recorded chunk (up to 8)
    assert len(summary['imagination']) == min(len(predictions), 8)  # at most 8 figures
    assert Path(summary['imagination'][0]).read_bytes().startswith(b'\x89PNG')
