# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Console scripts: ``dreamzero-replay`` (offline evaluation) and ``dreamzero-make-bag``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
import contextlib
import dataclasses
import importlib.metadata
import json
from pathlib import Path
import shutil
import sys

from dreamzero_ros.cli_options import (
    add_api_key_file,
    add_image_transport,
    add_node_name,
    add_node_parameter_options,
    add_output,
    add_policy_source,
    new_parser,
)
from dreamzero_ros.console import add_debug_option, run_tool
from dreamzero_ros.core.config.node_config import NODE_NAME
from dreamzero_ros.core.config.node_parameters import IMAGE_TRANSPORTS
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.config.node_validation import check_policy
from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.policy.api_keys import REMOTE_API_KEY_ENV, read_api_key
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.engine.loader import RANDOM_PRESETS, add_engine_arguments
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.workers.launch import load_from_arguments
from dreamzero_ros.errors import BagError
from dreamzero_ros.policy_types import Policy
from dreamzero_ros.replay.bag_io import STORAGES
from dreamzero_ros.replay.bag_maker import FRAME_SOURCES, IMAGE_FORMATS, BagSpec, make_bag
from dreamzero_ros.replay.progress import ProgressBar
from dreamzero_ros.replay.replay_outputs import served_description, summary, write_replay_outputs
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.staged_folder import staged_folder
from dreamzero_ros.replay.topics import ReplayTopics

DEFAULT_PROMPT = 'pick up the object and put it in the bowl'
#: Where ``dreamzero-make-bag`` writes when no ``--output`` is given.
DEFAULT_BAG = 'demo_bag'


