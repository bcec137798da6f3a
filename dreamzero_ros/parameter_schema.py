# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Options declared once as dataclass fields; node parameters and command lines made from them.

A settings class declares each option once, as a field made by :func:`parameter` (default,
description, numeric range, choices, whether it may change at run time). A field whose type is
another such dataclass is a group: its parameters are named ``<group>.<field>``.
:func:`parameter_specs` lists the parameters of a tree (the node declares exactly these, with
descriptors and ranges), :func:`build` checks a flat ``name -> value`` mapping and builds the tree
from it, and :func:`add_arguments` / :func:`argument_values` make command-line options of the same
specs (``engine.fp8_linear`` is ``--fp8-linear``), checked by the same :meth:`ParameterSpec.check`.
Nothing here imports ROS or torch.

Types: ``bool``, ``int``, ``float``, ``str`` and tuples of ``int``, ``float`` or ``str`` (ROS
arrays). An ``int`` is accepted where a ``float`` is declared (``max_age: 1``), never the
reverse. A range applies to a number, or to each element of a number array.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
import enum
import math
import reprlib
import typing
from typing import Any, TypeVar

_META = 'dreamzero_parameter'
T = TypeVar('T')


class Kind(enum.Enum):
    """The ROS parameter type of a field."""

    BOOL = 'bool'
    INTEGER = 'integer'
    DOUBLE = 'double'
    STRING = 'string'
    INTEGER_ARRAY = 'integer array'
    DOUBLE_ARRAY = 'double array'
    STRING_ARRAY = 'string array'

    @property
    def is_array(self) -> bool:
        """True for the array kinds."""
        return self.name.endswith('_ARRAY')

    @property
    def element(self) -> Kind:
        """The kind of one element (the kind itself for scalars)."""
        return Kind[self.name.removesuffix('_ARRAY')]


_SCALAR_KINDS = {bool: Kind.BOOL, int: Kind.INTEGER, float: Kind.DOUBLE, str: Kind.STRING}
_ARRAY_KINDS = {int: Kind.INTEGER_ARRAY, float: Kind.DOUBLE_ARRAY, str: Kind.STRING_ARRAY}


@dataclass(frozen=True)
class ParameterInfo:
    """What :func:`parameter` records on a field."""

    description: str
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()
    runtime: bool = False


def parameter(
    default: Any,
    description: str,
    *,
    range: tuple[float, float] | None = None,
    choices: tuple[str, ...] = (),
    runtime: bool = False,
) -> Any:
    """A dataclass field that is a node parameter.

    Args:
        default: the value when nothing sets it (tuples for arrays).
        description: one or two sentences for ``ros2 param describe`` and the docs.
        range: inclusive ``(low, high)`` of a number, or of each element of a number array.
        choices: the allowed strings, where the value is one of a few.
        runtime: True if the parameter may change while the node is configured; the others are
            read at configure and may change only while the node is unconfigured.

    """
    info = ParameterInfo(description, range, tuple(choices), runtime)
    return field(default=default, metadata={_META: info})


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter of a settings tree, named by its dotted path."""

    name: str
    kind: Kind
    default: Any
    description: str
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()
    runtime: bool = False

    def check(self, value: Any) -> Any:
        """``value`` converted to this parameter's Python type; ValueError naming it if it is not.

        Integers become floats where a double is declared; arrays become tuples.
        """
        if self.kind.is_array:
            if not isinstance(value, Sequence) or isinstance(value, str):
                raise ValueError(
                    f'{self.name}: expected {_a(self.kind.value)}, got {_shown(value)}'
                )
            return tuple(self._check_element(item, index) for index, item in enumerate(value))
        return self._check_element(value, None)

    def _check_element(self, value: Any, index: int | None) -> Any:
        kind = self.kind.element
        where = self.name if index is None else f'{self.name}[{index}]'
        if kind is Kind.DOUBLE and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        python_type = {Kind.BOOL: bool, Kind.INTEGER: int, Kind.DOUBLE: float, Kind.STRING: str}
        expected = python_type[kind]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ValueError(f'{where}: expected {_a(kind.value)}, got {_shown(value)}')
        if self.range is not None:
            low, high = self.range
            if not (low <= value <= high) or (isinstance(value, float) and math.isnan(value)):
                raise ValueError(f'{where}: {_shown(value)} is outside the range [{low}, {high}]')
        if self.choices and value not in self.choices:
            raise ValueError(f'{where}: must be one of {list(self.choices)}, got {_shown(value)}')
        return value


#: How values appear in error messages: cut short, so that a huge value (a parameter file's
#: 200,000 nested values) never becomes a megabyte-long line.
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple = 2, 8, 8
_REPR.maxstring, _REPR.maxother = 80, 80


def _shown(value: Any) -> str:
    return _REPR.repr(value)


def _a(noun: str) -> str:
    return f'{"an" if noun[0] in "aeiou" else "a"} {noun}'


def _kind(annotation: Any) -> Kind | None:
    """The kind of a field annotation; None for a nested settings group."""
    if annotation in _SCALAR_KINDS:
        return _SCALAR_KINDS[annotation]
    if typing.get_origin(annotation) is tuple:
        element, ellipsis = typing.get_args(annotation)
        if ellipsis is Ellipsis and element in _ARRAY_KINDS:
            return _ARRAY_KINDS[element]
    raise TypeError(f'unsupported parameter type {annotation!r}')


def parameter_specs(cls: type, prefix: str = '') -> tuple[ParameterSpec, ...]:
    """Every parameter of the settings tree rooted at ``cls``, in field order."""
    specs: list[ParameterSpec] = []
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        name = f'{prefix}{item.name}'
        annotation = hints[item.name]
        if is_dataclass(annotation):
            specs.extend(parameter_specs(annotation, f'{name}.'))
            continue
        info: ParameterInfo | None = item.metadata.get(_META)
        if info is None or item.default is MISSING:
            raise TypeError(f'{cls.__name__}.{item.name} is not declared with parameter()')
        specs.append(
            ParameterSpec(
                name,
                _kind(annotation),
                item.default,
                info.description,
                info.range,
                info.choices,
                info.runtime,
            )
        )
    return tuple(specs)


def parameters_help(specs: Iterable[ParameterSpec]) -> str:
    """The listing of ``specs`` in a ROS tool's ``--help``: name, default, range, choices, text."""
    lines = ['parameters (set with --ros-args -p name:=value or --params-file file.yaml):']
    for spec in specs:
        extra = f'; in [{spec.range[0]}, {spec.range[1]}]' if spec.range else ''
        if spec.choices:
            extra += f'; one of {", ".join(spec.choices)}'
        lines.append(f'  {spec.name} (default {spec.default!r}{extra}): {spec.description}')
    return '\n'.join(lines)


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """The settings tree of ``cls`` from flat dotted ``values`` (defaults for missing names).

    Raises:
        ValueError: a value of the wrong type, out of range or not one of the choices, naming the
            parameter; or whatever the classes' own checks raise.

    """
    checked = {
        spec.name: spec.check(values[spec.name])
        for spec in parameter_specs(cls)
        if spec.name in values
    }
    return _construct(cls, checked, '')


