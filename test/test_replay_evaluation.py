# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Offline evaluation on made bags: pairing as the node pairs, metrics against hand values."""

import numpy as np
import pytest
from replay_support import STEP, ScriptedPolicy, demo_bag, demo_state

from dreamzero_ros import droid_clips
from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.errors import BagError
from dreamzero_ros.policy_types import ObservationError
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.evaluation import EvaluationConfig, evaluate_bag
from dreamzero_ros.replay.observations import query_times
from dreamzero_ros.replay.report import write_outputs
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.topics import ReplayTopics
from dreamzero_ros.replay.typestore import BAG_MESSAGES

START = 1_700_000_000.0
INTERPOLATION_TOL = 1e-4  # linear interpolation of the 50 Hz joint states


def _config(command=None, transport='auto', **overrides):
    settings = node_settings(overrides=overrides)
    topics = ReplayTopics.from_settings(settings, command, transport)
    return topics, settings.cache


def _offset(horizon):
    """Arm joint j off by (-1)^j * 0.01 * (k + 1) at step k; gripper off by 0.1."""
    offset = np.zeros((horizon, 8))
    signs = (-1.0) ** np.arange(7)
    offset[:, :7] = 0.01 * (np.arange(horizon)[:, None] + 1) * signs
    offset[:, 7] = 0.1
    return offset


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_metrics_match_hand_computed_values(tmp_path, storage):
    bag = demo_bag(tmp_path, storage=storage, num_frames=12, image_format='jpeg')
    topics, cache = _config()
    horizon = 6
    policy = ScriptedPolicy(_offset(horizon), start_s=START)
    config = EvaluationConfig(topics, cache, 'stack the cups', query_period_s=0.25)
    evaluation = evaluate_bag(bag, policy, config)
    metrics = evaluation.metrics()

    # Joint states at 50 Hz from 0 to 0.78 s; all sources start at 0: queries at 0, .25, .5, .75
    assert metrics['queries'] == 4 and metrics['chunks'] == 4
    assert metrics['refusals'] == {} and metrics['policy_errors'] == []
    assert policy.resets == ['replay']
    assert all(obs.prompt == 'stack the cups' for obs in policy.observations)
    stamps = np.array([obs.stamp for obs in policy.observations]) - START
    # newest source at each query: frames every 1/15 s, joints every 0.02 s
    np.testing.assert_allclose(stamps, [0.0, 0.24, 0.5, 0.74], atol=1e-6)

    last_recorded = 0.78
    valid = stamps[:, None] + STEP * np.arange(horizon)[None, :] <= last_recorded + 1e-9
    assert metrics['errors']['samples'] == [[int(n)] * 8 for n in valid.sum(axis=0)]
    expected_arm = 0.01 * (np.arange(horizon) + 1)
    by_step = np.array(metrics['errors']['by_step']['arm_mae'], dtype=float)
    rows = valid.any(axis=0)
    np.testing.assert_allclose(by_step[rows], expected_arm[rows], atol=INTERPOLATION_TOL)
    assert all(value is None for value in np.array(metrics['errors']['by_step']['arm_mae'])[~rows])
    np.testing.assert_allclose(
        np.array(metrics['errors']['by_step']['arm_rmse'], dtype=float)[rows],
        expected_arm[rows],
        atol=INTERPOLATION_TOL,
    )
    expected_total = (expected_arm[None, :] * valid).sum() / valid.sum()
    assert metrics['errors']['arm']['mae'] == pytest.approx(expected_total, abs=INTERPOLATION_TOL)
    assert metrics['errors']['gripper']['mae'] == pytest.approx(0.1, abs=INTERPOLATION_TOL)
    mae = np.array(metrics['errors']['by_step_joint']['mae'], dtype=float)
    np.testing.assert_allclose(mae[0, :7], 0.01, atol=INTERPOLATION_TOL)

    # The hold baseline: the observed state repeated over the horizon.
    hold = []
    for stamp, ok in zip(stamps, valid, strict=True):
        times = stamp + STEP * np.arange(horizon)[ok]
        hold.append(np.abs(demo_state(times)[:, :7] - demo_state([stamp])[0, :7]))
    expected_hold = np.concatenate(hold).mean()
    hold_mae = metrics['hold_baseline_errors']['arm']['mae']
    assert hold_mae == pytest.approx(expected_hold, abs=INTERPOLATION_TOL)

    timing = metrics['timing']
    assert timing['horizon'] == horizon and timing['step_duration_s'] == pytest.approx(STEP)
    assert timing['stamp_interval_s']['count'] == 3
    np.testing.assert_allclose(timing['stamp_interval_s']['mean'], 0.74 / 3, atol=1e-6)
    np.testing.assert_allclose(timing['observation_age_s']['max'], 0.01, atol=1e-6)
    assert metrics['latency_s']['count'] == 4


