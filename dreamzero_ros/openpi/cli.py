# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-openpi-server``: serve DreamZero over the OpenPI protocol, without ROS.

Loads a checkpoint folder (the released layout) or builds random weights of a preset
architecture, then serves it until SIGINT/SIGTERM. The API key comes from the environment
(``DREAMZERO_OPENPI_API_KEY``) or a file (``--api-key-file``), never from the command line,
which every user of the machine can read in the process list.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import errno
import logging
import os
from pathlib import Path
import socket

from dreamzero_ros.cli_options import add_api_key_file, add_policy_source, new_parser
from dreamzero_ros.console import add_debug_option, run_tool
from dreamzero_ros.core.policy.api_keys import BRIDGE_API_KEY_ENV
from dreamzero_ros.engine.loader import RANDOM_PRESETS, add_engine_arguments
from dreamzero_ros.engine.workers.launch import load_from_arguments
from dreamzero_ros.openpi import session_budget
from dreamzero_ros.openpi.server import OpenPIServer
from dreamzero_ros.openpi.server_config import REPLY_FORMATS, ServerConfig

API_KEY_ENV = BRIDGE_API_KEY_ENV
LOG_LEVELS = ('DEBUG', 'INFO', 'WARNING', 'ERROR')


def _aspect(text: str) -> float | str:
    """``16:9`` or ``1.777`` -> width / height; ``detect`` as is."""
    if text == 'detect':
        return text
    try:
        if ':' in text:
            width, height = text.split(':', 1)
            return float(width) / float(height)
        return float(text)
    except (ValueError, ZeroDivisionError) as error:
        raise argparse.ArgumentTypeError(f'not an aspect ratio: {text!r}') from error


def read_api_key(path: Path | None) -> str | None:
    """The API key: the first line of ``path`` if given, else ``$DREAMZERO_OPENPI_API_KEY``.

    Raises:
        ValueError: the file cannot be read or holds no key.

    """
    if path is None:
        return os.environ.get(API_KEY_ENV) or None
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise ValueError(f'cannot read the API key file {path}: {error.strerror}') from error
    if not lines or not lines[0].strip():
        raise ValueError(f'the API key file {path} is empty')
    return lines[0].strip()


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of the standalone server."""
    parser = new_parser(
        'dreamzero-openpi-server',
        'Serve DreamZero to openpi-client / RoboArena clients over WebSocket.',
    )
    add_policy_source(parser, RANDOM_PRESETS, remote=False)
    add_engine_arguments(parser)
    parser.add_argument('--host', default='127.0.0.1', help='interface to bind (0.0.0.0: all)')
    parser.add_argument('--port', type=int, default=8000, help='TCP port (0: any free port)')
    add_api_key_file(parser, 'clients must send ("Authorization: Api-Key KEY")', API_KEY_ENV)
    _add_limits(parser.add_argument_group('limits (docs/openpi_bridge.md)'))
    parser.add_argument(
        '--metadata-extras',
        action='store_true',
        help='send extra metadata (horizon, rate); RoboArena clients reject unknown keys',
    )
    parser.add_argument(
        '--reply-format',
        choices=REPLY_FORMATS,
        default='auto',
        help="auto: by client - bare (H, 8) arrays on the seed integration's route "
        "and for RoboArena-keyed requests (exterior_image_0_left: DreamZero's own clients), "
        "{'actions': ...} maps for DROID-keyed ones (openpi-client, sim-evals, the DROID loop, "
        "RoboArena's evaluator); dict: maps for all (RoboArena's self-test); array: arrays",
    )
    parser.add_argument(
        '--camera-aspect',
        type=_aspect,
        default=None,
        metavar='W:H',
        help="clients' camera aspect, e.g. 16:9, where resize_with_pad's black bands are "
        "(default: the checkpoint's, DROID's 16:9); 'detect' tries the common camera aspects "
        'and crops the widest bands of exact zeros where resize_with_pad puts them',
    )
    parser.add_argument(
        '--no-fill-missing-exterior',
        dest='fill_missing_exterior',
        action='store_false',
        help='refuse requests with a single exterior camera instead of blacking out the other',
    )
    parser.add_argument(
        '--log-level', type=str.upper, choices=LOG_LEVELS, default='INFO', help='logging level'
    )
    add_debug_option(parser)
    return parser


def _add_limits(group: argparse._ArgumentGroup) -> None:
    defaults = ServerConfig()
    group.add_argument(
        '--max-payload-mb',
        type=float,
        default=defaults.max_payload_bytes / 2**20,
        help='largest request, MiB',
    )
    for flag, help_text in (
        ('--max-objects', 'msgpack objects in one request'),
        ('--max-depth', 'nesting of maps and arrays in one request'),
        ('--max-prompt-chars', 'longest prompt'),
        ('--max-error-chars', 'longest error message sent or logged'),
        ('--max-connections', 'open connections in all'),
        ('--max-connections-per-client', 'open connections per client IP address'),
        ('--max-sessions-per-connection', 'a new session beyond ends the oldest of the connection'),
    ):
        name = flag[2:].replace('-', '_')
        group.add_argument(
            flag,
            type=int,
            default=getattr(defaults, name),
            help=help_text,
        )
    group.add_argument(
        '--max-sessions',
        type=int,
        default=None,
        help='sessions (model state) held at once (default: what fits in the GPU memory left '
        f'after loading, at most {session_budget.MAX_DEFAULT_SESSIONS}; '
        f'{session_budget.MAX_DEFAULT_SESSIONS} on the CPU)',
    )
    group.add_argument(
        '--max-sessions-per-client',
        type=int,
        default=None,
        help='sessions per client IP address (default: --max-sessions)',
    )
    group.add_argument(
        '--idle-evict-after',
        type=float,
        default=defaults.idle_evict_after_s,
        help='seconds without a request after which a connection may be closed to make room '
        'for a new client; never otherwise',
    )


def check_port_free(host: str, port: int) -> None:
    """Refuse a port another process listens on, before the (slow) model load.

    Raises:
        OSError: the address is in use or cannot be bound; the message says what to do.

    """
    if port == 0:
        return
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            why = 'in use' if error.errno == errno.EADDRINUSE else error.strerror
            raise OSError(
                error.errno,
                f'cannot listen on {host}:{port} ({why}): stop the other server or choose '
                'another --port (0: any free port)',
            ) from error


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-openpi-server``."""
    return run_tool('dreamzero-openpi-server', _serve, argv)