def _construct(cls: type[T], checked: Mapping[str, Any], prefix: str) -> T:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for item in fields(cls):
        name = f'{prefix}{item.name}'
        if is_dataclass(hints[item.name]):
            kwargs[item.name] = _construct(hints[item.name], checked, f'{name}.')
        elif name in checked:
            kwargs[item.name] = checked[name]
    return cls(**kwargs)


def flag(spec: ParameterSpec) -> str:
    """The command-line option of a parameter: its last name part, ``--`` and dashes."""
    return '--' + spec.name.rpartition('.')[2].replace('_', '-')


def dest(spec: ParameterSpec) -> str:
    """The ``argparse`` attribute of :func:`flag`."""
    return spec.name.rpartition('.')[2]


def _argument_type(spec: ParameterSpec) -> Any:
    python_type = {Kind.INTEGER: int, Kind.DOUBLE: float, Kind.STRING: str}[spec.kind]

    def convert(text: str) -> Any:
        try:
            return spec.check(python_type(text))
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).partition(': ')[2] or str(error)) from error

    convert.__name__ = python_type.__name__  # argparse names it in "invalid int value"
    return convert


def _help(spec: ParameterSpec) -> str:
    text = spec.description.rstrip('.')
    if spec.range is not None:
        text += f'; {spec.range[0]:g} to {spec.range[1]:g}'
    if spec.kind is Kind.BOOL:
        return f'{text} (default: {"on" if spec.default else "off"})'
    shown = 'empty' if spec.default == '' else repr(spec.default)
    return f'{text} (default: {shown})'


def add_arguments(parser: argparse.ArgumentParser | Any, specs: Iterable[ParameterSpec]) -> None:
    """Add one option per spec to ``parser`` (or an argument group): flag, type, choices, default.

    Booleans become ``--name`` / ``--no-name``; numbers and choices are checked as the
    parameter checks them; the help states the default, the choices and the range.

    Raises:
        TypeError: an array parameter (no command-line form).

    """
    for spec in specs:
        if spec.kind.is_array:
            raise TypeError(f'{spec.name}: arrays have no command-line option')
        if spec.kind is Kind.BOOL:
            parser.add_argument(
                flag(spec),
                dest=dest(spec),
                action=argparse.BooleanOptionalAction,
                default=spec.default,
                help=_help(spec),
            )
            continue
        parser.add_argument(
            flag(spec),
            dest=dest(spec),
            type=_argument_type(spec),
            choices=spec.choices or None,
            default=spec.default,
            metavar=None if spec.choices else dest(spec).upper(),
            help=_help(spec),
        )


def argument_values(args: argparse.Namespace, specs: Iterable[ParameterSpec]) -> dict[str, Any]:
    """``name -> value`` of the options :func:`add_arguments` added for ``specs``."""
    return {spec.name: getattr(args, dest(spec)) for spec in specs}
