# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of the observation cache: pairing, refusals and clips, with explicit time."""

from types import SimpleNamespace

import numpy as np
import pytest

from dreamzero_ros.core.observations.image_codec import encode_raw
from dreamzero_ros.core.observations.image_resize import resize_with_pad
from dreamzero_ros.core.observations.messages import stamp_seconds
from dreamzero_ros.core.observations.observation_cache import (
    CacheConfig,
    Drop,
    DropReason,
    ObservationCache,
    Refusal,
    RefusalReason,
)
from dreamzero_ros.policy_types import DROID_CAMERAS, Observation

ARM = tuple(f'fr3_joint{i}' for i in range(1, 8))
GRIPPER = 'fr3_finger_joint1'


def make_cache(**overrides):
    options = dict(arm_joints=ARM, gripper_joint=GRIPPER, max_age=0.5, max_skew=0.1)
    options.update(overrides)
    return ObservationCache(CacheConfig(**options))


def frame(value=0, size=(4, 6)):
    return np.full((*size, 3), value, dtype=np.uint8)


def fill(cache, stamp, joints=None, gripper=0.02):
    for camera in DROID_CAMERAS:
        assert cache.add_image(camera, frame(int(stamp * 10) % 256), stamp) is None
    joints = np.arange(7) * 0.1 if joints is None else joints
    return cache.add_joint_state([*ARM, GRIPPER], [*joints, gripper], stamp)


def header(stamp):
    sec = int(stamp)
    return SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=int(round((stamp - sec) * 1e9))))


def test_complete_fresh_data_builds_an_observation():
    cache = make_cache(gripper_range=(0.0, 0.04))
    assert fill(cache, 10.0) is None
    obs = cache.build(now=10.05, prompt='pick', session_id='s1')
    assert isinstance(obs, Observation)
    obs.validate()
    np.testing.assert_allclose(obs.joint_position, np.arange(7) * 0.1)
    np.testing.assert_allclose(obs.gripper_position, [0.5])
    assert obs.stamp == 10.0 and obs.prompt == 'pick' and obs.session_id == 's1'
    assert set(obs.images) == set(DROID_CAMERAS)


def test_missing_sources_are_named():
    cache = make_cache()
    cache.add_image(DROID_CAMERAS[0], frame(), 1.0)
    result = cache.build(now=1.0, prompt='')
    assert isinstance(result, Refusal) and result.reason is RefusalReason.MISSING
    assert repr(DROID_CAMERAS[1]) in result.detail and repr(GRIPPER) in result.detail
    assert cache.stats.refusals == {'missing': 1}


def test_stale_when_oldest_source_exceeds_max_age():
    cache = make_cache()
    fill(cache, 1.0)
    assert isinstance(cache.build(now=1.5, prompt=''), Observation)
    result = cache.build(now=1.51, prompt='')
    assert result.reason is RefusalReason.STALE
    assert '0.510 s old' in result.detail


@pytest.mark.parametrize(
    ('filled', 'late_frame', 'now', 'detail'),
    [(1.0, 1.15, 1.2, '0.150 s apart'), (5.0, None, 4.0, 'ahead of the clock')],
    ids=['skew-between-sources', 'stamps-from-the-future'],
)
def test_skewed_stamps_are_refused(filled, late_frame, now, detail):
    cache = make_cache()
    fill(cache, filled)
    if late_frame is not None:
        cache.add_image(DROID_CAMERAS[2], frame(), late_frame)
    result = cache.build(now=now, prompt='')
    assert result.reason is RefusalReason.SKEWED and detail in result.detail


def test_wrong_size_marks_camera_bad_until_next_good_frame():
    cache = make_cache(image_size=(4, 6), image_fit='exact')
    fill(cache, 1.0)
    refusal = cache.add_image(DROID_CAMERAS[1], frame(size=(5, 6)), 1.01)
    assert refusal.reason is RefusalReason.BAD_IMAGE and '5x6, expected 4x6' in refusal.detail
    assert cache.build(now=1.02, prompt='') == refusal
    cache.add_image(DROID_CAMERAS[1], frame(), 1.02)
    assert isinstance(cache.build(now=1.03, prompt=''), Observation)
    assert cache.stats.frames_bad == 1


