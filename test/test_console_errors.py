# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A user's mistakes and Ctrl-C end every console script in one line naming the fix."""

import os
from pathlib import Path
import signal
import socket
import subprocess
import sys
import time

from node_support import ros_env
import pytest
from script_paths import installed_script

from dreamzero_ros.console import (
    EXIT_CONNECTION,
    EXIT_INTERRUPTED,
    EXIT_MODEL,
    EXIT_RESOURCE,
    EXIT_USAGE,
)
from dreamzero_ros.replay.staged_folder import remove_stale_partials

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


def _run(name, *args, env=None, timeout=120):
    command = [installed_script(name), *map(str, args)]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env or ros_env()
    )


def _one_line(result, code):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert 'Traceback' not in result.stderr, result.stderr
    return lines[-1]


def _bag(tmp_path) -> Path:
    bag = tmp_path / 'bag'
    made = _run('dreamzero-make-bag', '-o', bag, '--frames', '8', '--source', 'synthetic')
    assert made.returncode == 0
    return bag


def test_replay_mistakes_end_in_one_line(tmp_path):
    bag = _bag(tmp_path)
    (tmp_path / 'not_a_checkpoint').mkdir()
    result = _run('dreamzero-replay', bag, '--checkpoint', tmp_path / 'not_a_checkpoint')
    line = _one_line(result, EXIT_MODEL)
    assert 'is not a DreamZero checkpoint: it has no config.json' in line
    assert 'tokenizer_file' not in result.stderr

    result = _run('dreamzero-replay', bag, '--server', 'http://127.0.0.1:9')
    assert 'must be ws://HOST:PORT' in _one_line(result, EXIT_USAGE)

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    result = _run('dreamzero-replay', bag, '--server', f'ws://127.0.0.1:{port}')
    assert 'cannot connect to OpenPI server' in _one_line(result, EXIT_CONNECTION)

    result = _run('dreamzero-replay', bag, '--server', f'127.0.0.1:{port}', '--debug')
    assert result.returncode == EXIT_CONNECTION and 'Traceback' in result.stderr


def test_openpi_server_refuses_a_busy_port_before_loading(tmp_path):
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _run('dreamzero-openpi-server', '--preset', 'small', '--port', port)
    line = _one_line(result, EXIT_RESOURCE)
    assert f'cannot listen on 127.0.0.1:{port} (in use)' in line and '--port' in line
    assert 'loading the model' not in result.stderr


def test_make_bag_interrupted_leaves_no_folder_and_stale_ones_are_cleaned(tmp_path):
    out = tmp_path / 'long_bag'
    command = [installed_script('dreamzero-make-bag'), '-o', str(out), '--source', 'synthetic']
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=ros_env()
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob('.long_bag.partial-*')) and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert stderr.strip().splitlines()[-1] == 'dreamzero-make-bag: interrupted'
    assert list(tmp_path.iterdir()) == []

    dead = subprocess.Popen(['true'])
    dead.wait()
    stale = tmp_path / f'.long_bag.partial-{dead.pid}'
    (stale / 'long_bag').mkdir(parents=True)
    alive = tmp_path / f'.long_bag.partial-{os.getpid()}'
    alive.mkdir()
    assert remove_stale_partials(out) == [stale]
    assert not stale.exists() and alive.exists()


def test_live_replay_with_no_node_says_nothing_was_recorded(tmp_path):
    bag = _bag(tmp_path)
    result = _run(
        'dreamzero-live-replay', bag, '-o', tmp_path / 'chunks', '--wait', '0',
        '--linger', '0.2', '--rate', '4',
    )  # fmt: skip
    line = _one_line(result, 1)
    assert 'nothing recorded' in line and 'use_sim_time:=true' in line
    assert not (tmp_path / 'chunks').exists()  # no empty recording that looks finished
    assert sorted(path.name for path in tmp_path.iterdir()) == ['bag']


