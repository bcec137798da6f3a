# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-sim-eval``: run N episodes of a policy on the simulated robot and score them.

The policy node runs in its own process on simulated time (``use_sim_time``), its parameters
from ``--params-file`` (default ``config/cpu_small.yaml``), its policy from ``--checkpoint``,
``--preset`` (random weights), ``--server`` (a remote OpenPI server) or ``--scripted`` (the
simulator's privileged pick-and-place, served over OpenPI: proof that the checks can pass).
The simulator (``dreamzero-sim``'s node, made to match the node's joints, controller, gripper and
cameras) runs in this process. Each episode: the scene is placed from its seed, the node gets
the task's instruction as a ``~/run_task`` goal with ``--time-limit`` (simulated seconds), the
episode ends when the task succeeds (the goal is then canceled: the node holds) or the goal ends.
Every episode is recorded as a rosbag2 (cameras as JPEG, joint states, the node's trajectories,
gripper commands, chunks and status, diagnostics, the task, ``/tf``), and gets a video: the
rendered cameras beside the model's predicted video (local engines) at the same times.
``report.json`` gives per episode and overall the success rate, the time to success, and the
safety events of the node (holds, envelope cuts, chunks refused, clamps) and of the arm
(trajectories rejected).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import json
import os
from pathlib import Path
import subprocess
import sys
import threading
import time
from typing import Any

from dreamzero_ros.cli_options import (
    add_api_key_file,
    add_node_parameter_options,
    add_output,
    add_policy_source,
    new_parser,
)
from dreamzero_ros.console import add_debug_option, run_tool
from dreamzero_ros.core.processes.process_lifetime import stop_process

#: Node diagnostics counted as safety events, per episode (differences).
SAFETY_COUNTERS = (
    'holds',
    'envelope_cuts',
    'holds_outside_envelope',
    'chunks_refused_by_safety',
    'limit_clamps',
    'delta_clamps',
    'chunks_slowed',
    'observations_refused',
    'policy_errors',
)
NODE = 'dreamzero_policy'


@dataclass
class Episode:
    """One episode's outcome."""

    index: int
    seed: int
    instruction: str
    success: bool = False
    time_to_success: float | None = None
    outcome: str = ''
    message: str = ''
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    chunks: int = 0
    safety: dict[str, int] | None = None
    arm_rejections: int = 0
    bag: str = ''
    video: str = ''
    recorded: dict[str, int] | None = None


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-sim-eval``."""
    from dreamzero_ros.engine.loader import RANDOM_PRESETS
    from dreamzero_ros.sim.tasks import TASKS

    parser = new_parser(
        'dreamzero-sim-eval',
        'Run episodes of a policy on the simulated robot (MuJoCo) through the policy node: '
        'success rate, time to success, safety events, a rosbag and a video per episode.',
    )
    source = add_policy_source(parser, RANDOM_PRESETS, remote=True)
    source.add_argument(
        '--scripted',
        action='store_true',
        help="the simulator's privileged pick-and-place (served over OpenPI): proof that the "
        'task can pass',
    )
    parser.add_argument('--episodes', type=int, default=3, help='episodes to run')
    parser.add_argument('--seed', type=int, default=0, help='seed of the first episode')
    parser.add_argument(
        '--time-limit',
        type=float,
        default=30.0,
        metavar='SECONDS',
        help='simulated seconds per episode',
    )
    parser.add_argument(
        '--task',
        choices=TASKS,
        default='put_in',
        help='put_in: put the <object> in the <container>; pick_up: pick up the <object>',
    )
    parser.add_argument('--object', default='', help='object to move (empty: from the seed)')
    parser.add_argument('--container', default='', help='container (empty: from the seed)')
    parser.add_argument(
        '--real-time-factor',
        type=float,
        default=1.0,
        metavar='X',
        help='most simulated seconds per second (0: as fast as possible)',
    )
    parser.add_argument(
        '--video',
        action=argparse.BooleanOptionalAction,
        default=True,
        help='write a video per episode',
    )
    parser.add_argument(
        '--startup-timeout',
        type=float,
        default=300.0,
        metavar='SECONDS',
        help='wait this long for the node to become active',
    )
    add_output(parser, 'the report, one rosbag and video per episode (must not exist)', 'sim_eval')
    add_api_key_file(parser, 'of the --server', 'DREAMZERO_REMOTE_API_KEY')
    add_node_parameter_options(parser)
    add_debug_option(parser)
    return parser


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-sim-eval``."""
    return run_tool('dreamzero-sim-eval', _main, args)


def _main(args: list[str]) -> int:
    options = build_parser().parse_args(args)
    if options.episodes < 1 or options.time_limit <= 0:
        raise ValueError('--episodes must be >= 1 and --time-limit > 0')
    output = Path(options.output or 'sim_eval')
    if output.exists():
        raise ValueError(f'{output} exists; choose a new --output folder')
    report = run_evaluation(options, output)
    print(summary_line(report))
    return 0


def summary_line(report: dict[str, Any]) -> str:
    """One line: successes, rate, mean time to success, safety events."""
    overall = report['overall']
    mean = overall['mean_time_to_success']
    events = ', '.join(f'{k} {v}' for k, v in overall['safety'].items() if v) or 'none'
    return (
        f'{overall["successes"]}/{overall["episodes"]} episodes succeeded '
        f'({100 * overall["success_rate"]:.0f} %), mean time to success '
        f'{"-" if mean is None else f"{mean:.1f} s"}; safety events: {events}; report '
        f'{report["output"]}/report.json'
    )


def _checkpoint(options: argparse.Namespace) -> str:
    """The checkpoint the node loads: ``--checkpoint``, a preset's (written once), or none.

    Called before the simulator renders: the engine's modules are better imported before
    Mesa's software rasteriser has loaded its LLVM (Triton brings another).
    """
    if options.checkpoint:
        return str(options.checkpoint)
    if not options.preset:
        return ''
    from dreamzero_ros.demo import DEFAULT_CACHE
    from dreamzero_ros.engine.loader import cached_random_checkpoint

    DEFAULT_CACHE.mkdir(parents=True, exist_ok=True)
    return str(cached_random_checkpoint(DEFAULT_CACHE, options.preset)[0])


def _node_parameters(
    options: argparse.Namespace, checkpoint: str, policy_uri: str
) -> tuple[Path, list[str]]:
    """The node's parameter file and overrides."""
    from dreamzero_ros.demo import config_file

    params = options.params_file or config_file('cpu_small.yaml')
    overrides = ['use_sim_time:=true', 'start_enabled:=true', 'dry_run:=false', 'autostart:=true']
    if policy_uri:
        overrides += [
            'engine.backend:=remote',
            f'engine.remote_uri:={policy_uri}',
            'scheduler.step_duration:=0.0',
        ]
    else:
        overrides.append(f'engine.checkpoint:={checkpoint}')
    for name, value in options.param:
        overrides.append(f'{name}:={json.dumps(value)}')
    return Path(params), overrides


def run_evaluation(options: argparse.Namespace, output: Path) -> dict[str, Any]:
    """Start the simulator, the node and the policy; run the episodes; write the report."""
    from dreamzero_ros.core.config.launch_plan import simulator_parameters
    from dreamzero_ros.core.config.node_config import build_settings, read_params_file

    params = options.params_file or None
    values = read_params_file(params) if params else {}
    if not params:
        from dreamzero_ros.demo import config_file

        values = read_params_file(config_file('cpu_small.yaml'))
    settings = build_settings({**values, **dict(options.param)})
    arm = simulator_parameters({**values, **dict(options.param)})
    env = dict(os.environ)
    if options.api_key_file:
        env['DREAMZERO_REMOTE_API_KEY'] = options.api_key_file.read_text().strip()
    import rclpy

    rclpy.init()
    try:
        harness = _Harness(options, settings, arm, output)
        output.mkdir(parents=True)
        try:
            return harness.run(env)
        finally:
            harness.close()
    finally:
        rclpy.try_shutdown()


class _Harness:
    """The simulator, recorder, task client and (scripted) policy server in this process."""

    def __init__(self, options: argparse.Namespace, settings: Any, arm: dict, output: Path) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
        from rclpy.parameter import Parameter

        from dreamzero_ros.ros.mujoco_sim import MujocoSim

        self.options, self.settings, self.output = options, settings, output
        self.checkpoint = _checkpoint(options)
        overrides = {
            **arm,
            'real_time_factor': float(options.real_time_factor),
            'seed': int(options.seed),
            'task.name': options.task,
            'task.object': options.object,
            'task.container': options.container,
        }
        self.sim = MujocoSim(
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()]
        )
        self.sim.on_frames = self._on_frames
        self.video = None
        self.diagnostics: dict[str, str] = {}
        self.arm_diagnostics: dict[str, str] = {}
        self._recorder = self._make_recorder()
        self._subscribe()
        self.executor = MultiThreadedExecutor(num_threads=3)
        for node in self.sim.nodes():  # the simulator and its controllers' nodes
            self.executor.add_node(node)
        self._spinner = threading.Thread(target=self.executor.spin, daemon=True)
        # The task's action client on a node of its own, spun only by the thread that sends the
        # goals: rclpy loses a goal's response that arrives on an executor thread before the
        # sending thread has registered the request.
        self.client_node = rclpy.create_node('dreamzero_sim_eval')
        self.client_executor = SingleThreadedExecutor()
        self.client_executor.add_node(self.client_node)
        self.server = None
        self.scripted = None
        self.node_process: subprocess.Popen | None = None

    # ------------------------------------------------------------------------ set-up

    def _make_recorder(self) -> Any:
        from dreamzero_ros.core.observations.messages import ACTION_CHUNK_TYPE, TASK_EVENT_TYPE
        from dreamzero_ros.errors import BagError
        from dreamzero_ros.replay.episode_recorder import EpisodeRecorder
        from dreamzero_ros.replay.live_replay import message_class, node_topic

        settings = self.settings
        topics = {
            f'/{topic}/compressed': 'sensor_msgs/msg/CompressedImage'
            for topic in self.sim.camera_topics.values()
        }
        topics.update(
            {
                f'/{settings.joint_states_topic}': 'sensor_msgs/msg/JointState',
                node_topic(settings.trajectory_topic, NODE): 'trajectory_msgs/msg/JointTrajectory',
                node_topic(settings.chunk_topic, NODE): ACTION_CHUNK_TYPE,
                f'/{NODE}/status': 'dreamzero_ros/msg/PolicyStatus',
                f'/{NODE}/task_events': TASK_EVENT_TYPE,
                '/diagnostics': 'diagnostic_msgs/msg/DiagnosticArray',
                '/robot_description': 'std_msgs/msg/String',
                '/dreamzero_sim/task': 'std_msgs/msg/String',
                '/dreamzero_sim/task_success': 'std_msgs/msg/Bool',
            }
        )
        gripper = node_topic(settings.gripper.command_name, NODE)
        if settings.gripper.interface == 'joint_trajectory':
            topics[gripper] = 'trajectory_msgs/msg/JointTrajectory'
        elif settings.gripper.interface == 'action':  # the goals' outcomes, as --include-hidden
            topics[f'{gripper}/_action/status'] = 'action_msgs/msg/GoalStatusArray'
        if self.sim._tf is not None:
            topics.update({'/tf': 'tf2_msgs/msg/TFMessage', '/tf_static': 'tf2_msgs/msg/TFMessage'})
        available = {}
        for topic, msgtype in topics.items():
            try:
                message_class(msgtype)
            except BagError:  # an interface not built here is not recorded
                continue
            available[topic] = msgtype
        return EpisodeRecorder(
            self.sim,
            available,
            lambda: self.sim.world.time,
            latched=('/robot_description', '/tf_static', '/dreamzero_sim/task'),
        )

    def _subscribe(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import CompressedImage

        self.sim.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)
        self.sim.create_subscription(
            CompressedImage, f'/{NODE}/predicted_video/compressed', self._on_predicted, 16
        )

    def _on_diagnostics(self, message: Any) -> None:
        for status in message.status:
            values = {value.key: value.value for value in status.values}
            if status.name.startswith(NODE):
                self.diagnostics = values
            elif status.name.startswith(self.sim.get_name()):
                self.arm_diagnostics = values

    def _on_predicted(self, message: Any) -> None:
        from dreamzero_ros.core.observations.image_codec import decode_compressed

        if self.video is not None:
            stamp = message.header.stamp.sec + message.header.stamp.nanosec * 1e-9
            self.video.add_predicted(stamp, decode_compressed(message.format, message.data))

    def _on_frames(self, now: float, views: list) -> None:
        if self.video is not None:
            self.video.add_rendered(now, views)

    def _start_policy(self) -> str:
        """Serve the scripted policy (if chosen) over OpenPI; the URI the node should use."""
        options = self.options
        if options.server:
            return options.server
        if not options.scripted:
            return ''
        from dreamzero_ros.openpi.server import OpenPIServer
        from dreamzero_ros.openpi.server_config import ServerConfig
        from dreamzero_ros.sim.scripted_policy import ScriptedPickPlace

        self.scripted = ScriptedPickPlace(self.sim.world, self.sim.task, self.sim.lock)
        self.server = OpenPIServer(self.scripted, ServerConfig(port=0)).start()
        return self.server.url

    def _start_node(self, env: dict[str, str], uri: str) -> None:
        params, overrides = _node_parameters(self.options, self.checkpoint, uri)
        command = [
            sys.executable,
            '-m',
            'dreamzero_ros.ros.policy_node_main',
            '--ros-args',
            '--params-file',
            str(params),
        ]
        for item in overrides:
            command += ['-p', item]
        self._log = open(self.output / 'policy_node.log', 'w')  # noqa: SIM115 - closed in close()
        env = {**env, 'PYTHONUNBUFFERED': '1'}
        self.node_process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )

    def _wait_active(self) -> None:
        deadline = time.monotonic() + self.options.startup_timeout
        while self.diagnostics.get('lifecycle_state') != 'active':
            if self.node_process.poll() is not None:
                raise ConnectionError(
                    f'the policy node exited ({self.node_process.returncode}); see '
                    f'{self.output}/policy_node.log'
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f'the policy node did not become active within {self.options.startup_timeout:g}'
                    f' s; see {self.output}/policy_node.log'
                )
            time.sleep(0.1)

    # ------------------------------------------------------------------------ episodes

    def run(self, env: dict[str, str]) -> dict[str, Any]:
        """All episodes; the report (also written to report.json)."""
        from rclpy.action import ActionClient

        from dreamzero_ros.action import RunTask

        self._spinner.start()
        self.sim.start()
        uri = self._start_policy()
        self._start_node(env, uri)
        print(
            f'dreamzero-sim-eval: {self.options.episodes} episodes, policy node log in '
            f'{self.output}/policy_node.log',
            flush=True,
        )
        self._wait_active()
        client = ActionClient(self.client_node, RunTask, f'/{NODE}/run_task')
        if not client.wait_for_server(timeout_sec=30.0):
            raise ConnectionError(
                f'/{NODE}/run_task is not served (is the RunTask interface built?)'
            )
        episodes: list[Episode] = []
        try:
            for index in range(self.options.episodes):
                episode = self._episode(client, index)
                episodes.append(episode)
                print(_episode_line(episode), flush=True)
        finally:  # the episodes run so far are reported, also when one fails or on Ctrl-C
            report = _report(episodes, self.output, self.options)
            (self.output / 'report.json').write_text(json.dumps(report, indent=2) + '\n')
        return report

    def _episode(self, client: Any, index: int) -> Episode:
        from rclpy.parameter import Parameter

        from dreamzero_ros.action import RunTask
        from dreamzero_ros.sim.episode_video import EpisodeVideo

        sim = self.sim
        sim.set_parameters([Parameter('seed', value=self.options.seed + index)])
        sim.request_reset()
        if self.scripted is not None:
            self.scripted.reset()
        report = sim.task_report()
        episode = Episode(index, report['seed'], report['instruction'])
        name = f'episode_{index:03d}'
        self.video = EpisodeVideo(every=3) if self.options.video else None
        self._recorder.start(self.output / name)
        before = dict(self.diagnostics)
        rejected_before = int(self.arm_diagnostics.get('trajectories_rejected', 0) or 0)
        wall_start = time.monotonic()
        goal = RunTask.Goal(instruction=episode.instruction, time_limit=self.options.time_limit)
        handle = self._wait(client.send_goal_async(goal), 30.0)
        if handle is None or not handle.accepted:
            raise ConnectionError(
                f'the policy node refused the task goal or is gone; see '
                f'{self.output}/policy_node.log'
            )
        started = sim.world.time
        result_future = handle.get_result_async()
        wall_limit = max(60.0, 20 * self.options.time_limit)
        while not result_future.done():
            if sim.task_report()['success']:
                handle.cancel_goal_async()
                break
            if time.monotonic() - wall_start > wall_limit or self.node_process.poll() is not None:
                handle.cancel_goal_async()
                break
            self.client_executor.spin_once(timeout_sec=0.05)
        outcome = self._wait(result_future, 30.0)
        if self.node_process.poll() is not None:
            episode.outcome = 'node_exited'
            episode.message = f'the policy node exited ({self.node_process.returncode})'
        report = sim.task_report()
        episode.success = report['success']
        if report['time_to_success'] is not None:
            episode.time_to_success = max(0.0, report['succeeded_at'] - started)
        if outcome is not None and not episode.outcome:
            episode.outcome = outcome.result.outcome
            episode.message = outcome.result.message
            episode.chunks = int(outcome.result.chunks_executed)
        episode.sim_seconds = sim.world.time - started
        episode.wall_seconds = time.monotonic() - wall_start
        _wait_diagnostics(self, 1.5)
        episode.safety = {
            key: int(self.diagnostics.get(key, 0) or 0) - int(before.get(key, 0) or 0)
            for key in SAFETY_COUNTERS
        }
        episode.arm_rejections = (
            int(self.arm_diagnostics.get('trajectories_rejected', 0) or 0) - rejected_before
        )
        episode.recorded = self._recorder.stop()
        episode.bag = name
        if self.video is not None:
            path = self.video.write(self.output / f'{name}.mp4')
            episode.video = path.name if path else ''
        self.video = None
        return episode

    def _wait(self, future: Any, timeout: float) -> Any:
        """The future's result, spinning the task client meanwhile; None after ``timeout`` s."""
        self.client_executor.spin_until_future_complete(future, timeout_sec=timeout)
        return future.result() if future.done() else None

    def close(self) -> None:
        """Stop the node (SIGINT: it holds and shuts down), the server and the simulator."""
        if self.node_process is not None and self.node_process.poll() is None:
            stop_process(self.node_process, 30.0)
            self._log.close()
        if self.server is not None:
            self.server.stop()
        self._recorder.stop()
        self.sim.stop()
        self.executor.shutdown()
        self.client_executor.shutdown()
        self.client_node.destroy_node()
        self.sim.destroy_node()