def test_undecodable_message_is_a_bad_image():
    cache = make_cache()
    fill(cache, 1.0)
    msg = SimpleNamespace(
        header=header(1.01),
        encoding='16UC1',
        height=4,
        width=6,
        step=12,
        data=bytes(48),
        is_bigendian=0,
    )
    assert cache.add_image_message(DROID_CAMERAS[0], msg) is None  # decoded when used
    refusal = cache.build(now=1.02, prompt='')
    assert refusal.reason is RefusalReason.BAD_IMAGE and '16UC1' in refusal.detail
    assert cache.build(now=1.02, prompt='') == refusal  # until the camera's next frame
    assert cache.stats.frames_bad == 1
    cache.add_image(DROID_CAMERAS[0], frame(), 1.03)
    assert isinstance(cache.build(now=1.04, prompt=''), Observation)


def test_raw_image_whose_sizes_disagree_with_its_data_is_bad_at_once():
    cache = make_cache()
    fill(cache, 1.0)
    msg = SimpleNamespace(
        header=header(1.01), encoding='rgb8', height=4, width=6, step=18, data=bytes(50)
    )
    refusal = cache.add_image_message(DROID_CAMERAS[0], msg)
    assert refusal.reason is RefusalReason.BAD_IMAGE and 'has 50 bytes' in refusal.detail


def test_image_message_uses_header_stamp_and_decodes():
    cache = make_cache()
    rgb = np.random.default_rng(1).integers(0, 256, (4, 6, 3), dtype=np.uint8)
    raw = encode_raw(rgb, 'bgr8')
    msg = SimpleNamespace(header=header(7.25), **raw.__dict__)
    for camera in DROID_CAMERAS:
        assert cache.add_image_message(camera, msg) is None
    cache.add_joint_state_message(
        SimpleNamespace(header=header(7.25), name=[*ARM, GRIPPER], position=[0.0] * 8)
    )
    obs = cache.build(now=7.3, prompt='x')
    assert obs.stamp == pytest.approx(7.25)
    np.testing.assert_array_equal(obs.images[DROID_CAMERAS[0]], rgb)


def test_nan_joint_is_refused_until_finite():
    cache = make_cache()
    fill(cache, 1.0)
    joints = np.zeros(7)
    joints[3] = np.nan
    refusal = fill(cache, 1.05, joints=joints)
    assert refusal.reason is RefusalReason.BAD_JOINTS and ARM[3] in refusal.detail
    assert cache.build(now=1.06, prompt='').reason is RefusalReason.BAD_JOINTS
    fill(cache, 1.07)
    assert isinstance(cache.build(now=1.08, prompt=''), Observation)


def test_joint_state_split_over_messages_and_extra_names_ignored():
    cache = make_cache()
    for camera in DROID_CAMERAS:
        cache.add_image(camera, frame(), 2.0)
    cache.add_joint_state([*ARM, 'other'], [*range(7), 99.0], 2.0)
    assert cache.build(now=2.0, prompt='').reason is RefusalReason.MISSING
    cache.add_joint_state([GRIPPER], [0.7], 2.01)
    obs = cache.build(now=2.02, prompt='')
    np.testing.assert_allclose(obs.joint_position, np.arange(7))
    np.testing.assert_allclose(obs.gripper_position, [0.7])
    assert obs.stamp == 2.01


def joint_msg(stamp, names, positions, velocity=(), effort=()):
    return SimpleNamespace(
        header=header(stamp), name=names, position=positions, velocity=velocity, effort=effort
    )


@pytest.mark.parametrize(
    ('names', 'columns', 'detail'),
    [
        ([*ARM, GRIPPER], dict(positions=[0.5] * 7), '8 names but 7 positions'),
        ([*ARM, GRIPPER], dict(positions=[0.5] * 8, velocity=[0.0] * 9), '9 velocity'),
        ([*ARM, GRIPPER], dict(positions=[0.5] * 8, effort=[0.0] * 7), '7 effort'),
    ],
)
def test_joint_state_with_disagreeing_counts_is_dropped_at_once(names, columns, detail):
    cache = make_cache()
    fill(cache, 1.0)
    drop = cache.add_joint_state_message(joint_msg(1.01, names, **columns))
    assert isinstance(drop, Drop) and drop.reason is DropReason.JOINT_COUNT_MISMATCH
    assert detail in drop.detail and cache.stats.drops == {'joint_count_mismatch': 1}
    assert cache.stats.last_drop == drop
    obs = cache.build(now=1.02, prompt='')  # the last good values stay in use
    np.testing.assert_allclose(obs.joint_position, np.arange(7) * 0.1)


