# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of the status report, the serialised policy wrapper and the warm-up observation."""

import importlib.util
import threading
import time

import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.config.node_validation import check_policy
from dreamzero_ros.core.control.control_loop import ControlLoop, LoopConfig
from dreamzero_ros.core.control.status_report import ERROR, OK, WARN, build_report
from dreamzero_ros.core.motion.chunk_scheduler import BlendConfig
from dreamzero_ros.core.motion.safety import SafetyLimits
from dreamzero_ros.core.observations.observation_cache import CacheConfig, ObservationCache
from dreamzero_ros.core.policy.policy_factory import warmup_observation
from dreamzero_ros.core.policy.serialized_policy import SerializedPolicy
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.policy_types import DROID_CAMERAS, ActionChunk

ARM = tuple(f'j{i}' for i in range(7))


def make_loop():
    cache = ObservationCache(CacheConfig(ARM, 'g', max_age=0.5))
    limits = SafetyLimits(np.full(8, -3.0), np.full(8, 3.0), np.full(8, 0.5))
    return ControlLoop(cache, LoopConfig(limits, BlendConfig()), prompt='p')


def report(loop, now=1.0, **overrides):
    options = dict(lifecycle_state='active', engine_state='ready', enabled=True, dry_run=False)
    options.update(overrides)
    return build_report(loop, now, **options)


def test_report_warns_with_the_refusal_and_counts_it():
    loop = make_loop()
    loop.poll(1.0)
    result = report(loop)
    assert result.level == WARN and result.message.startswith('input refused: missing')
    assert result.value('refused_missing') == '1' and result.value('observations_refused') == '1'
    assert result.value('latency_p50_ms') == 'nan'


def test_report_counts_dropped_messages_by_reason_and_clock_jumps():
    loop = make_loop()
    loop.cache.add_joint_state([*ARM, ARM[0], 'g'], [0.0] * 9, 1.0)
    loop.cache.add_joint_state([*ARM, 'g'], [0.0] * 8, 40.0, received_at=1.0)
    loop.cache.add_joint_state([*ARM, 'g'], [0.0] * 8, 41.0, received_at=1.0)
    loop.on_time_jump(5.0, 1.0)
    result = report(loop)
    assert result.value('messages_dropped') == '3' and result.value('time_jumps') == '1'
    assert result.value('dropped_duplicate_joint_name') == '1'
    assert result.value('dropped_future_stamp') == '2'
    assert result.value('last_drop').startswith('future_stamp: joint_states stamped 40.000 s')


def test_report_is_ok_while_streaming_and_shows_latency():
    loop = make_loop()
    for camera in DROID_CAMERAS:
        loop.cache.add_image(camera, np.zeros((2, 2, 3), np.uint8), 1.0)
    loop.cache.add_joint_state([*ARM, 'g'], [0.0] * 8, 1.0)
    query = loop.poll(1.0).query
    actions = np.zeros((24, 8), np.float32)
    loop.on_chunk(query, ActionChunk(actions, stamp=1.0), 1.25)
    result = report(loop, now=1.3, dry_run=True)
    assert result.level == OK and 'preview only' in result.message
    assert result.value('latency_p50_ms') == '250.0' and result.value('commanding') == 'false'
    assert result.value('chunks_applied') == '1'


def test_report_is_an_error_when_the_engine_failed():
    result = report(make_loop(), engine_state='error: PolicyError: boom')
    assert result.level == ERROR and 'boom' in result.message


