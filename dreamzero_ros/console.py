# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""How every console script ends: one line on stderr for a user's mistake or a Ctrl-C.

A tool's ``main(argv) -> int`` runs under :func:`run_tool`. A problem the user can fix (a
folder that is not a checkpoint, a busy port, an unreachable server, a damaged bag) ends in one
line naming it, with the exit code of its kind; ``--debug`` (or ``DREAMZERO_DEBUG=1``) shows
the traceback as well. Anything else is a bug: its traceback is printed as Python would.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
import os
import sys
import traceback

from dreamzero_ros.errors import (
    BagError,
    CapacityError,
    CheckpointError,
    ConfigError,
    DeviceMemoryError,
    DeviceUnavailableError,
    DreamZeroError,
    EmbodimentError,
    MetadataError,
    PolicyError,
)

DEBUG_ENV = 'DREAMZERO_DEBUG'

#: Exit codes by kind of problem (argparse's own is 2 as well: a bad command line).
EXIT_USAGE = 2
EXIT_MODEL = 3
EXIT_CONNECTION = 4
EXIT_RESOURCE = 5
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    'exit codes: 0 done, 1 finished without a result, 2 bad arguments or input, 3 the '
    'checkpoint or model cannot be used, 4 a server or connection failed, 5 a port, device or '
    f'memory is not available, 130 interrupted; --debug or {DEBUG_ENV}=1 shows tracebacks'
)


def add_debug_option(parser: argparse.ArgumentParser) -> None:
    """``--debug`` and the exit codes in ``--help``."""
    parser.add_argument(
        '--debug', action='store_true', help=f'show tracebacks of errors (or {DEBUG_ENV}=1)'
    )
    parser.epilog = EXIT_CODES_HELP if parser.epilog is None else parser.epilog


def exit_code(error: BaseException) -> int | None:
    """The exit code of a problem the user can fix; None for a bug."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(error, (CheckpointError, MetadataError, EmbodimentError)):
        return EXIT_MODEL
    if isinstance(error, (DeviceMemoryError, DeviceUnavailableError, CapacityError)):
        return EXIT_RESOURCE
    if isinstance(error, (ConnectionError, TimeoutError)):
        return EXIT_CONNECTION
    if isinstance(error, PolicyError):
        return EXIT_CONNECTION if 'connect' in str(error) else EXIT_MODEL
    if isinstance(error, (BagError, ConfigError, DreamZeroError, ValueError)):
        return EXIT_USAGE
    if isinstance(error, OSError):
        return EXIT_RESOURCE
    return None


def run_tool(prog: str, main: Callable[[list[str]], int], argv: Sequence[str] | None) -> int:
    """Run ``main(argv)``; a user's problem or a Ctrl-C ends in one line and its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = '--debug' in args or os.environ.get(DEBUG_ENV, '') not in ('', '0')
    try:
        return main(args)
    except (Exception, KeyboardInterrupt) as error:
        code = exit_code(error)
        if code is None:
            raise
        if debug:
            traceback.print_exc()
        if code == EXIT_INTERRUPTED:
            print(f'{prog}: interrupted', file=sys.stderr)
        else:
            print(f'{prog}: error: {one_line(error)}', file=sys.stderr)
        return code


def one_line(error: BaseException) -> str:
    """The error's message on one line (OSError: its strerror and file name)."""
    if isinstance(error, OSError) and error.strerror:
        where = f' ({error.filename})' if error.filename else ''
        text = f'{error.strerror}{where}'
    else:
        text = str(error) or type(error).__name__
    return ' '.join(text.split())
