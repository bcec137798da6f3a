# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A user's mistakes in arguments, parameter files and devices end each tool in one line.

Every tool runs as the user runs it (its console script, in its own process): a bad option, a
parameter file that is not YAML, not a map, missing or an alias bomb, a misspelt parameter, a
device this machine lacks, Ctrl-C while a checkpoint is written.
"""

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

from node_support import ros_env
import pytest
from script_paths import installed_script

from dreamzero_ros.console import EXIT_INTERRUPTED, EXIT_RESOURCE, EXIT_USAGE

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

#: Each tool and the arguments it needs before the mistake.
TOOLS = {
    'dreamzero-replay': ['bag', '--preset', 'tiny'],
    'dreamzero-make-bag': [],
    'dreamzero-live-replay': ['bag'],
    'dreamzero-preflight': [],
    'dreamzero-openpi-server': ['--preset', 'tiny'],
    'dreamzero-demo': [],
    'dreamzero-policy-node': [],
    'dreamzero-sim-arm': [],
    'dreamzero-demo-stream': [],
}
#: The tools that read the node's parameter file themselves (--params-file).
PARAMS_FILE_TOOLS = {
    'dreamzero-replay': ['{bag}', '--preset', 'tiny'],
    'dreamzero-make-bag': ['-o', '{tmp}/new_bag', '--frames', '2', '--source', 'synthetic'],
    'dreamzero-live-replay': ['{bag}', '--wait', '0'],
    'dreamzero-preflight': ['--duration', '0.1'],
}
#: The ROS nodes, whose parameter file rcl reads (--ros-args --params-file).
ROS_TOOLS = ('dreamzero-policy-node', 'dreamzero-sim-arm', 'dreamzero-demo-stream')

#: Not YAML: a parameter indented by one space too few (the error is on line 4).
NOT_YAML = '/**:\n  ros__parameters:\n    max_age: 1.0\n   prompt: x\n'


def _run(name, *args, timeout=120):
    command = [installed_script(name), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ros_env())


def _lines(result, code):
    """The output lines of a run that ended with ``code``, without a traceback."""
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == code, output[-3000:]
    assert 'Traceback' not in output, output[-3000:]
    return output.splitlines()


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp('bag') / 'bag'
    made = _run('dreamzero-make-bag', '-o', path, '--frames', '4', '--source', 'synthetic')
    assert made.returncode == 0, made.stderr
    return path


@pytest.mark.parametrize('name', sorted(TOOLS))
def test_a_bad_option_prints_one_usage_line_and_the_error(name):
    result = _run(name, *TOOLS[name], '--no-such-option')
    lines = result.stderr.strip().splitlines()
    assert result.returncode == EXIT_USAGE, result.stderr
    assert len(lines) == 2 and lines[0].startswith(f'usage: {name}'), result.stderr
    assert lines[1] == f'{name}: error: unrecognized arguments: --no-such-option'


@pytest.mark.parametrize('name', sorted(PARAMS_FILE_TOOLS))
def test_a_params_file_that_is_not_yaml_is_named_with_its_line(name, bag, tmp_path):
    params = tmp_path / 'broken.yaml'
    params.write_text(NOT_YAML)
    args = [a.format(bag=bag, tmp=tmp_path) for a in PARAMS_FILE_TOOLS[name]]
    lines = _lines(_run(name, *args, '--params-file', params), EXIT_USAGE)
    assert f'{params} is not valid YAML: line 4' in lines[-1], lines
    assert not (tmp_path / 'new_bag').exists()


@pytest.mark.parametrize('name', ROS_TOOLS)
def test_a_ros_params_file_that_is_not_yaml_is_one_line_not_rcl_s_message(name, tmp_path):
    params = tmp_path / 'broken.yaml'
    params.write_text(NOT_YAML)
    lines = _lines(_run(name, '--ros-args', '--params-file', params), EXIT_USAGE)
    assert len(lines) == 2, lines
    assert lines[-1].startswith(f'{name}: error: --params-file: {params} is not valid YAML: line 4')

    params.write_text('- a\n- b\n')  # YAML, but no map: rcl's own message, less its C sources
    lines = _lines(_run(name, '--ros-args', '--params-file', params), EXIT_USAGE)
    assert "Couldn't parse params file" in lines[-1] and '.c:' not in lines[-1], lines


def test_preflight_params_file_mistakes_are_one_line_with_a_listed_exit_code(tmp_path):
    listed = _run('dreamzero-preflight', '--help').stdout
    assert '2 invalid arguments or parameters (a missing' in ' '.join(listed.split())
    params = tmp_path / 'list.yaml'
    params.write_text('- max_age: 1.0\n- prompt: x\n')
    lines = _lines(_run('dreamzero-preflight', '--params-file', params), EXIT_USAGE)
    assert lines == [
        f'[FAIL] parameters: {params}: expected a map of node sections ("/**:" with '
        'ros__parameters), got a list'
    ]
    lines = _lines(_run('dreamzero-preflight', '--params-file', tmp_path / 'absent.yaml'), 2)
    assert lines == [f'[FAIL] parameters: missing file {tmp_path / "absent.yaml"}']


def _alias_bomb() -> str:
    """A 0.6 KB parameter file standing for 9**9 (387 million) strings."""
    lines = ['/**:', '  ros__parameters:', '    a0: &a0 [' + ','.join(['lol'] * 9) + ']']
    lines += [f'    a{i}: &a{i} [' + ','.join([f'*a{i - 1}'] * 9) + ']' for i in range(1, 9)]
    lines.append('    camera_topics: [' + ','.join(['*a8'] * 9) + ']')
    return '\n'.join(lines) + '\n'


def test_preflight_refuses_an_alias_bomb_at_once_in_one_short_line(tmp_path):
    """Refused as fast as Python imports the tool (twice) plus two seconds, in one short line."""
    params = tmp_path / 'bomb.yaml'
    params.write_text(_alias_bomb())
    assert params.stat().st_size < 1024
    started = time.monotonic()
    subprocess.run([sys.executable, '-c', 'import dreamzero_ros.ros.preflight'], check=True)
    import_s = time.monotonic() - started
    started = time.monotonic()
    result = _run('dreamzero-preflight', '--params-file', params, timeout=300)
    seconds = time.monotonic() - started
    lines = _lines(result, EXIT_USAGE)
    assert lines == [f'[FAIL] parameters: {params} holds more than 200000 values']
    assert seconds < 2 * import_s + 2.0, (seconds, import_s)


@pytest.mark.parametrize('duration', ['-1', 'nan', 'inf', '1e12', '0'])
def test_preflight_refuses_a_duration_that_is_not_a_sane_number_of_seconds(duration):
    lines = _lines(_run('dreamzero-preflight', f'--duration={duration}'), EXIT_USAGE)
    assert lines[-1] == (
        'dreamzero-preflight: error: argument --duration: expected seconds above 0 and at '
        f"most 600, got '{duration}'"
    )


def test_sim_arm_refuses_a_misspelt_parameter_naming_it(tmp_path):
    result = _run('dreamzero-sim-arm', '--ros-args', '-p', 'gripper.interfce:=float64')
    lines = _lines(result, EXIT_USAGE)
    assert "unknown parameters ['gripper.interfce']" in lines[-1], lines
    assert 'did you mean gripper.interface?' in lines[-1]
    assert not any(line.startswith('ready:') or 'ready:' in line for line in lines)


@pytest.mark.parametrize('name', ['dreamzero-policy-node', *ROS_TOOLS[1:]])
def test_ros_tools_list_their_exit_codes(name):
    result = _run(name, '--help')
    assert result.returncode == 0
    assert 'exit codes: 0 stopped' in result.stdout and '2 invalid arguments' in result.stdout


def _cuda_absent() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.skipif(not _cuda_absent(), reason='this machine has a CUDA device')
def test_device_cuda_without_cuda_is_one_line(bag):
    for name, args in (
        ('dreamzero-replay', [bag, '--preset', 'tiny']),
        ('dreamzero-openpi-server', ['--preset', 'tiny', '--port', '0']),
    ):
        lines = _lines(_run(name, *args, '--device', 'cuda'), EXIT_RESOURCE)
        assert lines[-1].startswith(f'{name}: error: --device cuda: '), lines
        assert 'CUDA' in lines[-1] and 'use --device cpu or auto' in lines[-1]
        assert 'Torch not compiled' not in '\n'.join(lines)
    worker = [installed_script('dreamzero-engine-worker'), '--preset', 'tiny', '--device', 'cuda']
    result = subprocess.run(
        worker, capture_output=True, text=True, timeout=120, env={**ros_env(), 'RANK': '1'}
    )
    assert _lines(result, EXIT_RESOURCE)[-1].startswith('dreamzero-engine-worker: error: --device')


@pytest.mark.skipif(not _cuda_absent(), reason='this machine has a CUDA device')
def test_node_engine_device_cuda_without_cuda_names_the_parameter(tmp_path):
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    result = _run(
        'dreamzero-policy-node', '--ros-args', '-p', f'engine.checkpoint:={checkpoint}',
        '-p', 'engine.device:=cuda',
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert (
        'configure failed: error: DeviceUnavailableError: engine.device cuda: this torch' in output
    )
    assert 'Torch not compiled' not in output


def test_demo_interrupted_while_writing_its_checkpoint_leaves_no_partial_folder(tmp_path):
    cache = tmp_path / 'cache'
    command = [installed_script('dreamzero-demo'), '--cache-dir', str(cache)]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=ros_env()
    )
    deadline = time.monotonic() + 120
    while not list(cache.glob('.random-small.partial-*')) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, 'the demo ended before writing its checkpoint'
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert stderr.strip().splitlines()[-1] == 'dreamzero-demo: interrupted'
    assert sorted(path.name for path in cache.iterdir()) == []


def test_a_partial_checkpoint_of_a_dead_writer_is_removed_by_the_next(tmp_path):
    from dreamzero_ros.engine.loader import cached_random_checkpoint

    dead = subprocess.Popen(['true'])
    dead.wait()
    stale = tmp_path / f'.random-tiny.partial-{dead.pid}'
    (stale / 'experiment_cfg').mkdir(parents=True)
    alive = tmp_path / f'.random-tiny.partial-{os.getppid()}'  # another writer, still running
    alive.mkdir()
    folder, written = cached_random_checkpoint(tmp_path, 'tiny')
    assert written and (folder / 'config.json').is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(['random-tiny', alive.name])


def test_engine_worker_offers_the_presets_of_every_tool():
    from dreamzero_ros.engine.loader import RANDOM_PRESETS
    from dreamzero_ros.engine.workers.worker import build_parser

    help_text = build_parser().format_help()
    assert f'--preset {{{",".join(RANDOM_PRESETS)}}}' in help_text, help_text
    assert Path(installed_script('dreamzero-engine-worker')).exists()
