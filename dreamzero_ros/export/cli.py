# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-export``: rosbags to a DreamZero fine-tuning dataset (LeRobot v2.1 + GEAR)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import json
from pathlib import Path
import sys

from dreamzero_ros.cli_options import add_image_transport, add_node_name, add_output, new_parser
from dreamzero_ros.console import add_debug_option, run_tool
from dreamzero_ros.core.config.node_config import NODE_NAME
from dreamzero_ros.core.config.node_parameters import IMAGE_TRANSPORTS
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.config.node_validation import check_policy
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR, Embodiment
from dreamzero_ros.export.droid_columns import DroidColumns
from dreamzero_ros.export.episodes import EPISODE_SOURCES, EpisodeSources
from dreamzero_ros.export.exporter import (
    EpisodeReport,
    ExportConfig,
    NothingExportedError,
    export,
)
from dreamzero_ros.export.layout import embodiment_for_export, layout_for
from dreamzero_ros.export.sampling import ACTION_SOURCES, SamplingOptions
from dreamzero_ros.export.video_encoder import EncoderSettings
from dreamzero_ros.replay.cli import add_allow_partial, add_node_arguments, offline_loop
from dreamzero_ros.replay.progress import ProgressBar
from dreamzero_ros.replay.settings import node_settings
from dreamzero_ros.replay.topics import ReplayTopics, absolute

