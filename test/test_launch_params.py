# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The launch file's arguments, and the config files loaded into the real node through rclpy."""

import ast
from collections.abc import Callable, Iterator
import contextlib
import importlib.util
import inspect
import json
import math
import subprocess
import sys

from machine_load import load_factor
from node_support import CONFIG, NODE, REPO, Harness, NodeProcess, ros_env
import pytest

from dreamzero_ros.core.config.launch_plan import engine_launch_arguments, plan_launch
from dreamzero_ros.core.config.node_config import PARAMETERS, read_params_file
from dreamzero_ros.core.processes.process_lifetime import stop_process

LAUNCH_FILE = REPO / 'launch' / 'dreamzero.launch.py'
#: The launch files' node descriptions.
LAUNCH_ACTIONS = REPO / 'dreamzero_ros' / 'ros' / 'launch_actions.py'
#: Seconds a node takes to start (imports, parameters) on an idle machine, at most; the waits
#: for it are this times the machine's load (machine_load.load_factor).
NODE_START_S = 30.0
REQUIRED_ARGUMENTS = {
    'config',
    'checkpoint',
    'base_checkpoint',
    'encoder_dir',
    'embodiment_tag',
    'embodiment_file',
    'prompt_template',
    'gpus',
    'cfg_parallel',
    'tensor_parallel',
    'openpi_bridge',
    'openpi_port',
    'use_sim_time',
    'dry_run',
    'autostart',
}


@pytest.fixture(scope='module')
def harness():
    harness = Harness('launch_params_harness')
    yield harness
    harness.close()


def test_launch_arguments_are_declared_and_described():
    source = LAUNCH_FILE.read_text()
    tree = ast.parse(source)
    names = {
        key.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == 'ARGUMENTS'
        for key in node.value.keys
        if key is not None  # **engine_launch_arguments(): generated from the node parameters
    }
    assert '**engine_launch_arguments(),' in source
    names |= set(engine_launch_arguments())
    assert REQUIRED_ARGUMENTS <= names
    # The launch file passes every argument but config and namespace to plan_launch by name.
    assert 'plan_launch(read_params_file(config), **args)' in source
    planned = {
        name
        for name, parameter in inspect.signature(plan_launch).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert names - {'config', 'namespace'} == planned
    assert 'launch_description(ARGUMENTS, _launch_setup)' in source  # every one declared
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == 'ARGUMENTS':
            for value in node.value.values:
                if isinstance(value, ast.Call):
                    continue  # the generated engine arguments, checked in test_engine_options
                description = value.elts[1]
                text = ast.literal_eval(description)
                assert isinstance(text, str) and len(text) > 10


def test_the_node_is_launched_as_a_lifecycle_node_brought_up_by_its_own_autostart():
    """One mechanism in charge: the node's autostart parameter, never launch_ros's."""
    for path in (LAUNCH_FILE, REPO / 'launch' / 'sim.launch.py'):  # one node description
        assert 'policy_node(config, plan, namespace)' in path.read_text(), path
    tree = ast.parse(LAUNCH_ACTIONS.read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'LifecycleNode'
    ]
    assert len(calls) == 1
    keywords = {keyword.arg for keyword in calls[0].keywords}
    assert {'name', 'namespace'} <= keywords  # both required by launch_ros
    assert 'autostart' not in keywords
    assert plan_launch({}, autostart='false').node_parameters['autostart'] is False
    assert 'autostart' not in plan_launch({}).node_parameters


def _require_launch_ros():
    pytest.importorskip(
        'launch_ros', reason='launch_ros has no PyPI wheel; runs with a ROS 2 install'
    )


def test_launch_description_plans_the_node_and_its_gpus(tmp_path):
    _require_launch_ros()
    from launch.actions import OpaqueFunction
    from launch_ros.actions import LifecycleNode

    from launch import LaunchContext

    spec = importlib.util.spec_from_file_location('dreamzero_launch', LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    context = LaunchContext()
    for entity in description.entities:
        if not isinstance(entity, OpaqueFunction):
            entity.visit(context)
    context.launch_configurations.update(
        {'config': str(CONFIG / 'droid.yaml'), 'checkpoint': str(tmp_path), 'gpus': '2,3',
         'cfg_parallel': '2'}
    )  # fmt: skip
    setup = [e for e in description.entities if isinstance(e, OpaqueFunction)][-1]
    (node,) = setup.execute(context)
    assert isinstance(node, LifecycleNode)  # a managed node to ros2 lifecycle and managers
    env = {
        ''.join(part.perform(context) for part in key): ''.join(
            part.perform(context) for part in value
        )
        for key, value in node.additional_env
    }
    assert env['CUDA_VISIBLE_DEVICES'] == '2'


_RUN_LAUNCH = """
import sys
from launch import LaunchService
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
arguments = [arg.split(':=', 1) for arg in sys.argv[2:]]
service = LaunchService()
service.include_launch_description(IncludeLaunchDescription(
    PythonLaunchDescriptionSource(sys.argv[1]), launch_arguments=arguments))
sys.exit(service.run())
"""


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
def test_launch_starts_the_node_with_its_config_and_arguments(harness, tmp_path):
    """The real launch file, run as ``ros2 launch`` runs it; parameters read back from the node."""
    _require_launch_ros()
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    with _launched(
        tmp_path, f'checkpoint:={checkpoint}', 'dry_run:=true', 'openpi_port:=8765'
    ) as launch_log:
        values = harness.wait_for(
            lambda: _parameters_if_up(harness),
            2 * NODE_START_S * load_factor(),
            'the launched node',
            launch_log,
        )
        assert values['engine.checkpoint'] == str(checkpoint)
        assert values['dry_run'] is True and values['openpi_bridge.port'] == 8765
        assert values['max_age'] == read_params_file(CONFIG / 'cpu_small.yaml')['max_age']


@contextlib.contextmanager
def _launched(tmp_path, *arguments: str) -> Iterator[Callable[[], str]]:
    """The launch file with config/cpu_small.yaml and ``arguments``; yields its log's reader.

    Run as ``ros2 launch`` runs it, stopped as Ctrl-C stops it.
    """
    log_file = tmp_path / 'launch.log'
    log = open(log_file, 'w')  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, '-c', _RUN_LAUNCH, str(LAUNCH_FILE),
         f'config:={CONFIG / "cpu_small.yaml"}', *arguments],
        stdout=log, stderr=subprocess.STDOUT, env=ros_env(),
    )  # fmt: skip
    try:
        yield log_file.read_text
    finally:
        stop_process(process, 30.0)
        log.close()