def test_observations_pair_exactly_as_the_node_cache(tmp_path):
    bag = demo_bag(tmp_path, num_frames=9, image_format='rgb8', joint_rate_hz=20.0)
    frames = droid_clips.synthetic_clips(9)
    topics, cache = _config(clip_offsets=[-0.14, 0.0])
    policy = ScriptedPolicy(np.zeros((2, 8)), start_s=START)
    config = EvaluationConfig(topics, cache, 'p', query_period_s=0.17)
    evaluate_bag(bag, policy, config)
    times = query_times(0.0, 0.55, 0.17)  # joints at 20 Hz end at 0.55 s
    assert len(policy.observations) == len(times) == 4
    for query, obs in zip(times, policy.observations, strict=True):
        frame = int(np.floor(query * 15 + 1e-6))
        joint = int(np.floor(query * 20 + 1e-6))
        assert obs.stamp - START == pytest.approx(max(frame / 15, joint / 20), abs=1e-6)
        for camera, clip in obs.images.items():
            assert clip.shape == (2, 180, 320, 3)
            # nearest stored frame to newest - 0.14 s (about 2 frames back), oldest repeated
            older = max(frame - 2, 0)
            np.testing.assert_array_equal(clip[0], frames[camera][older])
            np.testing.assert_array_equal(clip[1], frames[camera][frame])
        np.testing.assert_allclose(obs.joint_position, demo_state([joint / 20])[0, :7])
        np.testing.assert_allclose(obs.gripper_position, demo_state([joint / 20])[0, 7:])


def test_command_topic_is_the_reference_when_given(tmp_path):
    bag = demo_bag(tmp_path, num_frames=12, topics=ReplayTopics(command='/joint_command'))
    policy = ScriptedPolicy(np.zeros((4, 8)), lead_s=STEP, start_s=START)
    results = {}
    for command in (None, '/joint_command'):
        topics, cache = _config(command)
        evaluation = evaluate_bag(bag, policy, EvaluationConfig(topics, cache, 'p', 0.2))
        results[command] = evaluation.metrics()
    assert results['/joint_command']['reference_topic'] == '/joint_command'
    assert results['/joint_command']['errors']['arm']['mae'] < 1e-3
    # against the measured state the same chunks are one control step ahead
    assert results[None]['reference_topic'] == '/joint_states'
    assert results[None]['errors']['arm']['mae'] > 5e-3


def _stale_camera_bag(path, frames=6, joints=30, future_frame_at=None):
    """Cameras for 6 frames (0.4 s), joints for 30 samples at 20 Hz (1.5 s).

    ``future_frame_at``: the index of a wrist frame logged then but stamped 60 s later.
    """
    topics = ReplayTopics()
    clips = droid_clips.synthetic_clips(frames)
    records = []
    for index in range(frames):
        stamp = to_ns(START + index / 15)
        for camera, topic in topics.cameras.items():
            header = stamp + 60 * 10**9 if index == future_frame_at and 'wrist' in topic else stamp
            records.append((stamp, topic, BAG_MESSAGES.image(header, clips[camera][index])))
    for index in range(joints):
        stamp = to_ns(START + index / 20)
        state = demo_state([index / 20])[0]
        records.append(
            (stamp, topics.joint_states, BAG_MESSAGES.joint_state(stamp, topics.joint_names, state))
        )
    with BagWriter(path, 'mcap') as writer:
        for topic in [*topics.cameras.values(), topics.joint_states]:
            msgtype = 'sensor_msgs/msg/JointState' if 'joint' in topic else 'sensor_msgs/msg/Image'
            writer.add_topic(topic, msgtype)
        for stamp, topic, message in sorted(records, key=lambda r: r[0]):
            writer.write(topic, stamp, message)
    return path


def test_a_frame_stamped_in_the_future_is_dropped_as_the_node_drops_it(tmp_path):
    topics, cache = _config()
    metrics = {}
    for future in (None, 3):
        bag = _stale_camera_bag(tmp_path / f'bag{future}', frames=23, future_frame_at=future)
        policy = ScriptedPolicy(np.zeros((3, 8)), start_s=START)
        metrics[future] = evaluate_bag(
            bag, policy, EvaluationConfig(topics, cache, 'p', 0.1)
        ).metrics()
    # the frame from the future costs the query that would have used it, not the 60 s after
    assert metrics[None]['chunks'] == 15
    assert metrics[3]['chunks'] >= 14, metrics[3]['refusals']