PROG = 'dreamzero-export'
DESCRIPTION = (
    'Export rosbag2 recordings (mcap or sqlite3; teleoperation, policy rollouts, live-replay '
    'recordings) as a DreamZero fine-tuning dataset: LeRobot v2.1 (parquet, H.264 videos, '
    "meta/) with GEAR's modality.json, embodiment.json, stats.json and "
    'relative_stats_dreamzero.json, as upstream DreamZero trains on.'
)


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-export``."""
    parser = new_parser(PROG, DESCRIPTION)
    parser.add_argument(
        'bag',
        nargs='+',
        help='rosbag2 folder (or .mcap / .db3 file), or a folder of them; bags joined by commas '
        'are one recording (a bag and the live-replay recording of the node over it)',
    )
    add_output(parser, 'the dataset (a new one, unless --append)', 'dataset')
    parser.add_argument(
        '--append',
        action='store_true',
        help='add the episodes to the existing dataset --output (same embodiment and fps)',
    )
    parser.add_argument(
        '--embodiment',
        default='oxe_droid',
        metavar='TAG|FILE',
        help='the robot as the model sees it: a shipped embodiment (oxe_droid, yam, agibot) or '
        'an embodiment file (docs/embodiments.md)',
    )
    parser.add_argument(
        '--fps', type=float, default=None, help="frames per second (default: the embodiment's)"
    )
    episodes = parser.add_argument_group('episodes, instructions and success')
    episodes.add_argument(
        '--episodes',
        choices=EPISODE_SOURCES,
        default='bag',
        help="bag: one per bag; task: one per ~/run_task goal (the node's ~/task_events); "
        'topic: cut by --episode-topic',
    )
    episodes.add_argument(
        '--episode-topic',
        default='',
        metavar='TOPIC',
        help='std_msgs/Bool (true starts, false ends an episode) or std_msgs/String (a text '
        'starts one with that instruction, an empty text ends it) (default: none)',
    )
    episodes.add_argument(
        '--task',
        default='',
        metavar='TEXT',
        help="every episode's instruction (default: the task's, or the ~/prompt in force, or "
        'the prompt parameter)',
    )
    episodes.add_argument(
        '--success-topic',
        default='',
        metavar='TOPIC',
        help="an operator's std_msgs/Bool marker: the last one from an episode's start to the "
        'next episode is its success (default: none)',
    )
    episodes.add_argument(
        '--success-outcomes',
        nargs='+',
        default=['time_limit'],
        metavar='OUTCOME',
        help='task outcomes that count as success without a marker (time_limit, canceled, '
        'preempted, fault)',
    )
    episodes.add_argument(
        '--only-success', action='store_true', help='drop episodes not known to be successful'
    )
    sampling = parser.add_argument_group('actions and refusals')
    sampling.add_argument(
        '--actions',
        choices=ACTION_SOURCES,
        default='next-state',
        help="each frame's action: the measured joints of the next frame, or the command topic "
        '(--command-topic) one frame ahead',
    )
    sampling.add_argument(
        '--max-gap',
        type=float,
        default=None,
        metavar='SECONDS',
        help='an input older than this at a frame, or inputs stamped further apart, refuse the '
        "episode (default: the node's max_age, 0.5, and max_skew, 0.2 at 15 Hz cameras)",
    )
    sampling.add_argument(
        '--max-clock-jump',
        type=float,
        default=1.0,
        metavar='SECONDS',
        help="largest change of a topic's stamps against its log times between two messages",
    )
    sampling.add_argument(
        '--limit-margin',
        type=float,
        default=0.0,
        metavar='RAD',
        help="how far a joint may be beyond the robot's limits (URDF or safety.*)",
    )
    sampling.add_argument(
        '--min-frames', type=int, default=25, metavar='N', help='drop shorter episodes'
    )
    sampling.add_argument(
        '--action-horizon',
        type=int,
        default=24,
        metavar='N',
        help="action rows of a training sample (upstream's action delta_indices), for "
        'relative_stats_dreamzero.json',
    )
    parser.add_argument(
        '--crf', type=int, default=23, help="H.264 quality (convert_droid.py's 23; lower: larger)"
    )
    add_image_transport(
        parser,
        ('auto', *IMAGE_TRANSPORTS),
        'auto',
        'camera images on <topic> (raw) or <topic>/compressed; auto: whichever is in the bag',
    )
    add_node_name(parser, NODE_NAME, 'for its ~/task_events and ~/prompt topics')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    add_allow_partial(parser)
    add_node_arguments(parser)
    add_debug_option(parser)
    return parser


def recordings(arguments: Sequence[str]) -> list[tuple[Path, ...]]:
    """The recordings named on the command line: bags, comma-joined groups, folders of bags."""
    found: list[tuple[Path, ...]] = []
    for text in arguments:
        paths = tuple(Path(part) for part in text.split(',') if part)
        if len(paths) == 1 and _bag_folder_of_bags(paths[0]):
            found += [(child,) for child in sorted(paths[0].iterdir()) if _is_bag(child)]
        else:
            found.append(paths)
    return found


def _is_bag(path: Path) -> bool:
    return (path / 'metadata.yaml').is_file() or path.suffix in ('.mcap', '.db3')


def _bag_folder_of_bags(path: Path) -> bool:
    return path.is_dir() and not _is_bag(path) and any(_is_bag(c) for c in path.iterdir())


def robot_layout(embodiment: Embodiment) -> RobotLayout:
    """What the node's parameters must fit: the embodiment's cameras, state and actions."""
    return RobotLayout(
        cameras=embodiment.camera_keys,
        camera_sizes={camera.key: camera.source_size for camera in embodiment.cameras},
        arm_dof=embodiment.arm_state_dim,
        gripper_dof=embodiment.gripper_state_dim,
        arm_columns=embodiment.arm_columns,
        gripper_columns=embodiment.gripper_columns,
        velocity_columns=embodiment.velocity_columns,
        action_keys=tuple(key.key for key in embodiment.action),
        action_dims=tuple(key.dim for key in embodiment.action),
    )


def _urdf(settings: NodeSettings, embodiment: Embodiment) -> str:
    """The robot description's URDF (the packaged Panda's for DROID without a file)."""
    description = settings.robot_description
    if description.source == 'file' and description.file:
        return Path(description.file).read_text()
    if embodiment.tag == 'oxe_droid':
        return (EMBODIMENTS_DIR.parent / 'descriptions' / 'panda.urdf').read_text()
    return ''


def config_from_args(args: argparse.Namespace) -> ExportConfig:
    """The export configuration the options describe (ValueError/OSError naming a problem)."""
    overrides = dict(args.param)
    if args.max_gap is not None:
        overrides.update(max_age=args.max_gap, max_skew=args.max_gap)
    settings = node_settings(args.params_file, overrides)
    embodiment = embodiment_for_export(args.embodiment)
    layout = layout_for(embodiment, args.fps, args.action_horizon)
    robot = robot_layout(embodiment)
    check_policy(settings, robot)
    cache = settings.cache_for(robot)
    limits = offline_loop(settings).limits
    node = f'/{args.node_name}'
    sources = EpisodeSources(
        mode=args.episodes,
        task_topic=f'{node}/task_events',
        episode_topic=absolute(args.episode_topic) if args.episode_topic else '',
        prompt_topic=f'{node}/prompt',
        success_topic=absolute(args.success_topic) if args.success_topic else '',
        success_outcomes=tuple(args.success_outcomes),
        task=args.task,
        default_prompt=settings.prompt,
    )
    urdf = _urdf(settings, embodiment)
    if layout.droid:  # DROID's cartesian columns: the flange's pose from these joints
        try:
            DroidColumns(urdf, cache.arm_joints)
        except ValueError as error:
            raise ValueError(
                f'DROID cartesian columns: {error} (give the robot description: -p '
                'robot_description.source:=file -p robot_description.file:=URDF)'
            ) from None
    command = absolute(args.command_topic) if args.command_topic else ''
    sampling = SamplingOptions(
        fps=layout.fps,
        actions=args.actions,
        command_topic=command,
        lower=limits.lower,
        upper=limits.upper,
        limit_margin=args.limit_margin,
        max_clock_jump=args.max_clock_jump,
        min_frames=args.min_frames,
    )
    return ExportConfig(
        embodiment=embodiment,
        layout=layout,
        topics=ReplayTopics.from_settings(settings, command or None, args.image_transport),
        cache=cache,
        sources=sources,
        sampling=sampling,
        encoder=EncoderSettings(layout.fps, args.crf),
        only_success=args.only_success,
        allow_partial=args.allow_partial,
        urdf=urdf,
    )


def _note(text: str) -> None:
    print(f'{PROG}: {text}', file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dreamzero-export``."""
    return run_tool(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except (ValueError, OSError) as error:
        parser.error(' '.join(str(error).split()))
    bags = recordings(args.bag)
    output = args.output or Path('dataset')
    verb = 'appending to' if args.append else 'writing'
    _note(f'{verb} {output} from {len(bags)} recording(s), embodiment {config.layout.tag}')
    progress = None if args.no_progress else ProgressBar('export', unit='s of bags')

    def on_report(report: EpisodeReport) -> None:
        if report.dropped:
            _note(report.line())

    try:
        summary = export(bags, output, config, args.append, progress, on_report)
    except NothingExportedError as error:
        if progress is not None:
            progress.close()
        _note(str(error))
        return 1
    if progress is not None:
        progress.close()
    print(json.dumps(summary.to_json(), indent=1))
    _note(
        f'{summary.episodes} episodes, {summary.frames} frames ({summary.hours * 60:.1f} min) '
        f'written; the dataset holds {summary.dataset_episodes} episodes, '
        f'{summary.dataset_frames} frames, {summary.tasks} tasks'
    )
    return 0
