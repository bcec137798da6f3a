# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Reading the JSON and YAML files of a checkpoint folder, every failure as the caller's error type.

Files read from a checkpoint or an embodiment file are bounded (:class:`FileLimits`): their
size is checked before they are read, their nesting depth and number of values while they are
parsed, so that a hostile or broken file fails at once with an error naming it instead of
taking the process's memory and minutes (:func:`read_json`, :func:`read_yaml`).
"""

from __future__ import annotations

from dataclasses import dataclass
import json
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    'DEFAULT_LIMITS',
    'FileLimits',
    'check_shape',
    'read_json',
    'read_json_object',
    'read_yaml',
]


@dataclass(frozen=True)
class FileLimits:
    """Bounds of a configuration file: bytes on disk, nesting depth, values (nodes) in all."""

    max_bytes: int = 16 << 20
    max_depth: int = 64
    max_nodes: int = 200_000

    def check_size(self, path: Path, error: type[Exception]) -> None:
        """Raise ``error`` naming ``path`` if the file is larger than :attr:`max_bytes`."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise error(f'missing file {path}') from None
        except OSError as cause:
            raise error(f'{path} is unreadable: {cause}') from cause
        if size > self.max_bytes:
            raise error(
                f'{path} is {size} bytes, more than the {self.max_bytes} bytes a configuration '
                'file may have'
            )


#: The limits of every checkpoint and embodiment file (the largest real one, a checkpoint's
#: metadata.json with the statistics of many embodiments, is well below a megabyte).
DEFAULT_LIMITS = FileLimits()


class _TooManyValuesError(Exception):
    pass


def read_json(path: str | Path, error: type[Exception], limits: FileLimits = DEFAULT_LIMITS) -> Any:
    """Parse the JSON file at ``path``; raise ``error`` naming the file if that fails.

    Invalid UTF-8 or JSON, a file beyond ``limits`` (its size before reading; the number of
    numbers and objects while parsing; depth and values in all once parsed) and an unreadable
    file all become ``error``.
    """
    path = Path(path)
    limits.check_size(path, error)
    try:
        text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError as cause:
        raise error(f'{path} is not valid JSON: {cause}') from cause
    except OSError as cause:
        raise error(f'{path} is unreadable: {cause}') from cause
    count = 0

    def counted(make: Any) -> Any:
        def parse(value: Any) -> Any:
            nonlocal count
            count += 1
            if count > limits.max_nodes:
                raise _TooManyValuesError
            return make(value)

        return parse

    try:
        value = json.loads(
            text,
            parse_int=counted(int),
            parse_float=counted(float),
            object_pairs_hook=counted(dict),
        )
    except _TooManyValuesError:
        raise error(f'{path} holds more than {limits.max_nodes} values') from None
    except json.JSONDecodeError as cause:
        raise error(f'{path} is not valid JSON: {cause}') from cause
    except RecursionError:
        raise error(f'{path} is not valid JSON: nested too deeply to parse') from None
    return check_shape(value, path, error, limits)


def read_json_object(
    path: str | Path, error: type[Exception], missing: str, what: str = 'a JSON object'
) -> dict[str, Any]:
    """The JSON object of the file at ``path`` (:func:`read_json`).

    ``error`` with the message ``missing`` where there is no such file; naming the file and
    ``what`` was expected where it holds something else.
    """
    path = Path(path)
    if not path.is_file():
        raise error(missing)
    content = read_json(path, error)
    if not isinstance(content, dict):
        raise error(f'{path}: expected {what}')
    return content


def check_shape(value: Any, path: Path, error: type[Exception], limits: FileLimits) -> Any:
    """``value`` (parsed from ``path``) if within ``limits``' depth and values; else ``error``."""
    count = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise error(f'{path} holds more than {limits.max_nodes} values')
        if isinstance(item, dict | list):
            if depth > limits.max_depth:
                raise error(f'{path} nests deeper than {limits.max_depth} levels')
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def read_yaml(path: Path, error: type[Exception], limits: FileLimits = DEFAULT_LIMITS) -> Any:
    """Parse the YAML file at ``path`` (safe loader); any failure is ``error`` naming it.

    Bounded by ``limits``: the file's size is checked before it is read, the nesting depth and
    the number of nodes (aliases included) on its parser's events, before anything is built,
    and the values once built with every alias expanded (an alias bomb: 1 KB of nested
    aliases standing for billions of values), as they would be walked. A syntax error is one
    line naming where it is.
    """
    path = Path(path)
    limits.check_size(path, error)
    try:
        text = path.read_text(encoding='utf-8')
    except FileNotFoundError:
        raise error(f'missing file {path}') from None
    except (OSError, UnicodeDecodeError) as cause:
        raise error(f'{path} is unreadable: {cause}') from cause
    try:
        _check_events(text, limits)
        value = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except _BeyondLimitsError as cause:
        raise error(f'{path} {cause}') from None
    except yaml.MarkedYAMLError as cause:
        mark = cause.problem_mark
        where = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark else ''
        what = ' '.join(str(part) for part in (cause.context, cause.problem) if part)
        raise error(f'{path} is not valid YAML: {where}{what}') from cause
    except yaml.YAMLError as cause:
        raise error(f'{path} is not valid YAML: {" ".join(str(cause).split())}') from cause
    except RecursionError:
        raise error(f'{path} is not valid YAML: nested too deeply to parse') from None
    return check_shape(value, path, error, limits)


#: libyaml's safe loader where PyYAML has it (much faster), else PyYAML's own.
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)


class _BeyondLimitsError(Exception):
    pass


def _check_events(text: str, limits: FileLimits) -> None:
    """Count the nodes (aliases included) and depth of ``text``'s YAML events, before building.

    Raises:
        _BeyondLimitsError: past ``limits`` (found at the first event beyond them).

    """
    nodes = depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, _NODE_EVENTS):
            nodes += 1
            if nodes > limits.max_nodes:
                raise _BeyondLimitsError(f'holds more than {limits.max_nodes} nodes')
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.max_depth:
                raise _BeyondLimitsError(f'nests deeper than {limits.max_depth} levels')
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
