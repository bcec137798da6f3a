# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-replay`` as a user runs it: what it says after the last chunk, and whose weights.

After its chunks the replay writes the video, the imagination figures, the plots and the report
(tens of seconds on a CPU): every step is announced and the long ones show their progress. A
replay against a ``dreamzero-openpi-server --preset`` server learns from the server's metadata
that the weights are random and says so, as a replay of ``--preset`` does.
"""

import json
import subprocess
import time

from node_support import ros_env
from openpi_support import ServerProcess, run_openpi
import pytest
from script_paths import installed_script

from dreamzero_ros.replay.report import RANDOM_WEIGHTS_WARNING

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

RANDOM_NOTE = 'dreamzero-replay: random weights: the scores measure nothing about DreamZero'


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp('bag') / 'bag'
    command = [installed_script('dreamzero-make-bag'), '-o', str(path), '--frames', '30']
    made = subprocess.run(
        [*command, '--source', 'synthetic'], capture_output=True, text=True, env=ros_env()
    )
    assert made.returncode == 0, made.stderr
    return path


def _replay(*args: object) -> tuple[int, list[tuple[float, str]], str]:
    """Run the replay; its exit code, its stderr lines with their arrival times, its stdout."""
    command = [installed_script('dreamzero-replay'), *map(str, args)]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**ros_env(), 'PYTHONUNBUFFERED': '1'},
    )
    lines = [(time.monotonic() - started, line.rstrip('\n')) for line in process.stderr]
    stdout = process.stdout.read()
    return process.wait(timeout=600), lines, stdout


def _index(lines: list[str], text: str, after: int = -1) -> int:
    found = [i for i, line in enumerate(lines) if text in line and i > after]
    assert found, f'{text!r} not after line {after}:\n' + '\n'.join(lines)
    return found[0]


def test_replay_says_what_it_writes_after_the_last_chunk_with_progress(bag, tmp_path):
    out = tmp_path / 'report'
    code, timed, _ = _replay(bag, '--preset', 'tiny', '--video', '-o', out)
    lines = [line for _, line in timed]
    assert code == 0, '\n'.join(lines)
    done = _index(lines, '100.0%')  # the chunks' bar ends at 100 %, not at the last query
    assert lines[done].startswith('replay [')
    writing = _index(lines, f'dreamzero-replay: writing {out}: the video (', done)
    assert 'imagination figures, the plots, metrics and report' in lines[writing]
    video_end = _index(lines, '100.0%', writing)
    assert lines[video_end].startswith('video [') and 'frames' in lines[video_end]
    video_lines = [line for line in lines[writing:video_end] if line.startswith('video [')]
    assert len(video_lines) >= 5, lines  # a line every 10 % where stderr is no terminal
    figures_end = _index(lines, '100.0%', video_end)
    assert lines[figures_end].startswith('imagination [')
    _index(lines, 'dreamzero-replay: drawing the plots and writing the report', figures_end)
    assert (out / 'prediction.mp4').is_file() and (out / 'report.html').is_file()


def test_replay_against_a_random_weight_server_says_the_weights_are_random(bag, tmp_path):
    server = ServerProcess(tmp_path / 'server.log')
    try:
        out = tmp_path / 'remote'
        code, timed, stdout = _replay(bag, '--server', server.url, '--max-chunks', '1', '-o', out)
        lines = [line for _, line in timed]
        assert code == 0, '\n'.join(lines)
        metrics = json.loads((out / 'metrics.json').read_text())
        assert metrics['policy']['random_weights'] is True
        assert metrics['policy']['source'] == f'remote server {server.url}'
        assert any(line.startswith(RANDOM_NOTE) for line in lines), lines
        assert RANDOM_WEIGHTS_WARNING in (out / 'report.html').read_text()
        assert json.loads(stdout)['chunks'] == 1

        # openpi-client (as RoboArena's clients) gets the client-configuration fields only:
        # RoboArena builds its PolicyServerConfig from them and rejects unknown keys
        client = (
            'import json, sys\n'
            'from openpi_client.websocket_client_policy import WebsocketClientPolicy\n'
            "client = WebsocketClientPolicy(host='127.0.0.1', port=int(sys.argv[1]))\n"
            'print(json.dumps(sorted(client.get_server_metadata())))\n'
        )
        keys = run_openpi(['-c', client, str(server.port)])
        assert 'random_weights' not in keys and 'image_resolution' in keys
    finally:
        server.stop()
