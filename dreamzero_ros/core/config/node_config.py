# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's parameters as the node, its parameter files and its tools see them.

The node declares exactly :data:`PARAMETERS` (made from
:class:`~dreamzero_ros.core.config.node_parameters.NodeParameters`; see
:mod:`~dreamzero_ros.parameter_schema`), and a parameter file or override naming anything else
is an error (:func:`unknown_parameters`). :func:`read_params_file` reads a ``ros__parameters``
YAML as rcl applies it; :func:`build_settings` turns a ``name -> value`` mapping into the checked
:class:`~dreamzero_ros.core.config.node_settings.NodeSettings`, raising ``ValueError`` naming the
offending parameter. Nothing here imports ROS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.engine.checkpoint.data_files import read_yaml
from dreamzero_ros.parameter_schema import ParameterSpec, build, parameter_specs

#: Default node name (the launch files and the console script use it).
NODE_NAME = 'dreamzero_policy'
#: Every parameter the node declares, in declaration order.
PARAMETERS: tuple[ParameterSpec, ...] = parameter_specs(NodeSettings)

#: Parameters rclpy declares on every node; allowed in parameter files.
BUILTIN_PARAMETERS = frozenset({'use_sim_time', 'start_type_description_service'})

_SPECS = {spec.name: spec for spec in PARAMETERS}


def defaults() -> dict[str, Any]:
    """``name -> default`` of every declared parameter."""
    return {spec.name: spec.default for spec in PARAMETERS}


#: Parameters that are no longer declared -> what replaces them (named in the error).
RETIRED_PARAMETERS = {
    'engine.remote_api_key': 'engine.remote_api_key_file or $DREAMZERO_REMOTE_API_KEY',
    'openpi_bridge.api_key': 'openpi_bridge.api_key_file or $DREAMZERO_OPENPI_API_KEY',
}


def unknown_parameters(names: Iterable[str]) -> list[str]:
    """The names that are neither declared by the node nor built into rclpy, sorted."""
    return sorted(
        name
        for name in names
        if name not in _SPECS
        and name not in BUILTIN_PARAMETERS
        and not name.startswith('qos_overrides.')
    )


def unknown_parameters_message(unknown: list[str]) -> str:
    """``unknown parameters [...]``, with what replaces any retired one."""
    hints = [
        f'; {name} is replaced by {RETIRED_PARAMETERS[name]} (a parameter is readable by any '
        'DDS participant)'
        for name in unknown
        if name in RETIRED_PARAMETERS
    ]
    return f'unknown parameters {unknown}' + ''.join(hints)


def read_params_file(path: str | Path, node_name: str = NODE_NAME) -> dict[str, Any]:
    """Read the parameters a ``ros__parameters`` YAML gives ``node_name`` (``/**`` included).

    Sections apply in file order, as rcl applies them; nested maps flatten to dotted names.

    The file is read with the bounds of every configuration file (size, depth, nodes with
    aliases expanded: :func:`~dreamzero_ros.engine.checkpoint.data_files.read_yaml`).

    Raises:
        ValueError: the file is missing, unreadable, not YAML, beyond those bounds or not a map
            of node sections; it has no section for the node or names unknown parameters.

    """
    document = read_yaml(Path(path), ValueError) or {}
    if not isinstance(document, dict):
        raise ValueError(
            f'{path}: expected a map of node sections ("/**:" with ros__parameters), got a '
            f'{type(document).__name__}'
        )
    values: dict[str, Any] = {}
    matched = False
    for key, section in document.items():
        if key.lstrip('/') not in ('**', node_name) or not isinstance(section, dict):
            continue
        matched = True
        values.update(_flatten(section.get('ros__parameters') or {}))
    if not matched:
        raise ValueError(f'{path}: no "/**:" or "{node_name}:" ros__parameters section')
    unknown = unknown_parameters(values)
    if unknown:
        raise ValueError(f'{path}: {unknown_parameters_message(unknown)}')
    return values


def _flatten(tree: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f'{prefix}{key}'
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f'{name}.'))
        else:
            flat[name] = value
    return flat


def build_settings(values: Mapping[str, Any]) -> NodeSettings:
    """Check a ``name -> value`` parameter mapping (defaults for the rest) and build the settings.

    Raises:
        ValueError: an unknown name, or a bad value, naming the parameter.

    """
    unknown = unknown_parameters(values)
    if unknown:
        raise ValueError(unknown_parameters_message(unknown))
    return build(NodeSettings, values)
