# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Without the predicted video, a chunk's last DiT call runs the conditional CFG branch only.

CFG changes the video velocity only and the actions follow the conditional one, so the actions
equal those of a chunk whose video was asked for (all branches on every call).
"""

from cfg_parallel_support import run_group, scenario
from denoise_support import DYNAMIC_MIN, DYNAMIC_NEVER, chunk_stream, run_chunks
from dit_support import make_dit
import numpy as np
import pytest
import torch

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.config import Sampling
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.step_cache import StepCacheConfig, StepSchedule

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


@pytest.fixture(scope='module')
def dit():
    return make_dit()


@pytest.mark.parametrize(
    ('mode', 'step_cache', 'calls', 'last'),
    [
        ('static', StepCacheConfig(), 8, 15),
        ('static', StepCacheConfig(dit_steps=5), 5, 12),
        ('full', StepCacheConfig(), 16, 15),
        ('dynamic', DYNAMIC_NEVER, 16, 15),
        ('dynamic', DYNAMIC_MIN, 4, None),  # step 11's combined velocity feeds the test at 12
    ],
)
def test_last_dit_step_is_known_where_the_schedule_allows(mode, step_cache, calls, last):
    schedule = StepSchedule(mode, step_cache, 16)
    ran = []
    for i in range(16):
        if schedule.should_run(i):
            ran.append(i)
            schedule.record(torch.ones(1, 4))  # identical velocities: similarity 1
    assert len(ran) == calls
    known = [i for i in ran if StepSchedule(mode, step_cache, 16).is_last_dit_step(i)]
    assert known == ([] if last is None else [last])


@pytest.mark.parametrize(
    ('mode', 'step_cache'),
    [('static', StepCacheConfig()), ('dynamic', DYNAMIC_NEVER), ('dynamic', DYNAMIC_MIN)],
)
def test_last_call_without_video_runs_the_conditional_rows_only(dit, mode, step_cache):
    config = {
        'sampling': Sampling(step_cache_tuning=step_cache),
        'options': EngineOptions(step_cache=mode),
    }
    full_rows, skip_rows = [], []
    full = run_chunks(dit, chunk_stream(5, need_video=True), full_rows, **config)
    skipped = run_chunks(dit, chunk_stream(5, need_video=False), skip_rows, **config)
    calls = full[0].dit_calls
    assert all(o.dit_calls == calls for o in full + skipped)
    # 5 chunks of denoising calls of 2 rows ...
    assert full_rows == ([2] * calls) * 5
    known = mode == 'static' or step_cache == DYNAMIC_NEVER
    if known:
        assert skip_rows == ([2] * (calls - 1) + [1]) * 5  # ... but the last: conditional only
    else:
        assert skip_rows == full_rows  # the dynamic cache's last call is not known in advance
    assert [o.conditional_only_calls for o in full + skipped] == [0] * 5 + [int(known)] * 5
    for a, b in zip(full, skipped, strict=True):
        assert b.video_latents is None and a.video_latents is not None
        assert a.start_frame == b.start_frame
        torch.testing.assert_close(b.actions, a.actions, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(full[0].actions, full[1].actions)


def test_without_cfg_nothing_changes(dit):
    sampling = Sampling(cfg_scale=1.0)
    a = run_chunks(dit, chunk_stream(2, need_video=True), sampling=sampling)
    rows = []
    b = run_chunks(dit, chunk_stream(2, need_video=False), rows, sampling=sampling)
    assert rows == [1] * 16
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x.actions, y.actions)


def test_engine_actions_equal_those_of_chunks_with_video():
    config = EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32'))
    without = DreamZeroEngine.from_config(config, seed=3)
    with_video = DreamZeroEngine(config, without.modules, without.tokenizer, without.embodiment)
    for step in range(5):
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        a = without.infer(observation)
        b = with_video.infer(observation, return_video=True)
        np.testing.assert_allclose(a.actions, b.actions, rtol=1e-5, atol=1e-5)
        assert a.video is None and b.video is not None
        assert without.last_stats['conditional_only_calls'] == 1
        assert with_video.last_stats['conditional_only_calls'] == 0


def test_cfg_parallel_rank0_runs_the_last_call_alone(tmp_path_factory, tmp_path):
    # Rank 0 runs the last call alone (no all_gather; rank 1 idles): the actions equal those of
    # a one-process run that computes both branches on every call.
    folder = tmp_path_factory.mktemp('ckpt')
    checkpoint = write_random_checkpoint(folder, 'tiny', seed=3, dtype='float32')
    result, codes, outputs = run_group(tmp_path, checkpoint, ['--checkpoint', str(checkpoint)])
    assert 'error' not in result, result.get('tb')
    assert codes == [0], outputs
    reference = scenario(
        DreamZeroEngine.from_pretrained(checkpoint, EngineOptions(device='cpu', dtype='float32')),
        video=True,
    )
    for got, want in zip(result['actions'], reference, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    assert not np.allclose(reference[0], reference[1])
