# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every real client's reply and reset conventions, served by one server with its defaults.

openpi-client itself is covered by test_openpi_server.py; here the other clients' calls and
checks (scripts/openpi_client_conventions.py, run in the openpi-client venv) meet the tiny
engine behind a default server, and RoboArena's self-test a server told to reply with maps.
"""

from __future__ import annotations

from openpi_support import SCRIPTS, run_openpi, tiny_engine
import pytest

from dreamzero_ros.openpi import OpenPIServer, ServerConfig

CONVENTIONS = str(SCRIPTS / 'openpi_client_conventions.py')


@pytest.fixture(scope='module')
def engine(tmp_path_factory):
    return tiny_engine(tmp_path_factory.mktemp('tiny-checkpoint'))


@pytest.fixture(scope='module')
def server(engine):
    handle = OpenPIServer(engine, ServerConfig(port=0)).start()
    yield handle
    handle.stop()


def _scenario(port: int, name: str) -> dict:
    out = run_openpi([CONVENTIONS, '--port', str(port), name], timeout=300)
    assert out['ok'], out
    return out['result']


def test_dreamzero_test_client_gets_bare_arrays(server):
    result = _scenario(server.port, 'dreamzero-test-client')
    assert result['n_external_cameras'] == 2
    assert [reply['type'] for reply in result['actions']] == ['ndarray'] * 3
    assert all(reply['shape'] == [24, 8] for reply in result['actions'])


def test_seed_example_client_gets_arrays_and_a_reset_it_accepts(server):
    result = _scenario(server.port, 'seed-example')
    assert result['reset_status'] == 'reset successful'
    assert [reply['shape'] for reply in result['actions']] == [[24, 8]] * 3


def test_seed_sim_eval_client_runs_episode_after_episode(server):
    episodes = _scenario(server.port, 'seed-sim-eval')['episodes']
    assert len(episodes) == 2
    for episode in episodes:
        assert episode['shapes'] == [[24, 8], [24, 8]]
        assert episode['reset_reply'] == 'reset successful'


def test_roboarena_evaluator_reads_actions_from_the_map(server):
    assert _scenario(server.port, 'roboarena-evaluator')['executed_per_chunk'] == [24, 24, 24]


def test_roboarena_selftest_passes_with_dict_replies(engine):
    handle = OpenPIServer(engine, ServerConfig(port=0, reply_format='dict')).start()
    try:
        assert _scenario(handle.port, 'roboarena-selftest')['shape'] == [24, 8]
    finally:
        handle.stop()
