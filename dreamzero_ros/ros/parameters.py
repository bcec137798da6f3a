# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's ROS parameters, generated from the settings tree's :class:`ParameterSpec` list.

Descriptors carry the type, the description, the range (``FloatingPointRange`` or
``IntegerRange``; for arrays the range of each element, also named in
``additional_constraints``) and the choices. Integers are accepted where a double is declared,
in parameter files and overrides (:func:`coerce_overrides`) and at run time
(:func:`coerce_parameters`, a pre-set callback), as a YAML ``max_age: 1`` means 1.0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
import difflib

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node
from rclpy.parameter import Parameter

from dreamzero_ros.core.config.node_config import BUILTIN_PARAMETERS
from dreamzero_ros.parameter_schema import Kind, ParameterSpec

_TYPES = {
    Kind.BOOL: Parameter.Type.BOOL,
    Kind.INTEGER: Parameter.Type.INTEGER,
    Kind.DOUBLE: Parameter.Type.DOUBLE,
    Kind.STRING: Parameter.Type.STRING,
    Kind.INTEGER_ARRAY: Parameter.Type.INTEGER_ARRAY,
    Kind.DOUBLE_ARRAY: Parameter.Type.DOUBLE_ARRAY,
    Kind.STRING_ARRAY: Parameter.Type.STRING_ARRAY,
}
#: Parameter type given -> the declared double type it is accepted for.
_WIDENED = {
    (Parameter.Type.INTEGER, Parameter.Type.DOUBLE),
    (Parameter.Type.INTEGER_ARRAY, Parameter.Type.DOUBLE_ARRAY),
}


def ros_type(spec: ParameterSpec) -> Parameter.Type:
    """The declared ROS type of a parameter."""
    return _TYPES[spec.kind]


def descriptor(spec: ParameterSpec) -> ParameterDescriptor:
    """The parameter's descriptor: type, description, range, choices, when it may change."""
    constraints = []
    if spec.choices:
        constraints.append(f'One of: {", ".join(spec.choices)}.')
    if spec.range is not None and spec.kind.is_array:
        constraints.append(f'Each element in [{spec.range[0]}, {spec.range[1]}].')
    constraints.append(
        'Settable at run time.'
        if spec.runtime
        else 'Read at configure; settable while the node is unconfigured.'
    )
    result = ParameterDescriptor(
        name=spec.name,
        type=ros_type(spec).value,
        description=spec.description,
        additional_constraints=' '.join(constraints),
    )
    if spec.range is not None:
        low, high = spec.range
        if spec.kind.element is Kind.INTEGER:
            result.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=0)]
        else:
            result.floating_point_range = [
                FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
            ]
    return result


def default_value(spec: ParameterSpec) -> object:
    """The default as rclpy declares it (lists for arrays)."""
    return list(spec.default) if spec.kind.is_array else spec.default


def declare(node: Node, spec: ParameterSpec) -> None:
    """Declare ``spec`` on ``node`` with its descriptor and default.

    An empty array is declared by its type, then set: rclpy would infer a byte array from
    ``[]``, and then refuse any value of the declared type.
    """
    default = default_value(spec)
    if default != []:
        node.declare_parameter(spec.name, default, descriptor(spec))
        return
    declared = node.declare_parameter(spec.name, ros_type(spec), descriptor(spec))
    if declared.type_ is Parameter.Type.NOT_SET:  # no override given
        node.set_parameters([Parameter(spec.name, ros_type(spec), [])])


def widen(parameter: Parameter, spec: ParameterSpec) -> Parameter:
    """An integer (array) given for a double (array) as that double (array); others unchanged."""
    declared = ros_type(spec)
    if (parameter.type_, declared) not in _WIDENED:
        return parameter
    value = parameter.value
    widened = [float(v) for v in value] if declared.name.endswith('ARRAY') else float(value)
    return Parameter(parameter.name, declared, widened)


def coerce_overrides(
    overrides: Mapping[str, Parameter], specs: Mapping[str, ParameterSpec]
) -> dict[str, Parameter]:
    """Parameter-file and ``-p`` overrides with integers widened; checked against the specs.

    Raises:
        ValueError: a value of the wrong type, out of range or not one of the choices, naming
            the parameter and what it accepts.

    """
    result = dict(overrides)
    for name, parameter in overrides.items():
        spec = specs.get(name)
        if spec is None:
            continue
        result[name] = widen(parameter, spec)
        spec.check(result[name].value)
    return result


def coerce_parameters(
    parameters: Iterable[Parameter], specs: Mapping[str, ParameterSpec]
) -> list[Parameter]:
    """Pre-set callback body: integers given for doubles become doubles."""
    return [
        widen(parameter, specs[parameter.name]) if parameter.name in specs else parameter
        for parameter in parameters
    ]


def declare_parameters(
    node: Node,
    specs: Sequence[ParameterSpec],
    explain_unknown: Callable[[list[str]], str] | None = None,
) -> dict[str, ParameterSpec]:
    """Declare ``specs`` on ``node`` with their descriptors, as its parameter files set them.

    Parameter-file and ``-p`` values of undeclared names are refused
    (:func:`refuse_unknown_overrides`), integers given for doubles widened and every value
    checked (:func:`coerce_overrides`) before anything is declared. Returns ``name -> spec``.

    Raises:
        ValueError: an unknown parameter (``explain_unknown(names)`` says so, by default each
            with the declared name closest to it), or a value of the wrong type, out of range or
            not one of the choices.

    """
    by_name = {spec.name: spec for spec in specs}
    refuse_unknown_overrides(node, by_name, explain_unknown)
    overrides = node._parameter_overrides  # noqa: SLF001 - rclpy keeps them only here
    node._parameter_overrides = coerce_overrides(overrides, by_name)  # noqa: SLF001
    for spec in specs:
        declare(node, spec)
    return by_name


def refuse_unknown_overrides(
    node: Node,
    declared: Iterable[str],
    explain: Callable[[list[str]], str] | None = None,
) -> None:
    """Refuse parameter-file and ``-p`` values of parameters that ``node`` does not declare.

    rclpy keeps them in the node's overrides and ignores them, so that a misspelt name
    (``gripper.interfce``) would silently leave its parameter at the default. The parameters
    rclpy declares itself (``use_sim_time``, ...) and ``qos_overrides.*`` are known.

    Raises:
        ValueError: ``explain(unknown names)``, by default naming each unknown parameter with
            the declared name closest to it.

    """
    names = set(declared) | BUILTIN_PARAMETERS
    unknown = sorted(
        name
        for name in node._parameter_overrides  # noqa: SLF001 - rclpy keeps them only here
        if name not in names and not name.startswith('qos_overrides.')
    )
    if not unknown:
        return
    if explain is not None:
        raise ValueError(explain(unknown))
    hints = [
        f'{name}: did you mean {close[0]}?'
        for name in unknown
        if (close := difflib.get_close_matches(name, sorted(names), n=1))
    ]
    hint = f' ({"; ".join(hints)})' if hints else ''
    raise ValueError(f'unknown parameters {unknown}{hint}')
