# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Lifecycle round trips of the node over real DDS, with engine worker ranks over gloo.

Transitions are requested through the node's ``~/change_state`` service and checked through
``~/get_state``, as ros2/demos' lifecycle tests do; the node, its worker rank and the test are
separate processes. The first configure runs CFG parallel, the second tensor parallel (the
parameters changed while unconfigured); each serves, through the node's OpenPI bridge, the
actions of the one-process engine.
"""

import time

from node_support import NODE, alive, child_pids, is_hold
import numpy as np
import pytest

from dreamzero_ros.engine.workers.protocol import free_port

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
#: Rank 0's wait for the worker and for each collective; the node idles longer than this.
WORKER_TIMEOUT = 20.0


#: The two round trips: engine.cfg_parallel, engine.tensor_parallel.
ROUNDS = ((2, 1), (1, 2))


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    return write_random_checkpoint(tmp_path_factory.mktemp('tiny'), preset='tiny')


def _observations():
    from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation

    return [random_observation(seed=seed, session_id='bridge', stamp=seed) for seed in (7, 8)]


@pytest.fixture(scope='module')
def one_process_actions(checkpoint):
    """The actions of the engine in one process (the node's engine options) for the requests."""
    from dreamzero_ros.engine.loader import load_engine
    from dreamzero_ros.engine.options import EngineOptions

    engine = load_engine(str(checkpoint), EngineOptions(device='cpu', dtype='float32'))
    actions = [engine.infer(observation).actions for observation in _observations()]
    assert not np.allclose(actions[0], actions[1])  # the comparison is not between constants
    return actions


def _bridge_actions(port: int) -> list[np.ndarray]:
    from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy

    with RemoteOpenPIPolicy(f'ws://127.0.0.1:{port}') as remote:
        return [remote.infer(observation).actions for observation in _observations()]


def _chunks_after(harness, since):
    return [m for m in harness.messages('controller', since) if not is_hold(m)]


def _assert_serves_chunks(harness, node, what):
    since = harness.now()
    harness.wait_for(lambda: len(_chunks_after(harness, since)) >= 1, TIMEOUT, what, node.log)


def test_round_trip_restarts_the_worker_ranks_and_applies_new_parameters(
    checkpoint, one_process_actions, closed_loop
):
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips

    bridge_port = free_port()
    loop = closed_loop('lifecycle_harness')
    node = loop.start_node(
        'autostart:=false',
        f'engine.checkpoint:={checkpoint}',
        f'engine.worker_timeout:={WORKER_TIMEOUT}',
        'engine.warmup:=false',
        'openpi_bridge.enabled:=true',
        f'openpi_bridge.port:={bridge_port}',
    )
    harness = loop.harness
    harness.record('controller', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    # the gripper controller of config/cpu_small.yaml: enable needs every group's controller
    harness.record('gripper', JointTrajectory, 'gripper_controller/joint_trajectory')
    loop.stream_cameras(demo_clips(15)[0], joint_states=True)
    workers_seen = []
    assert harness.lifecycle_state(NODE) == 'unconfigured'
    for round_trip, max_age in enumerate((2, 1.5)):
        # configure-time parameters change while unconfigured (an integer for a double too)
        assert harness.set_parameter(NODE, 'max_age', max_age).successful
        cfg, tp = ROUNDS[round_trip]
        assert harness.set_parameter(NODE, 'engine.cfg_parallel', cfg).successful
        assert harness.set_parameter(NODE, 'engine.tensor_parallel', tp).successful
        assert harness.change_state(NODE, 'configure'), node.log()[-3000:]
        assert harness.lifecycle_state(NODE) == 'inactive'
        workers = child_pids(node.process.pid)
        assert len(workers) == 1, node.log()[-3000:]
        workers_seen.append(workers.pop())
        refused = harness.set_parameter(NODE, 'max_age', 3.0)
        assert not refused.successful and 'unconfigured' in refused.reason
        assert harness.get_parameters(NODE, ['max_age'])['max_age'] == float(max_age)
        for got, want in zip(_bridge_actions(bridge_port), one_process_actions, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

        if round_trip == 0:  # idle (inactive) past the collective timeout: the worker waits
            time.sleep(WORKER_TIMEOUT + 2)
            assert alive(workers_seen[-1])
        assert harness.change_state(NODE, 'activate')
        assert harness.lifecycle_state(NODE) == 'active'
        _assert_serves_chunks(
            harness, node, f'a chunk from {ROUNDS[round_trip]}, round {round_trip}'
        )

        assert harness.change_state(NODE, 'deactivate')
        assert harness.lifecycle_state(NODE) == 'inactive'
        assert harness.change_state(NODE, 'cleanup')
        assert harness.lifecycle_state(NODE) == 'unconfigured'
        end = time.monotonic() + 15
        while alive(workers_seen[-1]) and time.monotonic() < end:
            time.sleep(0.05)
        assert not alive(workers_seen[-1]), 'cleanup left the worker rank running'
    assert workers_seen[0] != workers_seen[1]
    log = node.log()
    assert log.count('parallel engine (cfg_parallel 2 x tensor_parallel 1 = 2 ranks)') == 1
    assert log.count('parallel engine (cfg_parallel 1 x tensor_parallel 2 = 2 ranks)') == 1
    assert loop.close() == 0, node.log()[-3000:]
    assert not any(alive(pid) for pid in workers_seen)