def _wait_diagnostics(harness: _Harness, seconds: float) -> None:
    """Let the node's diagnostics of the episode's end arrive (published every second)."""
    end = time.monotonic() + seconds
    start = harness.sim.world.time
    while time.monotonic() < end and harness.sim.world.time < start + 1.2:
        time.sleep(0.05)


def _episode_line(episode: Episode) -> str:
    done = (
        f'succeeded in {episode.time_to_success:.1f} s'
        if episode.success
        else f'failed ({episode.outcome or "no result"})'
    )
    events = ', '.join(f'{k} {v}' for k, v in (episode.safety or {}).items() if v) or 'none'
    return (
        f'episode {episode.index} (seed {episode.seed}, "{episode.instruction}"): {done}; '
        f'{episode.chunks} chunks, {episode.sim_seconds:.1f} s simulated in '
        f'{episode.wall_seconds:.1f} s; safety events: {events}'
    )


def _report(episodes: list[Episode], output: Path, options: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import asdict

    successes = [e for e in episodes if e.success]
    runs = max(1, len(episodes))
    safety: dict[str, int] = {}
    for episode in episodes:
        for key, count in (episode.safety or {}).items():
            safety[key] = safety.get(key, 0) + count
    times = [e.time_to_success for e in successes if e.time_to_success is not None]
    return {
        'output': str(output),
        'policy': str(options.checkpoint or options.server or options.preset or 'scripted'),
        'overall': {
            'episodes': len(episodes),
            'successes': len(successes),
            'success_rate': len(successes) / runs,
            'mean_time_to_success': sum(times) / len(times) if times else None,
            'safety': safety,
            'arm_rejections': sum(e.arm_rejections for e in episodes),
        },
        'episodes': [asdict(e) for e in episodes],
    }


if __name__ == '__main__':
    sys.exit(main())
