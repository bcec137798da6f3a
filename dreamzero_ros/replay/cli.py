# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Console scripts: ``dreamzero-replay`` (offline evaluation) and ``dreamzero-make-bag``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
import dataclasses
import json
from pathlib import Path
import sys

from dreamzero_ros.core.api_keys import REMOTE_API_KEY_ENV, read_api_key
from dreamzero_ros.core.control_loop import LoopConfig
from dreamzero_ros.core.engine_workers import load_from_arguments
from dreamzero_ros.core.node_config import NodeSettings
from dreamzero_ros.core.robot_description import RobotDescription
from dreamzero_ros.core.robot_layout import RobotLayout
from dreamzero_ros.engine.loader import add_engine_arguments
from dreamzero_ros.errors import BagError
from dreamzero_ros.policy_types import Policy
from dreamzero_ros.replay.bag_io import STORAGES
from dreamzero_ros.replay.bag_maker import FRAME_SOURCES, IMAGE_FORMATS, BagSpec, make_bag
from dreamzero_ros.replay.settings import node_settings, parse_override
from dreamzero_ros.replay.topics import ReplayTopics

DEFAULT_PROMPT = 'pick up the object and put it in the bowl'


def _override(text: str) -> tuple[str, object]:
    try:
        return parse_override(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def add_node_arguments(parser: argparse.ArgumentParser, command_topic: bool = True) -> None:
    """Options giving the node's parameters (topics, joints, pairing thresholds)."""
    group = parser.add_argument_group(
        'node parameters',
        'topics, joint names and observation pairing as the policy node reads them '
        '(default: the node defaults; topics resolve in the root namespace)',
    )
    group.add_argument('--params', type=Path, default=None, help='node parameter YAML file')
    group.add_argument(
        '--param',
        type=_override,
        action='append',
        default=[],
        metavar='NAME=VALUE',
        help='override one node parameter, VALUE in YAML (repeatable), e.g. max_age=1.0',
    )
    if not command_topic:
        return
    group.add_argument(
        '--command-topic',
        default=None,
        help='JointState or JointTrajectory topic of the executed commands (replay: the '
        'reference instead of the joint states; make-bag: also write it)',
    )


def add_allow_partial(parser: argparse.ArgumentParser) -> None:
    """``--allow-partial``: use the intact parts of a damaged bag instead of refusing it."""
    parser.add_argument(
        '--allow-partial',
        action='store_true',
        help='replay the intact parts of a damaged bag (CRC mismatch, truncated file, '
        'undecodable messages) and count what is skipped, instead of exiting with an error',
    )


def settings_from_args(args: argparse.Namespace) -> NodeSettings:
    """Node settings from ``--params`` and ``--param``."""
    return node_settings(args.params, dict(args.param))


def _replay_loop(settings: NodeSettings) -> LoopConfig:
    """The node's loop configuration, with the robot description's limits where it is a file.

    A description the node reads from a topic is not available offline: the typed limits apply.
    """
    description = None
    if settings.robot_description.source == 'file':
        description = RobotDescription.read(
            settings.robot_description.file, settings.robot_description.joint_limits_file or None
        )
    return settings.loop_for(description)[0]


def build_replay_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-replay``."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-replay',
        allow_abbrev=False,  # --api-key must not pass for --api-key-file
        description='Evaluate a DreamZero policy on a recorded rosbag2 (mcap or sqlite3): '
        'per-joint error over the horizon, latency and chunk timing, as JSON and an HTML report.',
    )
    parser.add_argument('bag', type=Path, help='rosbag2 folder (or a single .mcap / .db3 file)')
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument('--checkpoint', type=Path, help='DreamZero checkpoint folder')
    model.add_argument('--preset', help='random weights of a preset architecture (e.g. tiny)')
    model.add_argument('--server', help='remote OpenPI server, ws://HOST:PORT')
    parser.add_argument(
        '--api-key-file',
        type=Path,
        default=None,
        help=f'file holding the API key of the remote server on one line '
        f'(default: ${REMOTE_API_KEY_ENV} if set, else no key); never the key itself, which '
        f'every user of the machine could read in the process list',
    )
    parser.add_argument(
        '--out', type=Path, default=None, help='output folder (default replay_<bag>)'
    )
    parser.add_argument(
        '--prompt',
        default=None,
        help='task instruction (default: the prompt parameter or a demo one)',
    )
    parser.add_argument(
        '--query-period', type=float, default=8 / 15, help='seconds of bag time between queries'
    )
    parser.add_argument('--start', type=float, default=0.0, help='skip seconds at the start')
    parser.add_argument('--duration', type=float, default=None, help='evaluate this many seconds')
    parser.add_argument('--max-chunks', type=int, default=None, help='stop after N chunks')
    parser.add_argument('--video', action='store_true', help='write predicted-vs-real video')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    add_allow_partial(parser)
    parser.add_argument(
        '--image-transport',
        choices=('auto', 'raw', 'compressed'),
        default='auto',
        help='camera images on <topic> (raw) or <topic>/compressed; auto: whichever is in the bag',
    )
    add_engine_arguments(parser)
    add_node_arguments(parser)
    return parser


