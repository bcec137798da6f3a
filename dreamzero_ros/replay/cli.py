"""Console scripts: ``dreamzero-replay`` (offline evaluation) and ``dreamzero-make-bag``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import fields
import json
from pathlib import Path
import sys

from dreamzero_ros.core.observation_cache import CacheConfig
from dreamzero_ros.policy_types import DROID_CAMERAS, Policy
from dreamzero_ros.replay.bag_io import STORAGES, BagError
from dreamzero_ros.replay.bag_maker import FRAME_SOURCES, IMAGE_FORMATS, BagSpec, make_bag
from dreamzero_ros.replay.topics import ReplayTopics

DEFAULT_PROMPT = 'pick up the object and put it in the bowl'


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(','))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f'expected comma-separated numbers: {text!r}') from error


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(',') if part.strip())


def _camera_topic(text: str) -> tuple[str, str]:
    camera, sep, topic = text.partition('=')
    if not sep or camera not in DROID_CAMERAS or not topic:
        raise argparse.ArgumentTypeError(
            f'expected CAMERA=TOPIC with CAMERA one of {", ".join(DROID_CAMERAS)}: {text!r}'
        )
    return camera, topic


def add_topic_arguments(parser: argparse.ArgumentParser) -> None:
    """Options naming the bag's topics and joints (defaults: the node's)."""
    defaults = ReplayTopics()
    group = parser.add_argument_group('topics and joints')
    group.add_argument(
        '--camera-topic',
        type=_camera_topic,
        action='append',
        default=[],
        metavar='CAMERA=TOPIC',
        help='image topic of a camera (repeatable); default /<camera name>',
    )
    group.add_argument('--joint-states', default=defaults.joint_states, help='JointState topic')
    group.add_argument(
        '--command-topic',
        default=None,
        help='JointState or JointTrajectory topic of the executed commands (replay: the '
        'reference instead of the joint states; make-bag: also write it)',
    )
    group.add_argument(
        '--arm-joints',
        type=_names,
        default=defaults.arm_joints,
        help='comma-separated 7 arm joint names (default panda_joint1..7)',
    )
    group.add_argument('--gripper-joint', default=defaults.gripper_joint, help='gripper joint name')


def topics_from_args(args: argparse.Namespace) -> ReplayTopics:
    """The :class:`ReplayTopics` the topic options describe."""
    cameras = ReplayTopics().cameras | dict(args.camera_topic)
    return ReplayTopics(
        cameras=cameras,
        joint_states=args.joint_states,
        command=args.command_topic,
        arm_joints=tuple(args.arm_joints),
        gripper_joint=args.gripper_joint,
    )


def build_replay_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-replay``."""
    parser = argparse.ArgumentParser(
        prog='dreamzero-replay',
        description='Evaluate a DreamZero policy on a recorded rosbag2 (mcap or sqlite3): '
        'per-joint error over the horizon, latency and chunk timing, as JSON and an HTML report.',
    )
    parser.add_argument('bag', type=Path, help='rosbag2 folder (or a single .mcap / .db3 file)')
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument('--checkpoint', type=Path, help='DreamZero checkpoint folder')
    model.add_argument('--preset', help='random weights of a preset architecture (e.g. tiny)')
    model.add_argument('--server', help='remote OpenPI server, ws://HOST:PORT')
    parser.add_argument('--device', default=None, help='torch device (default: cuda if present)')
    parser.add_argument('--api-key', default=None, help='API key of the remote server')
    parser.add_argument(
        '--out', type=Path, default=None, help='output folder (default replay_<bag>)'
    )
    parser.add_argument('--prompt', default=DEFAULT_PROMPT, help='task instruction')
    parser.add_argument(
        '--query-period', type=float, default=8 / 15, help='seconds of bag time between queries'
    )
    parser.add_argument('--start', type=float, default=0.0, help='skip seconds at the start')
    parser.add_argument('--duration', type=float, default=None, help='evaluate this many seconds')
    parser.add_argument('--max-chunks', type=int, default=None, help='stop after N chunks')
    parser.add_argument('--video', action='store_true', help='write predicted-vs-real video')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    add_topic_arguments(parser)
    cache = parser.add_argument_group('observation pairing (the node parameters)')
    defaults = {field.name: field.default for field in fields(CacheConfig)}
    cache.add_argument('--max-age', type=float, default=defaults['max_age'], help='seconds')
    cache.add_argument('--max-skew', type=float, default=defaults['max_skew'], help='seconds')
    cache.add_argument(
        '--gripper-range',
        type=_floats,
        default=defaults['gripper_range'],
        help='joint values mapped to gripper 0,1 (default 0,1)',
    )
    cache.add_argument(
        '--clip-offsets',
        type=_floats,
        default=defaults['clip_offsets'],
        help='frame offsets, seconds, ending at 0 (default 0: one frame per camera)',
    )
    return parser