def test_tools_name_their_policy_alike(tmp_path):
    from dreamzero_ros.openpi.cli import build_parser
    from dreamzero_ros.replay.cli import build_replay_parser

    server, replay = build_parser(), build_replay_parser()
    for parser in (server, replay):
        help_text = parser.format_help()
        assert '--checkpoint DIR' in help_text and '--preset {tiny,small}' in help_text
        assert '--debug' in help_text and 'exit codes:' in help_text
    args = replay.parse_args(['bag', '--checkpoint', 'ckpt', '-o', 'report'])
    assert (str(args.checkpoint), str(args.output)) == ('ckpt', 'report')
    assert str(server.parse_args(['--checkpoint', 'ckpt']).checkpoint) == 'ckpt'
    for argv in (['ckpt'], ['--checkpoint', 'ckpt', '--preset', 'tiny'], ['--port', '0']):
        with pytest.raises(SystemExit):
            server.parse_args(argv)
    with pytest.raises(SystemExit):
        replay.parse_args(['bag', '--preset', 'huge'])


#: Each tool with arguments that start real work, the module its console script imports, and
#: the line it must print first.
FIRST_LINES = {
    'dreamzero-make-bag': (
        ['-o', '{tmp}/new_bag', '--frames', '8', '--source', 'synthetic'],
        'dreamzero_ros.replay.cli',
        'dreamzero-make-bag: writing',
    ),
    'dreamzero-export': (
        ['{bag}', '-o', '{tmp}/dataset', '--min-frames', '1'],
        'dreamzero_ros.export.cli',
        'dreamzero-export: writing',
    ),
    'dreamzero-replay': (
        ['{bag}', '--preset', 'tiny', '--max-chunks', '1'],
        'dreamzero_ros.replay.cli',
        'dreamzero-replay: checking',
    ),
    'dreamzero-live-replay': (
        ['{bag}', '--wait', '0', '--linger', '0.2'],
        'dreamzero_ros.replay.cli',
        'dreamzero-live-replay: playing',
    ),
    'dreamzero-openpi-server': (
        ['--preset', 'tiny', '--port', '0'],
        'dreamzero_ros.openpi.cli',
        'loading the model',
    ),
    'dreamzero-preflight': (
        ['--duration', '1'],
        'dreamzero_ros.ros.preflight',
        'dreamzero-preflight: waiting up to 10 s for the publishers, listening 1 s',
    ),
    'dreamzero-sim-arm': ([], 'dreamzero_ros.ros.sim_arm', 'ready:'),
    'dreamzero-demo-stream': ([], 'dreamzero_ros.ros.demo_stream', 'publishing'),
    'dreamzero-demo': (
        ['--cache-dir', '{tmp}/cache'],
        'dreamzero_ros.demo',
        'dreamzero-demo: the policy node',
    ),
}


def _seconds_to_first_line(command, env) -> tuple[float, str]:
    started = time.monotonic()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        line = process.stdout.readline()
        return time.monotonic() - started, line
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.mark.parametrize('name', sorted(FIRST_LINES))
def test_every_tool_says_what_it_does_first(tmp_path, name):
    """Its first line comes before any slow work: about as soon as Python has imported it.

    The bound is derived from the machine's load: the time Python takes to import the tool's
    module now, twice, plus a second.
    """
    args, module, first = FIRST_LINES[name]
    bag = _bag(tmp_path) if '{bag}' in args else None
    env = {**ros_env(), 'PYTHONUNBUFFERED': '1'}
    started = time.monotonic()
    subprocess.run([sys.executable, '-c', f'import {module}'], check=True, env=env)
    import_s = time.monotonic() - started
    command = [installed_script(name), *(a.format(tmp=tmp_path, bag=bag) for a in args)]
    seconds, line = _seconds_to_first_line(command, env)
    assert first in line, line
    assert seconds < 2 * import_s + 1.0, (seconds, import_s, line)
