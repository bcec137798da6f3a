# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Sessions: isolation, reset, prompt change, window resets, LRU bound, untouched on bad input."""

import dataclasses

import numpy as np
import pytest

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.session import SessionStore
from dreamzero_ros.policy_types import ObservationError

CONFIG = EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32'), max_sessions=3)


def _engine():
    return DreamZeroEngine.from_config(CONFIG, seed=1)


@pytest.fixture(scope='module')
def engine():
    return _engine()


def _obs(step, session='a', **changes):
    return random_observation(seed=step, session_id=session, **changes)


def test_store_is_lru_bounded_and_frees_what_it_drops():
    opened, closed = [], []

    def open_denoise():
        opened.append(object())
        return dataclasses.make_dataclass('D', [])()

    store = SessionStore(2, open_denoise, closed.append, ('front',))
    a = store.get('a')
    store.get('b')
    store.get('a')  # a is now the most recent
    store.get('c')  # drops b
    assert store.ids() == ['a', 'c'] and len(closed) == 1
    assert store.get('a') is a
    store.reset('a')
    store.reset('unknown')
    assert 'a' not in store and len(closed) == 2
    store.clear()
    assert len(store) == 0 and len(closed) == 3
    with pytest.raises(ValueError):
        SessionStore(0, open_denoise, closed.append, ('front',))


def test_sessions_do_not_mix(engine):
    alone = _engine()
    expected = [alone.infer(_obs(i, 'solo')).actions for i in range(3)]
    for i in range(3):
        mine = engine.infer(_obs(i, 'x'))
        engine.infer(_obs(10 + i, 'y', prompt='open the drawer'))
        np.testing.assert_array_equal(mine.actions, expected[i])
        assert mine.chunk_id == i


def test_first_call_one_frame_then_four_and_window_resets(engine):
    engine.reset('w')
    starts = []
    for i in range(5):
        engine.infer(_obs(i, 'w'))
        session = engine.sessions.get('w')
        starts.append(session.denoise.start_frame)
        assert session.frames_per_call == 4
    # tiny: windows of 1 + 2 x 2 latent frames; a new window every 2 chunks.
    assert starts == [3, 5, 3, 5, 3]
    assert len(engine.sessions.get('w').history) == 4


def test_reset_starts_over(engine):
    first = engine.infer(_obs(0, 'r'))
    engine.infer(_obs(1, 'r'))
    engine.reset('r')
    again = engine.infer(_obs(0, 'r'))
    assert again.chunk_id == 0
    np.testing.assert_array_equal(again.actions, first.actions)


def test_prompt_change_starts_a_new_window(engine):
    engine.infer(_obs(0, 'p'))
    assert engine.sessions.get('p').denoise.start_frame == 3
    changed = engine.infer(_obs(1, 'p', prompt='close the drawer'))
    assert engine.sessions.get('p').denoise.start_frame == 3
    assert changed.chunk_id == 1
    assert engine.sessions.get('p').prompt.endswith('The robot close the drawer')
    # Only case and spacing differ: the model text is the same, so the window goes on.
    engine.infer(_obs(2, 'p', prompt='Close  the DRAWER'))
    assert engine.sessions.get('p').denoise.start_frame == 5


def test_least_recently_used_session_is_dropped():
    engine = _engine()
    for name in ('a', 'b', 'c'):
        engine.infer(_obs(0, name))
    engine.infer(_obs(1, 'a'))
    engine.infer(_obs(0, 'd'))  # capacity 3: b is dropped
    assert engine.sessions.ids() == ['c', 'a', 'd']
    assert engine.infer(_obs(1, 'b')).chunk_id == 0


def test_bad_observations_leave_the_session_untouched():
    reference = _engine()
    expected = [reference.infer(_obs(i, 's')).actions for i in range(2)]
    engine = _engine()
    engine.infer(_obs(0, 's'))
    bad = _obs(5, 's')
    nan_state = dataclasses.replace(bad, joint_position=np.full(7, np.nan))
    with pytest.raises(ObservationError, match='finite'):
        engine.infer(nan_state)
    images = dict(bad.images)
    images['wrist_image_left'] = np.zeros((90, 160, 3), np.uint8)
    with pytest.raises(ObservationError, match='differs from the session'):
        engine.infer(dataclasses.replace(bad, images=images))
    images = dict(bad.images)
    del images['exterior_image_1_left']
    with pytest.raises(ObservationError, match='exterior_image_1_left'):
        engine.infer(dataclasses.replace(bad, images=images))
    result = engine.infer(_obs(1, 's'))
    assert result.chunk_id == 1
    np.testing.assert_array_equal(result.actions, expected[1])