def _wait_until_up(harness, node) -> None:
    """Wait (as long as the machine's load makes a node's start take) for its parameters."""
    harness.wait_for(
        lambda: any(
            name == f'{NODE}/get_parameters'
            for name, _ in harness.node.get_service_names_and_types()
        ),
        NODE_START_S * load_factor(),
        'the node and its parameter service',
        node.log,
    )


def _parameters_if_up(harness) -> dict | None:
    names = harness.node.get_service_names_and_types()
    if not any(name == f'{NODE}/get_parameters' for name, _ in names):
        return None
    return harness.get_parameters(
        NODE, ['engine.checkpoint', 'dry_run', 'openpi_bridge.port', 'max_age']
    )


def _as_ros_arg(value) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def _assert_same(expected, actual, name):
    expected = list(expected) if isinstance(expected, tuple) else expected
    if isinstance(expected, float) or (
        isinstance(expected, list) and expected and isinstance(expected[0], float)
    ):
        assert all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
            for a, b in zip(
                expected if isinstance(expected, list) else [expected],
                actual if isinstance(actual, list) else [actual],
                strict=True,
            )
        ), (name, expected, actual)
    else:
        assert expected == actual, (name, expected, actual)


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
@pytest.mark.parametrize('config_name', ['droid.yaml', 'cpu_small.yaml'])
def test_config_and_launch_overrides_load_into_the_node(harness, tmp_path, config_name):
    """The node reads the file and the launch's overrides exactly; read back via its services."""
    config = CONFIG / config_name
    plan = plan_launch(
        read_params_file(config),
        checkpoint='/data/ckpt',
        base_checkpoint='/data/base',
        encoder_dir='/data/wan21',
        embodiment_tag='ur5',
        embodiment_file='/data/ur5.yaml',
        prompt_template='A UR5 arm. {instruction}',
        cfg_parallel='1',
        tensor_parallel='2',
        dry_run='true',
        openpi_port='8123',
    )
    overrides = [f'{name}:={_as_ros_arg(value)}' for name, value in plan.node_parameters.items()]
    node = NodeProcess(tmp_path / 'node.log', 'autostart:=false', *overrides, params_file=config)
    try:
        _wait_until_up(harness, node)
        names = [spec.name for spec in PARAMETERS]
        values = harness.get_parameters(NODE, names)
        expected = {spec.name: spec.default for spec in PARAMETERS}
        expected.update(read_params_file(config))
        expected.update(plan.node_parameters)
        expected.update(node.added_parameters)  # the test harness's load-following timeout
        expected['autostart'] = False
        for name in names:
            _assert_same(expected[name], values[name], name)
        assert values['engine.checkpoint'] == '/data/ckpt' and values['dry_run'] is True
        assert values['engine.prompt_template'] == 'A UR5 arm. {instruction}'
        assert values['engine.tensor_parallel'] == 2
    finally:
        node.stop()


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
def test_unknown_parameter_stops_the_node(tmp_path):
    bad = tmp_path / 'typo.yaml'
    bad.write_text((CONFIG / 'cpu_small.yaml').read_text().replace('max_skew:', 'max_skwe:'))
    node = NodeProcess(tmp_path / 'node.log', params_file=bad)
    assert node.wait_exit(NODE_START_S * load_factor()) == 2
    assert "dreamzero_policy: unknown parameters ['max_skwe']" in node.log()
    node.stop()


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
def test_parameters_change_while_unconfigured_with_ranges_enforced(harness, tmp_path):
    node = NodeProcess(
        tmp_path / 'node.log', 'autostart:=false', params_file=CONFIG / 'cpu_small.yaml'
    )
    try:
        _wait_until_up(harness, node)
        assert harness.set_parameter(NODE, 'prompt', 'stack the cups').successful
        assert harness.get_parameters(NODE, ['prompt'])['prompt'] == 'stack the cups'
        assert harness.set_parameter(NODE, 'max_age', 3).successful  # an integer for a double
        assert harness.get_parameters(NODE, ['max_age'])['max_age'] == 3.0
        result = harness.set_parameter(NODE, 'max_age', 1e6)
        assert not result.successful and 'max_age' in result.reason and 'range' in result.reason
        result = harness.set_parameter(NODE, 'engine.dtype', 'int8')
        assert not result.successful and 'must be one of' in result.reason
    finally:
        node.stop()


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
def test_integer_overrides_for_doubles_start_the_node(harness, tmp_path):
    node = NodeProcess(
        tmp_path / 'node.log',
        'autostart:=false',
        'max_age:=1',
        'gripper_range:=[0, 1]',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    try:
        _wait_until_up(harness, node)
        values = harness.get_parameters(NODE, ['max_age', 'gripper_range'])
        assert values['max_age'] == 1.0 and isinstance(values['max_age'], float)
        assert list(values['gripper_range']) == [0.0, 1.0]
    finally:
        assert node.stop() == 0, node.log()[-3000:]


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
def test_out_of_range_override_stops_the_node_naming_the_range(tmp_path):
    node = NodeProcess(
        tmp_path / 'node.log', 'control_rate_hz:=5000.0', params_file=CONFIG / 'cpu_small.yaml'
    )
    assert node.wait_exit(NODE_START_S * load_factor()) == 2
    assert 'control_rate_hz: 5000.0 is outside the range [0.1, 1000.0]' in node.log()
    node.stop()


@pytest.mark.slow  # the node in its own process over DDS: see pytest.ini
def test_launched_lifecycle_node_waits_for_transitions_with_autostart_false(harness, tmp_path):
    """``autostart:=false namespace:=robot1``: unconfigured until a manager brings it up."""
    _require_launch_ros()
    from lifecycle_msgs.msg import TransitionEvent

    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    node = '/robot1/dreamzero_policy'
    harness.record('transitions', TransitionEvent, f'{node}/transition_event')
    with _launched(
        tmp_path,
        f'checkpoint:={checkpoint}',
        'dry_run:=true',
        'autostart:=false',
        'namespace:=robot1',
    ) as launch_log:
        names = lambda: {name for name, _ in harness.node.get_service_names_and_types()}  # noqa: E731
        harness.wait_for(
            lambda: f'{node}/change_state' in names(),
            2 * NODE_START_S * load_factor(),
            'the lifecycle services',
            launch_log,
        )
        assert harness.lifecycle_state(node) == 'unconfigured'
        assert harness.change_state(node, 'configure') and harness.change_state(node, 'activate')
        assert harness.lifecycle_state(node) == 'active'
        harness.wait_for(
            lambda: (
                [m.goal_state.label for m in harness.messages('transitions')][-1:] == ['active']
            ),
            10,
            'the transition events launch_ros listens to',
            launch_log,
        )


def test_every_launched_process_is_given_the_launch_process_id():
    """So that each one ends with ``ros2 launch``, even killed while it was still starting."""

    def node_calls(path) -> list[ast.Call]:
        return [
            node
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
            and getattr(node.func, 'id', '') in ('Node', 'LifecycleNode')
        ]

    for path in (LAUNCH_FILE, REPO / 'launch' / 'sim.launch.py'):
        assert not node_calls(path), path  # every process is started through launch_actions
    calls = node_calls(LAUNCH_ACTIONS)
    assert len(calls) == 2  # the policy node and the package's tools
    for call in calls:
        env = next(k.value for k in call.keywords if k.arg == 'additional_env')
        assert 'launcher_env()' in ast.unparse(env), ast.unparse(env)