def _serve(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format='%(asctime)s %(levelname)s %(name)s: %(message)s'
    )
    try:
        config = ServerConfig(
            host=args.host,
            port=args.port,
            api_key=read_api_key(args.api_key_file),
            max_payload_bytes=int(args.max_payload_mb * 2**20),
            max_objects=args.max_objects,
            max_depth=args.max_depth,
            max_prompt_chars=args.max_prompt_chars,
            max_error_chars=args.max_error_chars,
            max_connections=args.max_connections,
            max_connections_per_client=args.max_connections_per_client,
            max_sessions=args.max_sessions,
            max_sessions_per_client=args.max_sessions_per_client,
            max_sessions_per_connection=args.max_sessions_per_connection,
            idle_evict_after_s=args.idle_evict_after,
            metadata_extras=args.metadata_extras,
            random_weights=args.preset is not None,
            reply_format=args.reply_format,
            camera_aspect=None if args.camera_aspect == 'detect' else args.camera_aspect,
            detect_padding=args.camera_aspect == 'detect',
            fill_missing_exterior=args.fill_missing_exterior,
        )
    except ValueError as error:
        parser.error(str(error))
    check_port_free(args.host, args.port)
    logging.getLogger(__name__).info('loading the model (%s)', args.checkpoint or args.preset)
    # The engine's session store must hold every session the server admits.
    max_sessions = args.max_sessions or session_budget.MAX_DEFAULT_SESSIONS
    logger = logging.getLogger(__name__)
    try:
        policy, end_workers = load_from_arguments(args, logger.info, max_sessions=max_sessions)
    except ValueError as error:  # ranks without their devices, a bad preset
        parser.error(str(error))
    try:
        server = OpenPIServer(policy, config)
        logger.info('serving metadata %s', server.metadata)
        server.serve_forever()
    finally:
        if end_workers is not None:
            end_workers()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