def test_stale_inputs_are_refused_and_counted(tmp_path):
    bag = _stale_camera_bag(tmp_path / 'stale')
    topics, cache = _config()
    policy = ScriptedPolicy(np.zeros((3, 8)), start_s=START)
    evaluation = evaluate_bag(bag, policy, EvaluationConfig(topics, cache, 'p', 0.1))
    metrics = evaluation.metrics()
    # queries at 0.0 .. 1.4 s every 0.1 s (15); last frame at 1/3 s. Up to 0.5 s the frames
    # and joints are within max_skew 0.2 s (6 chunks); 0.6 .. 0.8 s they are further apart
    # (skewed, 3); from 0.9 s the frame is older than max_age 0.5 s (stale, 6).
    assert metrics['queries'] == 15
    assert metrics['chunks'] == 6
    assert metrics['refusals'] == {'skewed': 3, 'stale': 6}
    stale = [text for _, text in evaluation.refusals if text.startswith('stale')]
    assert stale and all("camera '" in text and 's old' in text for text in stale)


def test_wrong_image_size_refuses_every_query(tmp_path):
    bag = demo_bag(tmp_path, num_frames=4, image_format='rgb8')
    topics, cache = _config(image_height=90, image_width=160, image_fit='exact')
    evaluation = evaluate_bag(bag, ScriptedPolicy(np.zeros((2, 8))), EvaluationConfig(
        topics, cache, 'p', 0.1
    ))  # fmt: skip
    metrics = evaluation.metrics()
    assert metrics['chunks'] == 0
    assert set(metrics['refusals']) == {'bad_image'}
    assert 'errors' not in metrics
    written = write_outputs(evaluation, tmp_path / 'out')  # a report that says why
    assert set(written) == {'metrics', 'report'}
    assert 'bad_image' in written['report'].read_text()


def test_policy_errors_are_recorded_and_the_replay_goes_on(tmp_path):
    bag = demo_bag(tmp_path, num_frames=8)

    class Flaky(ScriptedPolicy):
        def infer(self, observation):
            if len(self.observations) == 1:
                self.observations.append(observation)
                raise ObservationError('camera frame too dark')
            return super().infer(observation)

    topics, cache = _config()
    policy = Flaky(np.zeros((2, 8)), start_s=START)
    metrics = evaluate_bag(bag, policy, EvaluationConfig(topics, cache, 'p', 0.2)).metrics()
    assert metrics['queries'] == 3
    assert metrics['chunks'] == 2
    assert len(metrics['policy_errors']) == 1
    assert 'ObservationError: camera frame too dark' in metrics['policy_errors'][0]


def test_missing_and_mistyped_topics_are_clear_errors(tmp_path):
    bag = demo_bag(tmp_path, num_frames=3, image_format='jpeg')
    policy = ScriptedPolicy(np.zeros((2, 8)))
    topics, cache = _config(transport='raw')
    with pytest.raises(
        BagError, match="camera 'wrist_image_left' topic '/wrist_image_left' is not"
    ):
        evaluate_bag(bag, policy, EvaluationConfig(topics, cache, 'p'))
    topics, cache = _config(joint_states_topic='/wrist_image_left/compressed')
    with pytest.raises(BagError, match='joint state topic .* has type sensor_msgs/msg/Compressed'):
        evaluate_bag(bag, policy, EvaluationConfig(topics, cache, 'p'))
    topics, cache = _config(command='/missing_command')
    with pytest.raises(BagError, match="reference topic '/missing_command' is not in bag"):
        evaluate_bag(bag, policy, EvaluationConfig(topics, cache, 'p'))
    assert policy.observations == []


def test_max_chunks_and_duration_bound_the_run(tmp_path):
    bag = demo_bag(tmp_path, num_frames=12)
    topics, cache = _config()
    policy = ScriptedPolicy(np.zeros((2, 8)), start_s=START)
    config = EvaluationConfig(topics, cache, 'p', 0.1, start_offset_s=0.1, duration_s=0.35)
    evaluation = evaluate_bag(bag, policy, config)
    assert len(evaluation.records) == 4  # 0.1, 0.2, 0.3, 0.4 (+0.35 span)
    assert evaluation.span_s[0] - START == pytest.approx(0.1)
    config = EvaluationConfig(topics, cache, 'p', 0.1, max_chunks=2)
    assert len(evaluate_bag(bag, policy, config).records) == 2
