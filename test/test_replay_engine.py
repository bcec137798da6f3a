# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay end to end with the real (tiny, random-weight) DreamZero engine."""

import json

import av
import numpy as np
import pytest
from replay_support import STEP, demo_bag, demo_state, evaluate_two_chunks
import torch

from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.replay.cli import replay_main
from dreamzero_ros.replay.report import write_outputs
from dreamzero_ros.replay.video import VideoComparison

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

START = 1_700_000_000.0


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('tiny'), 'tiny')


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    return demo_bag(tmp_path_factory.mktemp('bag'), num_frames=15, image_format='jpeg')


def test_engine_chunks_are_scored_against_the_recording(tmp_path, checkpoint, bag):
    video = VideoComparison()
    engine, topics, evaluation = evaluate_two_chunks(bag, checkpoint, video.add_chunk)
    metrics = evaluation.metrics()

    assert metrics['chunks'] == 2 and metrics['refusals'] == {}
    horizon = engine.metadata['action_horizon']
    records = evaluation.records
    assert [r.actions.shape for r in records] == [(horizon, 8)] * 2
    assert [r.chunk_id for r in records] == [0, 1]
    assert records[0].stamp - START == pytest.approx(0.0, abs=1e-6)
    assert records[1].stamp - START == pytest.approx(0.5, abs=1e-6)
    # hand check of the arm MAE: the bag's trajectory is known in closed form
    errors = []
    for record in records:
        times = record.stamp - START + STEP * np.arange(horizon)
        inside = times <= 0.98 + 1e-9  # the joint states end at 0.98 s
        errors.append(np.abs(record.actions[inside, :7] - demo_state(times[inside])[:, :7]))
    expected = np.concatenate(errors).mean()
    assert metrics['errors']['arm']['mae'] == pytest.approx(expected, abs=1e-4)
    assert metrics['timing']['horizon'] == horizon
    assert metrics['timing']['step_duration_s'] == pytest.approx(STEP)
    assert {'encode', 'denoise', 'total'} <= set(metrics['policy_timing_ms'])

    assert video.frame_count > 0
    path = video.write(bag, topics, tmp_path / 'prediction.mp4')
    with av.open(str(path)) as container:
        frames = [frame.to_ndarray(format='rgb24') for frame in container.decode(video=0)]
    assert len(frames) == video.frame_count
    height, width, _ = frames[0].shape
    assert width == 2 * (width // 2) and width > height  # predicted | recorded, side by side
    assert frames[0][:, width // 2 :].mean() > 20  # the recorded side holds the camera views
    written = write_outputs(evaluation, tmp_path / 'out', path.name)
    assert json.loads(written['metrics'].read_text())['chunks'] == 2
    html = written['report'].read_text()
    assert html.count('data:image/png;base64,') == 4
    assert '<video' in html and 'prediction.mp4' in html


def test_replay_console_script_with_a_checkpoint(tmp_path, checkpoint, bag, capsys):
    out = tmp_path / 'out'
    status = replay_main(
        [str(bag), '--checkpoint', str(checkpoint), '--device', 'cpu', '--max-chunks', '1',
         '--out', str(out), '--no-progress', '--prompt', 'wipe the table']
    )  # fmt: skip
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary['chunks'] == 1
    assert summary['latency_p50_s'] > 0
    assert set(summary['outputs']) == {
        'metrics', 'report', 'joints', 'error_by_step', 'error_heatmap', 'latency'
    }  # fmt: skip
    metrics = json.loads((out / 'metrics.json').read_text())
    assert metrics['prompt'] == 'wipe the table'
    assert len(metrics['errors']['by_step_joint']['mae']) == 24
    assert not (out / 'prediction.mp4').exists()
    # the report names the policy that produced it; real weights carry no warning
    assert metrics['policy']['source'] == f'checkpoint {checkpoint}'
    assert metrics['policy']['random_weights'] is False
    assert metrics['policy']['options']['device'] == 'cpu'
    report = (out / 'report.html').read_text()
    assert f'checkpoint {checkpoint}' in report and 'random weights' not in report
    assert 'hold-position baseline' in report and '<dt>late</dt>' in report


def test_replay_report_of_random_weights_says_so(tmp_path, bag, capsys):
    out = tmp_path / 'out'
    status = replay_main([str(bag), '--preset', 'tiny', '--max-chunks', '2', '--out', str(out),
                          '--no-progress'])  # fmt: skip
    assert status == 0
    assert 'random weights: the scores measure nothing' in capsys.readouterr().err
    metrics = json.loads((out / 'metrics.json').read_text())
    assert metrics['policy']['random_weights'] is True
    assert 'These chunks come from random weights' in (out / 'report.html').read_text()


def test_replay_with_tensor_parallel_scores_the_one_process_actions(tmp_path, checkpoint, bag):
    """The test process is rank 0 and starts rank 1 (dreamzero-engine-worker) for the replay."""
    common = [str(bag), '--checkpoint', str(checkpoint), '--device', 'cpu', '--max-chunks', '2',
              '--no-progress']  # fmt: skip
    maes = []
    for parallel in ([], ['--tensor-parallel', '2']):
        out = tmp_path / f'out{len(parallel)}'
        assert replay_main([*common, *parallel, '--out', str(out)]) == 0
        metrics = json.loads((out / 'metrics.json').read_text())
        assert metrics['chunks'] == 2
        # per step and joint; None (NaN) for steps beyond the recording
        maes.append(np.array(metrics['errors']['by_step_joint']['mae'], dtype=float))
    assert np.isfinite(maes[0]).sum() >= 7
    np.testing.assert_allclose(maes[1], maes[0], rtol=1e-4, atol=1e-6)
    assert not torch.distributed.is_initialized()  # the group was left, the worker ended


def test_replay_against_a_remote_server_reads_the_api_key_from_a_file(tmp_path, bag, capsys):
    from openpi_support import ServerProcess

    key_file = tmp_path / 'key'
    key_file.write_text('replay-secret\n')
    key_file.chmod(0o600)
    server = ServerProcess(tmp_path / 'server.log', '--api-key-file', str(key_file))
    try:
        common = [str(bag), '--server', server.url, '--max-chunks', '1', '--no-progress']
        with pytest.raises(SystemExit):  # a key on the command line is not an option
            replay_main([*common, '--api-key', 'replay-secret'])
        capsys.readouterr()
        out = ['--out', str(tmp_path / 'out')]
        status = replay_main([*common, '--api-key-file', str(key_file), *out])
        assert status == 0
        assert json.loads(capsys.readouterr().out)['chunks'] == 1
        status = replay_main([*common, '--api-key-file', str(tmp_path / 'missing')])
        assert status == 2
        assert 'cannot read the API key file' in capsys.readouterr().err
    finally:
        server.stop()
