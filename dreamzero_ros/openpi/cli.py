# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-openpi-server``: serve DreamZero over the OpenPI protocol, without ROS.

Loads a checkpoint folder (the released layout) or builds random weights of a preset
architecture, then serves it until SIGINT/SIGTERM. The API key may come from the environment
(``DREAMZERO_OPENPI_API_KEY``) so that it does not show in the process list.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import logging
import os
from pathlib import Path

from dreamzero_ros.engine.loader import (
    RANDOM_PRESETS,
    add_engine_arguments,
    engine_arguments,
    load_engine,
)
from dreamzero_ros.openpi.server import REPLY_FORMATS, OpenPIServer, ServerConfig

API_KEY_ENV = 'DREAMZERO_OPENPI_API_KEY'


def _aspect(text: str) -> float:
    """``16:9`` or ``1.777`` -> width / height."""
    try:
        if ':' in text:
            width, height = text.split(':', 1)
            return float(width) / float(height)
        return float(text)
    except (ValueError, ZeroDivisionError) as error:
        raise argparse.ArgumentTypeError(f'not an aspect ratio: {text!r}') from error


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of the standalone server."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-openpi-server',
        description='Serve DreamZero to openpi-client / RoboArena clients over WebSocket.',
    )
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument('checkpoint', nargs='?', type=Path, help='checkpoint folder to load')
    model.add_argument(
        '--preset',
        choices=RANDOM_PRESETS,
        help='serve random weights of a small architecture instead',
    )
    add_engine_arguments(parser)
    parser.add_argument('--host', default='127.0.0.1', help='interface to bind (0.0.0.0: all)')
    parser.add_argument('--port', type=int, default=8000, help='TCP port (0: any free port)')
    parser.add_argument(
        '--api-key',
        default=os.environ.get(API_KEY_ENV),
        help=f'require "Authorization: Api-Key KEY" (default: ${API_KEY_ENV}, else none)',
    )
    parser.add_argument(
        '--max-payload-mb', type=float, default=16.0, help='largest request, MiB (default 16)'
    )
    parser.add_argument(
        '--idle-timeout',
        type=float,
        default=600.0,
        help='close connections idle this many seconds; 0 never (default 600)',
    )
    parser.add_argument(
        '--max-connections', type=int, default=8, help='concurrent connections (default 8)'
    )
    parser.add_argument(
        '--metadata-extras',
        action='store_true',
        help='send extra metadata (horizon, rate); RoboArena clients reject unknown keys',
    )
    parser.add_argument(
        '--reply-format',
        choices=REPLY_FORMATS,
        default='auto',
        help='dict (openpi), array (RoboArena) or auto: by the request key set (default)',
    )
    parser.add_argument(
        '--camera-aspect',
        type=_aspect,
        default=None,
        help="clients' camera aspect, e.g. 16:9, to undo resize_with_pad exactly "
        '(default: detect the black bands)',
    )
    parser.add_argument(
        '--no-fill-missing-exterior',
        dest='fill_missing_exterior',
        action='store_false',
        help='refuse requests with a single exterior camera instead of blacking out the other',
    )
    parser.add_argument('--log-level', default='INFO', help='logging level (default INFO)')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-openpi-server``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format='%(asctime)s %(levelname)s %(name)s: %(message)s'
    )
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key or None,
        max_payload_bytes=int(args.max_payload_mb * 2**20),
        idle_timeout_s=args.idle_timeout or None,
        max_connections=args.max_connections,
        metadata_extras=args.metadata_extras,
        reply_format=args.reply_format,
        camera_aspect=args.camera_aspect,
        fill_missing_exterior=args.fill_missing_exterior,
    )
    policy = load_engine(args.checkpoint, preset=args.preset, **engine_arguments(args))
    server = OpenPIServer(policy, config)
    logging.getLogger(__name__).info('serving metadata %s', server.metadata)
    server.serve_forever()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
