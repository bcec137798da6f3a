# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The package's layers: subpackages import each other one way only; light imports stay light.

The import graph is read from the source (every ``import`` and ``from ... import``, lazy ones
inside functions included).  Its nodes are the subpackages and the top-level modules of
``dreamzero_ros``.  The allowed direction, lowest layer first:

* ``errors``, ``policy_types``, ``console``: shared types, errors and printing;
* ``engine``: the model and its options (knows no node, no bridge);
* ``core``: the ROS-free node (may load the engine; knows no OpenPI bridge: the node hands it
  the remote client);
* ``openpi``: the OpenPI bridge (serves and uses policies built by ``core`` and ``engine``);
* ``replay``, ``ros``, ``demo``: tools and the node on top.

A cycle between any two nodes fails, naming the imports that close it.

One level down, ``engine``'s folders and top-level modules are layers too, as Wan2.1's
``wan/modules`` networks import nothing above them and ``wan/distributed`` acts on them from
outside (:data:`ENGINE_LAYERS`, lowest first): a node imports only nodes of lower layers.
``core``'s sub-packages are layers the same way (:data:`CORE_LAYERS`): the robot and what the node
observes at the bottom, the motion over the robot, the control loop over both, the node's
parameters over the loop, the policy built from them on top.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
import subprocess
import sys

import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.policy.api_keys import REMOTE_API_KEY_ENV
from dreamzero_ros.core.policy.policy_factory import create_policy

PACKAGE = Path(__file__).resolve().parents[1] / 'dreamzero_ros'
GENERATED = {'msg', 'action'}  # rosidl's modules, which import no hand-written code

#: Layers that must not import the ones after them (a subset of the graph's order, checked too).
LAYERS = ('errors', 'engine', 'core', 'openpi', 'ros')

#: ``engine``'s layers, lowest first; a node imports only nodes of the layers before its own.
ENGINE_LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer)
    for layer in (
        ('option_names',),  # the names a user picks options by
        ('options',),  # every option a user sets, declared once; free of torch
        ('networks', 'embodiment', 'step_cache'),  # the networks; the robot; the step schedule
        ('config',),  # shapes, sampling and the options, together
        ('speed', 'parallel'),  # act on the networks from outside
        ('memory',),  # builds them where they run (sharded, FP8), estimates the need
        ('checkpoint',),  # reads weights into them (shards, FP8 layers), writes test checkpoints
        ('pipeline',),  # the engine: inputs, denoising, sessions
        ('loader',),  # the one way tools load an engine
        ('workers',),  # the worker ranks of a multi-process engine
        ('__init__',),  # the package's lazy names
    )
)

#: ``core``'s layers, lowest first; a node imports only nodes of the layers before its own.
CORE_LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer)
    for layer in (
        ('str_enum',),  # Python 3.11's StrEnum for 3.10
        ('robot', 'observations'),  # the robot's description and groups; images and messages
        ('motion',),  # splines, time scaling, hand-over, braking, the envelope
        ('control',),  # the control loop and what checks or reports it
        ('config', 'processes'),  # the node's parameters; preflight and process lifetimes
        ('policy',),  # the policy built from the parameters
        ('__init__',),
    )
)


def _node(module: str, package: str = 'dreamzero_ros') -> str | None:
    """The graph node of ``<package>.x.y``: ``x`` (a subpackage or a top-level module)."""
    prefix = package.split('.')
    parts = module.split('.')
    if parts[: len(prefix)] != prefix or len(parts) <= len(prefix):
        return None
    return parts[len(prefix)]


def import_graph(package: str = 'dreamzero_ros') -> dict[str, dict[str, list[str]]]:
    """``{node: {imported node: ['file:line', ...]}}`` between the nodes of ``package``.

    The nodes are its subpackages and top-level modules (``__init__`` for its own).
    """
    root = PACKAGE.parent.joinpath(*package.split('.'))
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(root.rglob('*.py')):
        relative = path.relative_to(root)
        node = relative.parts[0].removesuffix('.py')
        if node in GENERATED:
            continue
        for statement in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(statement, ast.Import):
                modules = [alias.name for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom) and statement.level == 0:
                base = statement.module or ''
                modules = [base] + [f'{base}.{alias.name}' for alias in statement.names]
                if base == package:  # from <package> import x: x is the node
                    modules = modules[1:]
            else:
                continue
            for target in {_node(module, package) for module in modules} - {None, node}:
                graph[node][target].append(
                    f'{root.relative_to(PACKAGE.parent)}/{relative}:{statement.lineno}'
                )
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None (depth-first search)."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 'open'
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 'open':
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = 'done'
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_search_finds_a_cycle_and_names_it():
    graph = {'a': {'b': ['x']}, 'b': {'c': ['y']}, 'c': {'a': ['z']}, 'd': {'a': ['w']}}
    assert find_cycle(graph) == ['a', 'b', 'c', 'a']
    del graph['c']['a']
    assert find_cycle(graph) is None


