# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-openpi-server --tensor-parallel 2``: rank 0 serves, rank 1 is its worker process.

The server (``--preset tiny`` on the CPU, gloo) is a process of its own and starts its worker
rank itself; the reference openpi-client (its own venv) drives it like the DROID main loop, and
the actions it serves equal those of the one-process engine in the test.
"""

from node_support import alive, child_pids
import numpy as np
from openpi_support import (
    CLIENT_CONFIG,
    LOOP,
    ServerProcess,
    droid_frames,
    run_openpi,
    tiny_engine,
)
import pytest
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.openpi import RemoteOpenPIPolicy

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


@pytest.fixture(scope='module')
def engine(tmp_path_factory):
    return tiny_engine(tmp_path_factory.mktemp('tiny-checkpoint'))


def test_tensor_parallel_server_serves_the_one_process_actions(engine, tmp_path):
    frames = tmp_path / 'droid.npz'
    np.savez(frames, **droid_frames(16))
    server = ServerProcess(tmp_path / 'server.log', '--tensor-parallel', '2')
    try:
        assert 'parallel engine (cfg_parallel 1 x tensor_parallel 2 = 2 ranks)' in server.log()
        (worker,) = child_pids(server.process.pid)
        out = run_openpi(
            [LOOP, '--port', str(server.port), '--steps', '16', '--frames', str(frames)]
        )
        assert out['queries'] == 2 and out['metadata'] == CLIENT_CONFIG
        assert all(np.isfinite(out['final_joint_position']))
        observations = [
            random_observation(seed=seed, session_id='tp', stamp=seed) for seed in (3, 4)
        ]
        with RemoteOpenPIPolicy(server.url) as remote:
            served = [remote.infer(observation).actions for observation in observations]
        local = [engine.infer(observation).actions for observation in observations]
        assert not np.allclose(local[0], local[1])
        for got, want in zip(served, local, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    finally:
        server.stop()
    assert server.process.returncode == 0, server.log()[-3000:]
    assert not alive(worker)


@pytest.mark.skipif(torch.cuda.device_count() > 1, reason='needs fewer than two CUDA devices')
def test_ranks_without_their_gpus_are_refused_before_any_worker_starts(capsys):
    from dreamzero_ros.openpi.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(['--preset', 'tiny', '--device', 'cuda:0', '--tensor-parallel', '2', '--port', '0'])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert 'cfg_parallel 1 x tensor_parallel 2 = 2 ranks need one GPU each' in error
    assert 'worker_gpus' in error


def test_tensor_parallel_must_be_positive(capsys):
    from dreamzero_ros.openpi.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(['--preset', 'tiny', '--tensor-parallel', '0'])
    assert 'argument --tensor-parallel: 0 is outside the range [1, 8]' in capsys.readouterr().err