def test_joint_state_naming_a_joint_twice_is_dropped_whole():
    cache = make_cache()
    fill(cache, 1.0)
    names = [*ARM, ARM[3], GRIPPER]
    drop = cache.add_joint_state(names, [0.0, 0.0, 0.0, 0.11, 0.0, 0.0, 0.0, 2.5, 0.01], 1.01)
    assert drop.reason is DropReason.DUPLICATE_JOINT_NAME and repr(ARM[3]) in drop.detail
    obs = cache.build(now=1.02, prompt='')
    assert obs.joint_position[3] == pytest.approx(0.3) and obs.stamp == 1.0
    assert cache.stats.joint_states_bad == 1


def test_messages_stamped_in_the_future_are_dropped_and_good_ones_keep_flowing():
    cache = make_cache()
    fill(cache, 1.0)
    rgb = encode_raw(frame(7), 'rgb8')
    future = SimpleNamespace(header=header(61.0), **rgb.__dict__)
    drop = cache.add_image_message(DROID_CAMERAS[0], future, received_at=1.0)
    assert drop.reason is DropReason.FUTURE_STAMP and '60.000 s ahead' in drop.detail
    drop = cache.add_joint_state([*ARM, GRIPPER], [9.0] * 8, 31.0, received_at=1.01)
    assert drop.reason is DropReason.FUTURE_STAMP and 'joint_states' in drop.detail
    assert cache.stats.drops == {'future_stamp': 2}
    fill(cache, 1.05)  # good messages after the bad ones are used at once
    obs = cache.build(now=1.06, prompt='')
    assert isinstance(obs, Observation) and obs.stamp == 1.05
    assert obs.images[DROID_CAMERAS[0]][0, 0, 0] == 10
    # within max_skew of the receipt is normal clock offset, not the future
    assert cache.add_image(DROID_CAMERAS[0], frame(), 1.15, received_at=1.06) is None


def test_clear_inputs_forgets_the_data_and_keeps_the_counters():
    cache = make_cache()
    fill(cache, 100.0)
    cache.clear_inputs()
    assert cache.build(now=70.0, prompt='').reason is RefusalReason.MISSING
    fill(cache, 70.0)  # an earlier timeline (a bag loop) is accepted after the clear
    assert isinstance(cache.build(now=70.0, prompt=''), Observation)
    assert cache.stats.frames_received == 6