def test_subpackages_import_each_other_in_one_direction():
    graph = import_graph()
    assert {'core', 'engine', 'openpi', 'replay', 'ros'} <= set(graph)
    cycle = find_cycle(graph)
    if cycle:
        closing = [
            f'{a} -> {b}: {", ".join(graph[a][b][:3])}'
            for a, b in zip(cycle, cycle[1:], strict=False)
        ]
        pytest.fail('import cycle ' + ' -> '.join(cycle) + '\n' + '\n'.join(closing))


def layer_violations(
    graph: dict[str, dict[str, list[str]]], layers: tuple[frozenset[str], ...]
) -> list[str]:
    """Every import of ``graph`` from a node to one of its own layer or above, named."""
    layer_of = {node: index for index, layer in enumerate(layers) for node in layer}
    unplaced = sorted(set(graph) - set(layer_of))
    found = [f'{node} is in no layer' for node in unplaced]
    for node, targets in sorted(graph.items()):
        for target, where in sorted(targets.items()):
            if node in layer_of and layer_of.get(target, len(layers)) >= layer_of[node]:
                found.append(f'{node} imports {target}: {", ".join(where[:3])}')
    return found


def test_layer_check_names_every_import_against_the_order():
    layers = (frozenset({'low'}), frozenset({'mid', 'side'}), frozenset({'top'}))
    graph = {'top': {'mid': ['t:1']}, 'mid': {'low': ['m:1']}}
    assert layer_violations(graph, layers) == []
    graph['low'] = {'top': ['l:3']}
    graph['mid']['side'] = ['m:2']
    graph['new'] = {}
    assert layer_violations(graph, layers) == [
        'new is in no layer',
        'low imports top: l:3',
        'mid imports side: m:2',
    ]


def test_engine_folders_import_only_the_layers_below_them():
    graph = import_graph('dreamzero_ros.engine')
    assert {'networks', 'speed', 'parallel', 'memory', 'checkpoint', 'pipeline'} <= set(graph)
    violations = layer_violations(graph, ENGINE_LAYERS)
    assert not violations, '\n'.join(violations)


def test_core_folders_import_only_the_layers_below_them():
    graph = import_graph('dreamzero_ros.core')
    assert {'observations', 'motion', 'control', 'config', 'processes', 'policy'} <= set(graph)
    placed = set().union(*CORE_LAYERS)
    for path in (PACKAGE / 'core').iterdir():
        if path.suffix == '.py' or (path / '__init__.py').exists():
            assert path.name.removesuffix('.py') in placed, f'core/{path.name} is in no layer'
    violations = layer_violations(graph, CORE_LAYERS)
    assert not violations, '\n'.join(violations)


def test_lower_layers_do_not_import_higher_ones():
    graph = import_graph()
    for low, layer in enumerate(LAYERS):
        for higher in LAYERS[low + 1 :]:
            assert higher not in graph.get(layer, {}), (
                f'{layer} imports {higher}: {graph[layer][higher]}'
            )


_LIGHT = """
import importlib, sys
importlib.import_module(sys.argv[1])
print(' '.join(name for name in ('triton', 'torch') if name in sys.modules))
"""


def _heavy_modules_after_importing(module: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, '-c', _LIGHT, module], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


@pytest.mark.parametrize(
    'module',
    [
        'dreamzero_ros.engine.networks.dit',
        'dreamzero_ros.engine.config',
        'dreamzero_ros.engine.speed.acceleration',
    ],
)
def test_reference_model_and_its_configuration_do_not_import_triton(module):
    """Triton (its import alone takes seconds) is imported where a kernel is about to run."""
    assert 'triton' not in _heavy_modules_after_importing(module)


@pytest.mark.parametrize(
    'module',
    [
        'dreamzero_ros.core.config.node_config',
        'dreamzero_ros.engine.loader',
        'dreamzero_ros.engine.workers.launch',  # the tools' and the node's import of the ranks
    ],
)
def test_node_configuration_imports_neither_torch_nor_triton(module):
    assert _heavy_modules_after_importing(module) == set()


def test_remote_backend_connects_with_the_client_the_caller_passes(monkeypatch):
    """``core`` builds the remote policy with the client class the node hands it."""
    monkeypatch.delenv(REMOTE_API_KEY_ENV, raising=False)
    settings = build_settings({'engine.backend': 'remote', 'engine.remote_uri': 'ws://192.0.2.1:9'})
    with pytest.raises(ValueError, match='needs a remote policy client'):
        create_policy(settings, log=lambda text: None)
    made = []
    policy = create_policy(
        settings, log=lambda text: None, remote_client=lambda *args: made.append(args) or args
    )
    assert made == [('ws://192.0.2.1:9', None)] and policy.policy == made[0]