def load_policy(args: argparse.Namespace) -> tuple[Policy, Callable[[], None] | None]:
    """The policy the model options name, and what ends its worker ranks (if it has any)."""
    if args.server:
        from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy

        key = read_api_key(
            str(args.api_key_file or ''),
            REMOTE_API_KEY_ENV,
            log=_note,
        )
        return RemoteOpenPIPolicy(args.server, key), None
    return load_from_arguments(args, log=_note)


def _note(text: str) -> None:
    print(f'dreamzero-replay: {text}', file=sys.stderr)


def replay_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-replay``."""
    from dreamzero_ros.replay.evaluation import EvaluationConfig, check_bag, evaluate_bag
    from dreamzero_ros.replay.progress import ProgressBar
    from dreamzero_ros.replay.report import write_outputs
    from dreamzero_ros.replay.video import VideoComparison

    parser = build_replay_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
        topics = ReplayTopics.from_settings(settings, args.command_topic, args.image_transport)
        config = EvaluationConfig(
            topics=topics,
            cache=settings.cache,
            prompt=args.prompt or settings.prompt or DEFAULT_PROMPT,
            query_period_s=args.query_period,
            start_offset_s=args.start,
            duration_s=args.duration,
            max_chunks=args.max_chunks,
            request_video=args.video,
            allow_partial=args.allow_partial,
            loop=_replay_loop(settings),
        )
    except (ValueError, OSError) as error:
        parser.error(str(error))
    out = args.out or Path(f'replay_{args.bag.resolve().name}')
    try:
        integrity = check_bag(args.bag, config)  # before the (slow) policy load
    except BagError as error:
        print(f'dreamzero-replay: error: {error}', file=sys.stderr)
        return 2
    try:
        policy, end_workers = load_policy(args)
    except ValueError as error:  # an unreadable API key file, ranks without their devices
        print(f'dreamzero-replay: error: {error}', file=sys.stderr)
        return 2
    try:
        try:
            layout = RobotLayout.from_metadata(policy.metadata)
            settings.check_policy(layout)
        except ValueError as error:
            print(f'dreamzero-replay: error: {error}', file=sys.stderr)
            return 2
        config = dataclasses.replace(config, cache=settings.cache_for(layout), layout=layout)
        progress = None if args.no_progress else ProgressBar('replay')
        video = VideoComparison() if args.video else None
        try:
            evaluation = evaluate_bag(
                args.bag,
                policy,
                config,
                progress=progress,
                on_chunk=video.add_chunk if video else None,
                integrity=integrity,
            )
            if progress is not None:
                progress.close()
            video_path = (
                video.write(args.bag, topics, out / 'prediction.mp4', args.allow_partial)
                if video
                else None
            )
        except BagError as error:
            print(f'dreamzero-replay: error: {error}', file=sys.stderr)
            return 2
        if video is not None and video_path is None:
            print('dreamzero-replay: the policy returned no predicted video', file=sys.stderr)
        written = write_outputs(evaluation, out, video_path.name if video_path else None)
        if video_path is not None:
            written['video'] = video_path
        print(json.dumps(_summary(evaluation.metrics(), written), indent=1))
        if not evaluation.records:
            print('dreamzero-replay: no chunk was produced (see refusals)', file=sys.stderr)
            return 1
        return 0
    finally:
        if end_workers is not None:
            end_workers()


def _summary(metrics: dict, written: dict[str, Path]) -> dict[str, object]:
    summary: dict[str, object] = {
        key: metrics[key] for key in ('chunks', 'queries', 'refusals', 'reference_topic')
    }
    if metrics['chunks']:
        summary['arm_mae_rad'] = metrics['errors']['arm']['mae']
        summary['hold_baseline_arm_mae_rad'] = metrics['hold_baseline_errors']['arm']['mae']
        summary['latency_p50_s'] = metrics['latency_s']['p50']
        summary['latency_p95_s'] = metrics['latency_s']['p95']
    if not metrics['integrity']['complete']:
        summary['skipped_messages'] = metrics['integrity']['skipped_messages']
    summary['outputs'] = {name: str(path) for name, path in written.items()}
    return summary


def build_make_bag_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-make-bag``."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-make-bag',
        description='Write a demo rosbag2 from the DROID clips (synthetic frames where they are '
        'absent) with a Franka joint trajectory.',
    )
    parser.add_argument('out', type=Path, help='new bag folder')
    parser.add_argument('--storage', choices=sorted(STORAGES), default='mcap')
    parser.add_argument('--image-format', choices=IMAGE_FORMATS, default='jpeg')
    parser.add_argument(
        '--frames', type=int, default=None, help='frames per camera (default: the whole clip)'
    )
    parser.add_argument('--source', choices=FRAME_SOURCES, default='auto')
    parser.add_argument('--joint-rate', type=float, default=50.0, help='JointState rate, Hz')
    add_node_arguments(parser)
    return parser


def make_bag_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-make-bag``."""
    parser = build_make_bag_parser()
    args = parser.parse_args(argv)
    try:
        topics = ReplayTopics.from_settings(settings_from_args(args), args.command_topic)
        spec = BagSpec(
            storage=args.storage,
            image_format=args.image_format,
            num_frames=args.frames,
            source=args.source,
            joint_rate_hz=args.joint_rate,
            topics=topics,
        )
        summary = make_bag(args.out, spec)
    except (ValueError, OSError) as error:
        print(f'dreamzero-make-bag: error: {error}', file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1))
    return 0