def load_policy(args: argparse.Namespace) -> Policy:
    """The policy the model options name."""
    if args.server:
        from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy

        return RemoteOpenPIPolicy(args.server, args.api_key)
    from dreamzero_ros.openpi.cli import load_policy as load_engine

    return load_engine(args.checkpoint, args.preset, args.device)


def replay_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-replay``."""
    from dreamzero_ros.replay.evaluation import EvaluationConfig, evaluate_bag
    from dreamzero_ros.replay.progress import ProgressBar
    from dreamzero_ros.replay.report import write_outputs
    from dreamzero_ros.replay.video import VideoComparison

    parser = build_replay_parser()
    args = parser.parse_args(argv)
    try:
        topics = topics_from_args(args)
        cache = CacheConfig(
            arm_joints=topics.arm_joints,
            gripper_joint=topics.gripper_joint,
            cameras=tuple(topics.cameras),
            max_age=args.max_age,
            max_skew=args.max_skew,
            gripper_range=tuple(args.gripper_range),
            clip_offsets=tuple(args.clip_offsets),
        )
        config = EvaluationConfig(
            topics=topics,
            cache=cache,
            prompt=args.prompt,
            query_period_s=args.query_period,
            start_offset_s=args.start,
            duration_s=args.duration,
            max_chunks=args.max_chunks,
        )
    except ValueError as error:
        parser.error(str(error))
    out = args.out or Path(f'replay_{args.bag.resolve().name}')
    policy = load_policy(args)
    progress = None if args.no_progress else ProgressBar('replay')
    video = VideoComparison() if args.video else None
    try:
        evaluation = evaluate_bag(
            args.bag,
            policy,
            config,
            progress=progress,
            on_chunk=video.add_chunk if video else None,
        )
        if progress is not None:
            progress.close()
        video_path = video.write(args.bag, topics, out / 'prediction.mp4') if video else None
    except BagError as error:
        print(f'dreamzero-replay: error: {error}', file=sys.stderr)
        return 2
    if video is not None and video_path is None:
        print('dreamzero-replay: the policy returned no predicted video', file=sys.stderr)
    written = write_outputs(evaluation, out, video_path.name if video_path else None)
    print(json.dumps(_summary(evaluation.metrics(), written), indent=1))
    if not evaluation.records:
        print('dreamzero-replay: no chunk was produced (see refusals)', file=sys.stderr)
        return 1
    return 0


def _summary(metrics: dict, written: dict[str, Path]) -> dict[str, object]:
    summary: dict[str, object] = {
        key: metrics[key] for key in ('chunks', 'queries', 'refusals', 'reference_topic')
    }
    if metrics['chunks']:
        summary['arm_mae_rad'] = metrics['errors']['arm']['mae']
        summary['hold_baseline_arm_mae_rad'] = metrics['hold_baseline_errors']['arm']['mae']
        summary['latency_p50_s'] = metrics['latency_s']['p50']
        summary['latency_p95_s'] = metrics['latency_s']['p95']
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
    add_topic_arguments(parser)
    return parser


def make_bag_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-make-bag``."""
    parser = build_make_bag_parser()
    args = parser.parse_args(argv)
    try:
        spec = BagSpec(
            storage=args.storage,
            image_format=args.image_format,
            num_frames=args.frames,
            source=args.source,
            joint_rate_hz=args.joint_rate,
            topics=topics_from_args(args),
        )
        summary = make_bag(args.out, spec)
    except (ValueError, FileNotFoundError) as error:
        print(f'dreamzero-make-bag: error: {error}', file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1))
    return 0
