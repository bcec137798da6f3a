# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A command line's ``--ros-args`` part, checked before a node is made: mistakes in one line.

rcl parses the ``--ros-args`` part (remappings, ``-p name:=value``, ``--params-file FILE``)
and refuses a bad one with a multi-line message that names C source files and, for a parameter
file, often the wrong line. :func:`tool_arguments` gives a console script the rest of its
command line, or a :class:`ValueError` of one line naming the problem: a parameter file's own
YAML error where it has one (read as every configuration file of the package is:
:func:`~dreamzero_ros.engine.checkpoint.data_files.read_yaml`), else rcl's message without its
source locations.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
import re

import rclpy

from dreamzero_ros.engine.checkpoint.data_files import read_yaml

__all__ = ['tool_arguments']

#: rcl's source locations in its messages (``, at /project/src/parse.c:841``).
_SOURCE_LOCATION = re.compile(r',? at [^,\s]+:\d+')


def tool_arguments(argv: Sequence[str]) -> list[str]:
    """``argv`` (without the program name) less its ROS arguments.

    Raises:
        ValueError: rcl refuses the ROS arguments; one line naming why.

    """
    try:
        return rclpy.utilities.remove_ros_args(['prog', *argv])[1:]
    except RuntimeError as error:  # rclpy's RCLInvalidROSArgsError
        raise ValueError(_why(error, argv)) from None


def _why(error: Exception, argv: Sequence[str]) -> str:
    for path in _params_files(argv):
        try:
            read_yaml(Path(path), ValueError)
        except ValueError as problem:
            return f'--params-file: {problem}'
    text = _SOURCE_LOCATION.sub('', str(error))
    return 'invalid --ros-args: ' + ' '.join(text.split())


def _params_files(argv: Sequence[str]) -> list[str]:
    """The ``--params-file`` values of ``argv``'s ROS arguments."""
    return [
        value for option, value in zip(argv, argv[1:], strict=False) if option == '--params-file'
    ]