def _remap(text: str) -> tuple[str, str]:
    source, sep, target = text.partition(':=')
    if not sep or not source or not target:
        raise argparse.ArgumentTypeError(f'expected FROM:=TO, got {text!r}')
    return source, target


def build_live_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-live-replay``."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-live-replay',
        description='Publish a bag onto ROS topics with /clock (run the policy node with '
        "use_sim_time:=true) and record the node's trajectories and action chunks into a new bag.",
    )
    parser.add_argument('bag', type=Path, help='rosbag2 folder to play')
    parser.add_argument('--record', type=Path, default=None, help='new bag of the node outputs')
    parser.add_argument('--storage', choices=sorted(STORAGES), default='mcap')
    parser.add_argument('--rate', type=float, default=1.0, help='playback speed (1: real time)')
    parser.add_argument(
        '--clock-period', type=float, default=0.01, help='simulated seconds between /clock ticks'
    )
    parser.add_argument(
        '--topic', action='append', default=None, help='play only this topic (repeatable)'
    )
    parser.add_argument(
        '--remap', type=_remap, action='append', default=[], metavar='FROM:=TO',
        help='publish bag topic FROM on TO (repeatable)',
    )  # fmt: skip
    parser.add_argument(
        '--wait', type=float, default=10.0, help='seconds to wait for subscribers before playing'
    )
    parser.add_argument(
        '--linger', type=float, default=2.0, help='simulated seconds to keep recording at the end'
    )
    parser.add_argument(
        '--until-chunks', type=int, default=None, help='end the linger once N chunks are recorded'
    )
    parser.add_argument('--node-name', default=None, help='policy node name (for ~ topics)')
    add_allow_partial(parser)
    add_node_arguments(parser, command_topic=False)
    return parser


def live_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-live-replay``."""
    import rclpy

    from dreamzero_ros.core.node_config import NODE_NAME
    from dreamzero_ros.replay.live_replay import (
        LiveReplayConfig,
        node_topic,
        recorded_outputs,
        run,
    )

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_live_parser()
    args = parser.parse_args(rclpy.utilities.remove_ros_args(['prog', *argv])[1:])
    node_name = args.node_name or NODE_NAME
    try:
        settings = settings_from_args(args)
        config = LiveReplayConfig(
            topics=args.topic,
            remap=dict(args.remap),
            record=recorded_outputs(settings, node_name) if args.record else {},
            chunk_topic=node_topic(settings.chunk_topic, node_name),
            preview_topic=node_topic(settings.preview_topic, node_name),
            rate=args.rate,
            clock_period_s=args.clock_period,
            wait_for_subscribers_s=args.wait,
            linger_s=args.linger,
            until_chunks=args.until_chunks,
            allow_partial=args.allow_partial,
        )
    except (ValueError, OSError) as error:
        parser.error(str(error))
    try:
        result = run(args.bag, config, args.record, args.storage, ['prog', *argv])
    except BagError as error:
        print(f'dreamzero-live-replay: error: {error}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('dreamzero-live-replay: interrupted', file=sys.stderr)
        return 130
    print(json.dumps(result.__dict__, indent=1))
    return 0
