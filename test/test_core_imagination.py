# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The ROS-free parts of the view topics: stamps, payloads, names and the bounded worker."""

import threading

import numpy as np
import pytest

from dreamzero_ros.core.observations.image_codec import RawImage, decode_compressed
from dreamzero_ros.core.observations.imagination import (
    FramePacer,
    ViewCounters,
    ViewWorker,
    encode_frame,
    policy_keeps_views,
    predicted_frame_times,
    view_topics,
)
from dreamzero_ros.core.policy.serialized_policy import SerializedPolicy


def test_predicted_frames_are_stamped_over_the_horizon():
    np.testing.assert_allclose(predicted_frame_times(10.0, 1.6, 8), 10.0 + 0.2 * np.arange(1, 9))
    with pytest.raises(ValueError):
        predicted_frame_times(0.0, 0.0, 8)


def test_frames_encode_as_jpeg_or_raw_rgb8():
    rgb = np.zeros((16, 32, 3), dtype=np.uint8)
    rgb[:, 16:] = (200, 40, 10)
    jpeg = encode_frame(rgb, 'jpeg')
    assert isinstance(jpeg, bytes) and jpeg[:3] == b'\xff\xd8\xff'
    assert np.abs(decode_compressed('jpeg', jpeg).astype(int) - rgb).mean() < 8
    raw = encode_frame(rgb, 'raw')
    assert isinstance(raw, RawImage) and raw.encoding == 'rgb8' and raw.data == rgb.tobytes()
    with pytest.raises(ValueError, match='encoding'):
        encode_frame(rgb, 'png')


def test_view_topics_are_valid_names_for_any_camera_key():
    topics = view_topics(('top_camera-images-rgb', '0cam', 'wrist'), 'jpeg')
    assert topics['predicted_video/top_camera-images-rgb'] == (
        '~/predicted_video/top_camera_images_rgb/compressed'
    )
    assert topics['predicted_video/0cam'] == '~/predicted_video/camera_0cam/compressed'
    with pytest.raises(ValueError, match='two views'):
        view_topics(('a-b', 'a_b'), 'raw')


def test_view_topics_follow_image_transport_names():
    assert view_topics(('a', 'b'), 'jpeg') == {
        'model_input': '~/model_input/compressed',
        'predicted_video': '~/predicted_video/compressed',
        'predicted_video/a': '~/predicted_video/a/compressed',
        'predicted_video/b': '~/predicted_video/b/compressed',
    }
    assert view_topics(('a',), 'raw')['predicted_video/a'] == '~/predicted_video/a'


def test_only_a_policy_that_keeps_views_is_asked():
    class Keeps:
        def infer(self, observation, return_video=False, *, predicted_video=False,
                  model_input=False):  # fmt: skip
            return None

    class Plain:
        def infer(self, observation):
            return None

    assert policy_keeps_views(Keeps()) and policy_keeps_views(SerializedPolicy(Keeps()))
    assert not policy_keeps_views(Plain()) and not policy_keeps_views(SerializedPolicy(Plain()))


def test_worker_keeps_the_newest_jobs_and_never_blocks_the_submitter():
    release = threading.Event()
    started = threading.Event()
    done = []

    def handle(job):
        if job == 0:
            started.set()
            release.wait(5)
        done.append(job)

    worker = ViewWorker(handle, max_pending=2)
    assert worker.submit(0)
    assert started.wait(5)
    # job 0 is running and blocked: 1 and 2 wait, 3 replaces 1, 4 replaces 2
    assert worker.submit(1) and worker.submit(2)
    assert not worker.submit(3) and not worker.submit(4)
    assert not worker.idle()
    release.set()
    for _ in range(100):
        if worker.idle():
            break
        threading.Event().wait(0.05)
    assert done == [0, 3, 4] and worker.idle()
    worker.close()


def test_worker_reports_errors_and_keeps_going():
    errors = []
    done = []

    def handle(job):
        if job == 'bad':
            raise RuntimeError('decode failed')
        done.append(job)

    worker = ViewWorker(handle, on_error=errors.append)
    worker.submit('bad')
    for _ in range(100):
        if worker.idle():
            break
        threading.Event().wait(0.05)
    worker.submit('good')
    for _ in range(100):
        if done:
            break
        threading.Event().wait(0.05)
    assert [str(e) for e in errors] == ['decode failed'] and done == ['good']
    worker.close()


def test_counters_are_diagnostic_values():
    values = dict(ViewCounters(queries_unobserved=3, chunks_skipped=2).values())
    assert values['views_queries_unobserved'] == '3' and values['views_last_decode_ms'] == 'nan'
    assert values['views_chunks_skipped'] == '2'


def _wait(predicate, seconds=10.0):
    for _ in range(int(seconds / 0.01)):
        if predicate():
            return
        threading.Event().wait(0.01)
    raise AssertionError('timed out')


def test_worker_thread_runs_at_a_lower_priority_of_its_own():
    import os

    seen = []
    worker = ViewWorker(lambda job: seen.append(os.getpriority(os.PRIO_PROCESS, 0)), nice=10)
    worker.submit('job')
    _wait(lambda: seen)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert worker.priority == min(19, own + 10) and own < worker.priority
    # who = 0 is the calling thread on Linux: the worker's, not the process's
    assert seen == [worker.priority]
    worker.close()
    plain = ViewWorker(lambda job: None)
    _wait(lambda: plain.priority is not None)
    assert plain.priority == own
    plain.close()


def test_pacer_publishes_each_item_when_its_time_comes_and_a_newer_plan_replaces_the_rest():
    now = [100.0]
    published = []
    pacer = FramePacer(lambda item: published.append((item, now[0])), lambda: now[0])
    assert pacer.replace([(100.5, 'b'), (100.0, 'a'), (101.0, 'c')]) == 0
    _wait(lambda: published == [('a', 100.0)])
    threading.Event().wait(0.1)
    assert published == [('a', 100.0)]  # 'b' is not due yet: it waits, whatever the wall time
    now[0] = 100.5
    _wait(lambda: len(published) == 2)
    assert published[1] == ('b', 100.5)
    assert pacer.replace([(100.6, 'x'), (99.0, 'late')]) == 1  # 'c' dropped: superseded
    _wait(lambda: len(published) == 3)
    assert published[2] == ('late', 100.5)  # already due: at once
    now[0] = 101.0
    _wait(lambda: len(published) == 4)
    assert [item for item, _ in published] == ['a', 'b', 'late', 'x'] and pacer.pending() == 0
    pacer.close()