def add_node_arguments(parser: argparse.ArgumentParser, command_topic: bool = True) -> None:
    """Options giving the node's parameters (topics, joints, pairing thresholds)."""
    group = parser.add_argument_group(
        'node parameters',
        'topics, joint names and observation pairing as the policy node reads them '
        '(default: the node defaults; topics resolve in the root namespace)',
    )
    add_node_parameter_options(group, '--params')
    if not command_topic:
        return
    group.add_argument(
        '--command-topic',
        default=None,
        metavar='TOPIC',
        help='JointState or JointTrajectory topic of the executed commands (replay: the '
        'reference instead of the joint states; make-bag: also write it) (default: none)',
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
    return node_settings(args.params_file, dict(args.param))


def offline_loop(settings: NodeSettings) -> LoopConfig:
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
    parser = new_parser(
        'dreamzero-replay',
        'Evaluate a DreamZero policy on a recorded rosbag2 (mcap or sqlite3): per-joint error '
        'over the horizon, latency and chunk timing, as JSON and an HTML report.',
    )
    parser.add_argument('bag', type=Path, help='rosbag2 folder (or a single .mcap / .db3 file)')
    add_policy_source(parser, RANDOM_PRESETS, remote=True)
    add_api_key_file(parser, 'of the remote server (--server)', REMOTE_API_KEY_ENV)
    add_output(parser, 'the report, metrics and video', 'replay_<bag>', '--out')
    parser.add_argument(
        '--prompt',
        default=None,
        help='task instruction (default: the prompt parameter or a demo one)',
    )
    parser.add_argument(
        '--query-period',
        type=float,
        default=8 / 15,
        metavar='SECONDS',
        help='seconds of bag time between queries (default: 8/15, the DROID chunk horizon)',
    )
    parser.add_argument(
        '--start', type=float, default=0.0, metavar='SECONDS', help='skip seconds at the start'
    )
    parser.add_argument(
        '--duration',
        type=float,
        default=None,
        metavar='SECONDS',
        help='evaluate this many seconds (default: to the end of the bag)',
    )
    parser.add_argument(
        '--max-chunks', type=int, default=None, help='stop after N chunks (default: no limit)'
    )
    parser.add_argument('--video', action='store_true', help='write predicted-vs-real video')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    add_allow_partial(parser)
    add_image_transport(
        parser,
        ('auto', *IMAGE_TRANSPORTS),
        'auto',
        'camera images on <topic> (raw) or <topic>/compressed; auto: whichever is in the bag',
    )
    add_engine_arguments(parser)
    add_node_arguments(parser)
    add_debug_option(parser)
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


def policy_description(args: argparse.Namespace) -> dict[str, object]:
    """What produced the chunks, for the report: source, random weights, options, version."""
    try:
        version = importlib.metadata.version('dreamzero_ros')
    except importlib.metadata.PackageNotFoundError:
        version = 'unknown'
    description: dict[str, object] = {
        'source': _policy_name(args),
        'random_weights': bool(args.preset),
        'dreamzero_ros_version': version,
    }
    if not args.server:
        description['options'] = dataclasses.asdict(EngineOptions.from_arguments(args))
    return json.loads(json.dumps(description, default=str))


def _policy_name(args: argparse.Namespace) -> str:
    if args.server:
        return f'remote server {args.server}'
    if args.checkpoint:
        return f'checkpoint {args.checkpoint}'
    return f'random weights of the {args.preset!r} preset'


def _note(text: str) -> None:
    print(f'dreamzero-replay: {text}', file=sys.stderr)


def replay_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-replay``."""
    return run_tool('dreamzero-replay', _replay, argv)


def _replay(argv: list[str]) -> int:
    parser = build_replay_parser()
    args = parser.parse_args(argv)
    _note(f'checking {args.bag} (topics, stamps, CRCs)')
    from dreamzero_ros.replay.evaluation import EvaluationConfig, check_bag, evaluate_bag

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
            loop=offline_loop(settings),
            policy=policy_description(args),
        )
    except (ValueError, OSError) as error:
        parser.error(str(error))
    out = args.output or Path(f'replay_{args.bag.resolve().name}')
    try:
        integrity = check_bag(args.bag, config)  # before the (slow) policy load
    except BagError as error:
        print(f'dreamzero-replay: error: {error}', file=sys.stderr)
        return 2
    _note(f'bag {args.bag} checked; loading the policy ({_policy_name(args)})')
    policy, end_workers = load_policy(args)
    from dreamzero_ros.replay.video import ImaginationStrips, VideoComparison

    try:
        try:
            layout = RobotLayout.from_metadata(policy.metadata)
            check_policy(settings, layout)
        except ValueError as error:
            print(f'dreamzero-replay: error: {error}', file=sys.stderr)
            return 2
        config = dataclasses.replace(
            config,
            cache=settings.cache_for(layout),
            layout=layout,
            groups=settings.group_layout(layout),
            policy=served_description(config.policy, policy.metadata),
        )
        progress = None if args.no_progress else ProgressBar('replay')
        video = VideoComparison() if args.video else None
        strips = ImaginationStrips() if args.video else None

        def on_chunk(record, chunk):
            video.add_chunk(record, chunk)
            strips.add_chunk(record, chunk)

        try:
            evaluation = evaluate_bag(
                args.bag,
                policy,
                config,
                progress=progress,
                on_chunk=on_chunk if video else None,
                integrity=integrity,
            )
            if progress is not None:
                progress.close()
            written = write_replay_outputs(evaluation, out, video, strips, _note, args.no_progress)
        except BagError as error:
            print(f'dreamzero-replay: error: {error}', file=sys.stderr)
            return 2
        if video is not None and 'video' not in written:
            print('dreamzero-replay: the policy returned no predicted video', file=sys.stderr)
        print(json.dumps(summary(evaluation.metrics(), written), indent=1))
        if config.policy.get('random_weights'):
            _note('random weights: the scores measure nothing about DreamZero (see the report)')
        _note(f'open {written["report"]} in a browser for the plots and the error tables')
        if not evaluation.records:
            print('dreamzero-replay: no chunk was produced (see refusals)', file=sys.stderr)
            return 1
        return 0
    finally:
        if end_workers is not None:
            end_workers()


def build_make_bag_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-make-bag``."""
    parser = new_parser(
        'dreamzero-make-bag',
        'Write a demo rosbag2 from the DROID clips (synthetic frames where they are absent) '
        'with a Franka joint trajectory, as the policy node of --params-file reads them (topics, '
        'image transport, joint names, gripper range).',
    )
    add_output(parser, 'the bag (a new one)', DEFAULT_BAG)
    parser.add_argument(
        '--storage', choices=sorted(STORAGES), default='mcap', help='rosbag2 storage format'
    )
    parser.add_argument(
        '--image-format',
        choices=IMAGE_FORMATS,
        default=None,
        help='camera frames as raw rgb8 Image or jpeg CompressedImage messages (default: what '
        'the node reads, its image_transport: raw rgb8, compressed jpeg)',
    )
    parser.add_argument(
        '--frames', type=int, default=None, help='frames per camera (default: the whole clip)'
    )
    parser.add_argument(
        '--source',
        choices=FRAME_SOURCES,
        default='auto',
        help='camera frames: the DROID clips, synthetic ones, or auto (the clips where present)',
    )
    parser.add_argument(
        '--joint-rate', type=float, default=50.0, metavar='HZ', help='JointState rate, Hz'
    )
    add_node_arguments(parser)
    add_debug_option(parser)
    return parser


def make_bag_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-make-bag``."""
    return run_tool('dreamzero-make-bag', _make_bag, argv)


def _make_bag(argv: list[str]) -> int:
    parser = build_make_bag_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
        compressed = settings.image_transport == 'compressed'
        spec = BagSpec(
            storage=args.storage,
            image_format=args.image_format or ('jpeg' if compressed else 'rgb8'),
            num_frames=args.frames,
            source=args.source,
            joint_rate_hz=args.joint_rate,
            topics=ReplayTopics.from_settings(settings, args.command_topic),
            gripper_range=tuple(settings.gripper_range),
        )
    except (ValueError, OSError) as error:
        print(f'dreamzero-make-bag: error: {error}', file=sys.stderr)
        return 2
    out = args.output or Path(DEFAULT_BAG)
    print(f'dreamzero-make-bag: writing {out} ({args.storage})', file=sys.stderr)
    progress = ProgressBar('make-bag', unit='s of bag')
    with staged_folder(out) as folder:
        summary = {**make_bag(folder, spec, progress), 'path': str(out)}
    progress.close()
    print(json.dumps(summary, indent=1))
    return 0


def _remap(text: str) -> tuple[str, str]:
    source, sep, target = text.partition(':=')
    if not sep or not source or not target:
        raise argparse.ArgumentTypeError(f'expected FROM:=TO, got {text!r}')
    return source, target


def build_live_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-live-replay``."""
    parser = new_parser(
        'dreamzero-live-replay',
        'Publish a bag onto ROS topics with /clock (run the policy node with use_sim_time:=true) '
        "and record the node's trajectories and action chunks into a new bag.",
    )
    parser.add_argument('bag', type=Path, help='rosbag2 folder to play')
    add_output(parser, "a new bag of the node's outputs", 'none, nothing is recorded', '--record')
    parser.add_argument(
        '--storage',
        choices=sorted(STORAGES),
        default='mcap',
        help='rosbag2 storage format of --output',
    )
    parser.add_argument('--rate', type=float, default=1.0, help='playback speed (1: real time)')
    parser.add_argument(
        '--clock-period',
        type=float,
        default=0.01,
        metavar='SECONDS',
        help='simulated seconds between /clock ticks',
    )
    parser.add_argument(
        '--topic',
        action='append',
        default=None,
        help='play only this topic (repeatable) (default: every topic)',
    )
    parser.add_argument(
        '--remap', type=_remap, action='append', default=[], metavar='FROM:=TO',
        help='publish bag topic FROM on TO (repeatable) (default: none)',
    )  # fmt: skip
    parser.add_argument(
        '--wait',
        type=float,
        default=10.0,
        metavar='SECONDS',
        help='seconds to wait for subscribers before playing',
    )
    parser.add_argument(
        '--linger',
        type=float,
        default=2.0,
        metavar='SECONDS',
        help='simulated seconds to keep recording at the end',
    )
    parser.add_argument(
        '--until-chunks',
        type=int,
        default=None,
        metavar='N',
        help='end the linger once N chunks are recorded (default: linger the whole time)',
    )
    add_node_name(parser, NODE_NAME, 'for its ~ topics')
    parser.add_argument(
        '--imagination',
        type=Path,
        default=None,
        metavar='DIR',
        help="with --output: write each recorded chunk's predicted frames over the bag's camera "
        'frames at the same times, per camera, as DIR/imagination_<k>.png (default: none)',
    )
    add_allow_partial(parser)
    add_node_arguments(parser, command_topic=False)
    add_debug_option(parser)
    return parser


def live_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-live-replay``."""
    return run_tool('dreamzero-live-replay', _live, argv)


def _live(argv: list[str]) -> int:
    from dreamzero_ros.replay.live_replay import (
        LiveReplayConfig,
        node_topic,
        recorded_outputs,
        run,
    )
    from dreamzero_ros.ros.ros_arguments import tool_arguments

    parser = build_live_parser()
    try:
        args = parser.parse_args(tool_arguments(argv))
    except ValueError as error:
        parser.error(str(error))
    if args.imagination is not None and args.output is None:
        parser.error('--imagination needs --output')
    node_name = args.node_name
    try:
        settings = settings_from_args(args)
        config = LiveReplayConfig(
            topics=args.topic,
            remap=dict(args.remap),
            record=recorded_outputs(settings, node_name) if args.output else {},
            chunk_topic=node_topic(settings.chunk_topic, node_name),
            preview_topic=node_topic(settings.preview_topic, node_name),
            rate=args.rate,
            clock_period_s=args.clock_period,
            wait_for_subscribers_s=args.wait,
            linger_s=args.linger,
            until_chunks=args.until_chunks,
            allow_partial=args.allow_partial,
            node_name=node_name,
        )
    except (ValueError, OSError) as error:
        parser.error(str(error))
    print(f'dreamzero-live-replay: playing {args.bag}', file=sys.stderr)
    with contextlib.ExitStack() as stack:
        record = stack.enter_context(staged_folder(args.output)) if args.output else None
        result = run(args.bag, config, record, args.storage, ['prog', *argv])
        empty = record is not None and not result.chunks_recorded
        if empty:  # a recording without chunks is not kept: the folder stays free for a retry
            shutil.rmtree(record)
    summary = dict(result.__dict__)
    if empty:
        print(json.dumps(summary, indent=1))
        print(
            f'dreamzero-live-replay: nothing recorded (no chunk; no {args.output} written): '
            f'{result.why_nothing_recorded}',
            file=sys.stderr,
        )
        return 1
    if args.imagination is not None:
        summary['imagination'] = _write_imagination(args, settings, node_name)
    print(json.dumps(summary, indent=1))
    return 0


def _write_imagination(args: argparse.Namespace, settings: NodeSettings, node_name: str) -> list:
    """Write the predicted-over-recorded figures of a live recording; their paths."""
    from dreamzero_ros.replay.video import ImaginationStrips, recorded_predictions

    strips = ImaginationStrips()
    cameras = list(settings.camera_keys)
    for chunk in recorded_predictions(args.output, node_name, cameras, args.allow_partial):
        strips.add(chunk)
    topics = ReplayTopics.from_settings(settings, None, 'auto')
    args.imagination.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, png in strips.render(args.bag, topics, args.allow_partial).items():
        path = args.imagination / f'{name}.png'
        path.write_bytes(png)
        paths.append(str(path))
    return paths
