# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Test-session settings shared by every test file.

CI and development machines have 2 cores shared by the test process and the nodes, servers and
worker ranks it starts: one torch/OpenMP thread per process avoids oversubscription, which made
tiny-model inferences take tens of seconds instead of well under one.
"""

import os

import pytest

os.environ['OMP_NUM_THREADS'] = '1'
os.environ['MKL_NUM_THREADS'] = '1'

import torch  # noqa: E402  (after the thread settings, which torch reads at import)

torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked slow (processes over DDS, servers, ranks) run once more if they fail.

    Their timing rides on the scheduling of several processes on 2 shared cores; a failure that
    repeats is a failure. pytest-rerunfailures (requirements-dev.txt) reports every rerun.
    """
    for item in items:
        if item.get_closest_marker('slow'):
            item.add_marker(pytest.mark.flaky(reruns=1))


@pytest.fixture
def closed_loop(tmp_path):
    """Starts :class:`closed_loop.ClosedLoop` s in ``tmp_path``; each is closed after the test.

    ``closed_loop(harness_name, use_sim_time=False)``: the harness node named so (what the
    node's refusals name), no process yet.
    """
    from closed_loop import ClosedLoop

    loops = []

    def start(harness: str, use_sim_time: bool = False) -> ClosedLoop:
        loops.append(ClosedLoop(tmp_path, harness, use_sim_time))
        return loops[-1]

    yield start
    for loop in loops:
        loop.close()