def native(height, width, seed=0):
    yy, xx = np.mgrid[0:height, 0:width]
    rgb = np.stack([xx * 255 // width, yy * 255 // height, (xx + yy + seed) % 256], axis=-1)
    return rgb.astype(np.uint8)


@pytest.mark.parametrize('size', [(720, 1280), (480, 640), (1080, 1920), (90, 160)])
def test_native_camera_sizes_are_letterboxed_to_the_input_size(size):
    cache = make_cache(image_size=(180, 320))
    messages = {}
    for camera in DROID_CAMERAS:
        raw = encode_raw(native(*size), 'bgr8')
        messages[camera] = SimpleNamespace(header=header(2.0), **raw.__dict__)
        assert cache.add_image_message(camera, messages[camera]) is None
    cache.add_joint_state([*ARM, GRIPPER], [0.0] * 8, 2.0)
    obs = cache.build(now=2.0, prompt='')
    expected = resize_with_pad(native(*size), 180, 320)
    for camera in DROID_CAMERAS:
        np.testing.assert_array_equal(obs.images[camera], expected)


def test_only_the_frames_an_observation_uses_are_decoded_once():
    decoded = []

    def counting_decode(msg):
        decoded.append(msg.header.stamp.sec)
        return frame(msg.header.stamp.sec % 256, size=(720, 1280))

    cache = ObservationCache(
        CacheConfig(ARM, GRIPPER, image_size=(180, 320), max_age=0.5), decode=counting_decode
    )
    for second in range(1, 31):
        for camera in DROID_CAMERAS:
            msg = SimpleNamespace(header=header(float(second)), format='jpeg', data=b'')
            cache.add_image_message(camera, msg)
    cache.add_joint_state([*ARM, GRIPPER], [0.0] * 8, 30.0)
    assert decoded == []
    obs = cache.build(now=30.0, prompt='')
    cache.build(now=30.1, prompt='')
    assert decoded == [30, 30, 30]
    assert obs.images[DROID_CAMERAS[0]].shape == (180, 320, 3)


def test_exact_image_fit_refuses_other_sizes_and_says_so():
    cache = make_cache(image_size=(180, 320), image_fit='exact')
    fill_joints = [*ARM, GRIPPER], [0.0] * 8, 1.0
    raw = encode_raw(native(1080, 1920), 'rgb8')
    refusal = cache.add_image_message(
        DROID_CAMERAS[0], SimpleNamespace(header=header(1.0), **raw.__dict__)
    )
    assert refusal.reason is RefusalReason.BAD_IMAGE
    assert 'size 1080x1920, expected 180x320 (image_fit: exact)' in refusal.detail
    cache.add_joint_state(*fill_joints)
    assert cache.build(now=1.0, prompt='') == refusal


def test_undecodable_compressed_frame_is_bad_at_build_and_the_camera_recovers():
    cache = make_cache(image_size=(4, 6))
    fill(cache, 1.0)
    broken = SimpleNamespace(header=header(1.01), format='jpeg', data=b'\xff\xd8\xff\x00garbage')
    assert cache.add_image_message(DROID_CAMERAS[2], broken) is None
    refusal = cache.build(now=1.02, prompt='')
    assert refusal.reason is RefusalReason.BAD_IMAGE and 'jpeg' in refusal.detail
    fill(cache, 1.04)
    assert isinstance(cache.build(now=1.05, prompt=''), Observation)


def test_out_of_order_frames_are_dropped_not_used():
    cache = make_cache()
    fill(cache, 3.0)
    cache.add_image(DROID_CAMERAS[0], frame(200), 2.9)
    assert cache.stats.frames_out_of_order == 1
    obs = cache.build(now=3.0, prompt='')
    assert obs.images[DROID_CAMERAS[0]][0, 0, 0] == 30


def test_gripper_range_maps_and_clamps():
    cache = make_cache(gripper_range=(0.08, 0.0))
    fill(cache, 1.0, gripper=0.0)
    np.testing.assert_allclose(cache.build(now=1.0, prompt='').gripper_position, [1.0])
    fill(cache, 1.1, gripper=0.1)
    np.testing.assert_allclose(cache.build(now=1.1, prompt='').gripper_position, [0.0])


def test_clip_picks_nearest_frames_at_offsets_and_pads():
    cache = make_cache(clip_offsets=(-0.4, -0.2, 0.0))
    cam = DROID_CAMERAS[0]
    for camera in DROID_CAMERAS:
        cache.add_image(camera, frame(0), 0.0)
    cache.add_joint_state([*ARM, GRIPPER], [0.0] * 8, 0.0)
    clip = cache.build(now=0.0, prompt='').images[cam]
    assert clip.shape == (3, 4, 6, 3) and (clip == 0).all()
    for step in range(1, 11):
        stamp = step * 0.1
        for camera in DROID_CAMERAS:
            cache.add_image(camera, frame(step), stamp)
    cache.add_joint_state([*ARM, GRIPPER], [0.0] * 8, 1.0)
    clip = cache.build(now=1.0, prompt='').images[cam]
    assert [int(f[0, 0, 0]) for f in clip] == [6, 8, 10]
    assert len(cache._frames[cam]) <= 7  # history bounded by clip span + max_skew


def test_clear_forgets_everything():
    cache = make_cache()
    fill(cache, 1.0)
    cache.clear()
    assert cache.build(now=1.0, prompt='').reason is RefusalReason.MISSING
    assert cache.stats.frames_received == 0


@pytest.mark.parametrize(
    'overrides',
    [
        dict(arm_joints=()),
        dict(camera_sizes=((4, 6),)),
        dict(gripper_joint=ARM[0]),
        dict(max_age=0.0),
        dict(gripper_range=(1.0, 1.0)),
        dict(clip_offsets=(0.0, -0.5)),
        dict(clip_offsets=(-0.5,)),
        dict(image_size=(0, 10)),
    ],
)
def test_bad_config_is_rejected(overrides):
    with pytest.raises(ValueError):
        make_cache(**overrides)


def test_any_arm_no_gripper_and_each_camera_at_its_own_size():
    cameras = ('front', 'wrist')
    cache = ObservationCache(
        CacheConfig(
            arm_joints=ARM[:6],
            gripper_joint='',
            cameras=cameras,
            camera_sizes=((24, 64), (12, 16)),
            max_age=0.5,
        )
    )
    for camera in cameras:
        assert cache.add_image(camera, native(48, 64), 1.0) is None
    assert cache.add_joint_state(ARM[:6], np.arange(6) / 10, 1.0) is None
    observation = cache.build(1.05, 'go')
    assert observation.images['front'].shape == (24, 64, 3)
    assert observation.images['wrist'].shape == (12, 16, 3)
    np.testing.assert_allclose(observation.joint_position, np.arange(6) / 10)
    assert observation.gripper_position.shape == (0,)


def test_unknown_camera_raises():
    with pytest.raises(KeyError):
        make_cache().add_image('front', frame(), 0.0)


def test_stamp_seconds():
    assert stamp_seconds(SimpleNamespace(sec=3, nanosec=500_000_000)) == 3.5