def test_serialized_policy_runs_one_call_at_a_time_and_closes_once():
    active, overlaps, closed = [], [], []

    class Slow:
        metadata = {'x': 1}

        def infer(self, observation):
            active.append(1)
            overlaps.append(len(active))
            time.sleep(0.02)
            active.pop()
            return observation

        def reset(self, session_id='default'):
            overlaps.append(len(active) + 1)

    policy = SerializedPolicy(Slow(), on_close=lambda: closed.append(True))
    threads = [threading.Thread(target=policy.infer, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=policy.reset, args=('s',))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(overlaps) == 1 and policy.metadata == {'x': 1}
    policy.close()
    policy.close()
    assert closed == [True]


def test_warmup_observation_matches_the_configured_inputs():
    settings = build_settings({'engine.checkpoint': 'c', 'image_height': 90, 'image_width': 160})
    droid = RobotLayout.from_metadata({})  # a DROID server that says nothing else
    observation = warmup_observation(settings, droid)
    observation.validate()
    assert observation.images[DROID_CAMERAS[0]].shape == (90, 160, 3)
    assert observation.session_id == '__warmup__'
    # With image_height/width 0 each camera comes at the policy's resolution of it.
    ur = RobotLayout.from_metadata(
        {
            'cameras': ['front', 'wrist'],
            'camera_resolutions': [[24, 64], [48, 64]],
            'arm_dof': 6,
            'gripper_dof': 0,
            'action_dim': 6,
            'gripper_columns': [],
        }
    )
    settings = build_settings(
        {
            'engine.checkpoint': 'c',
            'camera_keys': ['wrist', 'front'],
            'camera_topics': ['/wrist', '/front'],
            'arm_joint_names': [f'j{i}' for i in range(6)],
            'gripper_joint_name': '',
            'safety.joint_lower': [-1.0] * 6,
            'safety.joint_upper': [3.0] * 6,
            'safety.max_step_delta': [0.1] * 6,
            'safety.max_velocity': [1.0] * 6,
            'safety.stop_deceleration': [1.0] * 6,
            'safety.max_acceleration': [1000.0] * 6,
            'safety.max_jerk': [1.0e6] * 6,
        }
    )
    check_policy(settings, ur)
    observation = warmup_observation(settings, ur)
    observation.validate(('front', 'wrist'), 6, 0)
    assert observation.images['wrist'].shape == (48, 64, 3)
    np.testing.assert_allclose(observation.joint_position, 1.0)
    with pytest.raises(ValueError, match=r'reads 6 arm joints, arm_joint_names names 7'):
        check_policy(build_settings({'engine.checkpoint': 'c'}), ur)


def test_step_duration_override_replays_chunks_in_slow_motion():
    loop = make_loop()
    loop = ControlLoop(loop.cache, LoopConfig(loop.config.limits, BlendConfig(), 0.0, 0.5))
    for camera in DROID_CAMERAS:
        loop.cache.add_image(camera, np.zeros((2, 2, 3), np.uint8), 1.0)
    loop.cache.add_joint_state([*ARM, 'g'], [0.0] * 8, 1.0)
    query = loop.poll(1.0).query
    outcome = loop.on_chunk(query, ActionChunk(np.zeros((24, 8), np.float32), stamp=1.0), 2.1)
    assert outcome.dropped_steps == 3
    np.testing.assert_allclose(np.diff(outcome.plan.times), 0.5)


def test_engine_speed_parameters_reach_the_engine(tmp_path):
    from dreamzero_ros.core.policy.policy_factory import create_policy
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    settings = build_settings(
        {
            'engine.checkpoint': str(folder),
            'engine.step_cache': 'full',
            'engine.attention_backend': 'math',
        }
    )
    policy = create_policy(settings, log=lambda text: None)
    try:
        options = policy.policy.config.options
        assert options.step_cache == 'full'
        assert options.attention_backend == 'math'
        assert options.fp8_linear == 'off' and not options.compile
        assert options.engine_fields() == settings.engine.resolved().engine_fields()  # whole
    finally:
        policy.close()


@pytest.mark.skipif(
    importlib.util.find_spec('flash_attn_3') is not None, reason='FlashAttention-3 is installed'
)
def test_fa3_attention_without_flash_attn_3_is_refused_before_any_inference(tmp_path):
    from dreamzero_ros.core.policy.policy_factory import create_policy
    from dreamzero_ros.engine import ConfigError
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    settings = build_settings({'engine.checkpoint': str(folder), 'engine.attention_backend': 'fa3'})
    with pytest.raises(ConfigError, match='flash_attn_3 package'):
        create_policy(settings, log=lambda text: None)
