# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-demo``: the policy node on a small model driving a simulated arm, over real DDS.

Four processes: the policy node (``config/cpu_small.yaml`` with a random-weight checkpoint of
the ``small`` preset, written once to a cache folder by the real checkpoint writer and loaded by
the real loader), ``dreamzero-sim-arm`` (joint_trajectory_controller's rules and splines, a
gripper controller, ``joint_states``), the demo stream (the cameras: the real DROID clips where
present, synthetic frames otherwise), and this listener. The loop is closed: the node pairs the
cameras with the simulated arm's joint states and the arm follows the node's trajectories. The
node starts with commands disabled, as on a robot; the demo enables them through ``~/enable``,
then prints each action chunk with its latency and where the arm is, and a summary (trajectories
accepted and rejected by the arm's controller, how far it moved, its tracking error).

``--toward-table`` shows the safety envelope instead: the node runs a scripted policy served over
OpenPI in this process (:mod:`dreamzero_ros.demo_policy`: every chunk drives the hand
down towards the table) with ``envelope.enabled``, its robot description read from the simulated
arm's ``robot_description`` topic; the arm stands at a table ``--table-height`` m above its base.
Each trajectory is cut into a braking hold above the table; the summary gives the node's cuts and
the lowest point the arm's links reached.

``--simulator mujoco`` drives ``dreamzero-sim`` instead of the simulated arm and the stream:
MuJoCo physics behind the same controllers, the DROID scene's cameras rendered, the node on
simulated time (three processes).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
import contextlib
from dataclasses import dataclass
import os
from pathlib import Path
import random
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from dreamzero_ros.cli_options import add_image_transport, add_preset, new_parser
from dreamzero_ros.console import add_debug_option, run_tool
from dreamzero_ros.core.config.node_config import NODE_NAME
from dreamzero_ros.core.config.node_parameters import IMAGE_TRANSPORTS
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.processes.process_lifetime import launcher_env, stop_process
from dreamzero_ros.core.robot.panda import PANDA_ARM_JOINTS
from dreamzero_ros.droid_clips import CLIP_FPS, CLIPS_ENV, find_clips_dir
from dreamzero_ros.engine.loader import RANDOM_PRESETS, cached_random_checkpoint

if TYPE_CHECKING:
    from dreamzero_ros.ros.demo_listener import ArmTopics

DEFAULT_CACHE = Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'dreamzero_ros'


def config_file(name: str) -> Path:
    """A config file of the package: from the source tree, else from the install's share."""
    source = Path(__file__).resolve().parents[1] / 'config' / name
    if source.is_file():
        return source
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory('dreamzero_ros')) / 'config' / name


def demo_checkpoint(cache_dir: Path, preset: str) -> tuple[Path, bool]:
    """The random-weight checkpoint of ``preset`` in ``cache_dir``, written on first use."""
    return cached_random_checkpoint(cache_dir, preset)


@dataclass(frozen=True)
class DemoArm:
    """The simulated arm of the demo and the node parameters that drive it, from one place.

    A Franka Panda: seven arm joints, the hand's finger joint (0.04 m open, 0.0 closed), its
    gripper commanded through a gripper trajectory controller's topic (JointTrajectory), which
    needs no package beyond the ROS 2 wheels (GripperCommand needs control_msgs).
    """

    joints: tuple[str, ...] = PANDA_ARM_JOINTS
    controller: str = 'joint_trajectory_controller'
    node_name: str = 'sim_arm'
    gripper_joint: str = 'panda_finger_joint1'
    gripper_range: tuple[float, float] = (0.04, 0.0)
    gripper_topic: str = 'gripper_controller/joint_trajectory'
    #: Height of the table above the arm's base (sim arm ``table.height``), metres.
    table_height: float = 0.0
    #: ``kinematic`` (``dreamzero-sim-arm`` and the camera clips) or ``mujoco``
    #: (``dreamzero-sim``: physics and rendered cameras, on simulated time).
    simulator: str = 'kinematic'

    def node_parameters(self) -> list[str]:
        """Policy node overrides: commands to this arm, disabled until ``~/enable``."""
        return [
            'dry_run:=false',
            'start_enabled:=false',
            f'arm_joint_names:={_list(self.joints)}',
            f'trajectory_topic:={self.controller}/joint_trajectory',
            f'gripper_joint_name:={self.gripper_joint}',
            f'gripper_range:={_list(self.gripper_range)}',
            'gripper.interface:=joint_trajectory',
            f'gripper.command_name:={self.gripper_topic}',
            *(['use_sim_time:=true'] if self.simulator == 'mujoco' else []),
        ]

    def sim_arm_parameters(self) -> list[str]:
        """``dreamzero-sim-arm`` parameters of this arm."""
        return [
            f'joints:={_list(self.joints)}',
            f'controller:={self.controller}',
            f'gripper.joint:={self.gripper_joint}',
            f'gripper.initial_position:={self.gripper_range[0]}',
            'gripper.interface:=joint_trajectory',
            f'gripper.name:={self.gripper_topic}',
            f'table.height:={self.table_height}',
        ]

    def topics(self) -> ArmTopics:
        """What the listener subscribes to."""
        from dreamzero_ros.ros.demo_listener import ArmTopics

        return ArmTopics(
            joints=self.joints,
            gripper_joint=self.gripper_joint,
            gripper_topic=self.gripper_topic,
            rejected_topic=f'/{self.node_name}/rejected',
            diagnostics_name=f'{self.node_name}: {self.controller}',
        )


def _stream_gripper_parameters() -> list[str]:
    """Node overrides for the demo stream's gripper, where no simulated arm runs.

    The stream's joint states are then the robot: its gripper joint is the node's default,
    normalised one (config/cpu_small.yaml names the simulated arm's finger).
    """
    settings = NodeSettings()
    return [
        f'gripper_joint_name:={settings.gripper_joint_name}',
        f'gripper_range:={_list(settings.gripper_range)}',
        'gripper.interface:=none',
    ]


def _list(values: tuple) -> str:
    return '[' + ', '.join(str(v) for v in values) + ']'


def console_script(name: str, module: str) -> list[str]:
    """The command running console script ``name``.

    Looked for beside this program (``lib/<package>`` of a colcon install), beside this
    interpreter (a venv), on PATH; else ``python -m module``.
    """
    for folder in (Path(sys.argv[0]).absolute().parent, Path(sys.executable).parent):
        if (folder / name).is_file():
            return [str(folder / name)]
    found = shutil.which(name)
    return [found] if found else [sys.executable, '-m', module]


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, 'w') as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)


def _module(args: list[str]) -> list[str]:
    return [sys.executable, '-m', *args]


def _fmt(row: np.ndarray) -> str:
    return '[' + ' '.join(f'{v:+.3f}' for v in row) + ']'


@dataclass
class DemoRun:
    """The running demo processes and the listener collecting their output."""

    node: subprocess.Popen
    listener: Any
    executor: Any
    logs: Path
    arm: subprocess.Popen | None = None

    def _check_processes(self) -> None:
        for process, name in ((self.node, 'policy_node'), (self.arm, 'sim_arm')):
            if process is not None and process.poll() is not None:
                raise RuntimeError(
                    f'the {name.replace("_", " ")} exited ({process.returncode}); see '
                    f'{self.logs}/{name}.log'
                )

    def _call(self, srv_type: Any, name: str, request: Any, deadline: float) -> Any:
        """Call a service of the node, spinning the listener meanwhile; None past ``deadline``."""
        client = self.listener.create_client(srv_type, name)
        try:
            while not client.wait_for_service(timeout_sec=0.2):
                self._check_processes()
                if time.monotonic() > deadline:
                    return None
            future = client.call_async(request)
            while not future.done() and time.monotonic() < deadline:
                self.executor.spin_once(timeout_sec=0.1)
            return future.result() if future.done() else None
        finally:
            self.listener.destroy_client(client)

    def enable_commands(self, timeout: float) -> str | None:
        """Wait until the node is active, then enable its commands (``~/enable``).

        Returns the service's answer; None on timeout.

        Raises:
            RuntimeError: the policy node or the arm exited.

        """
        from std_srvs.srv import SetBool

        deadline = time.monotonic() + timeout
        # the node's diagnostics name its lifecycle state (published at each transition)
        while self.listener.diagnostics.get('lifecycle_state') != 'active':
            if time.monotonic() > deadline:
                return None
            self.executor.spin_once(timeout_sec=0.1)
            self._check_processes()
        answer = self._call(SetBool, f'/{NODE_NAME}/enable', SetBool.Request(data=True), deadline)
        return None if answer is None else answer.message

    def wait_arm_report(self, timeout: float = 0.5) -> None:
        """Spin until the arm's controller reported on every trajectory sent, or ``timeout``."""
        listener = self.listener
        end = time.monotonic() + timeout
        while (
            listener.accepted + listener.rejected < listener.motions + listener.holds
            and time.monotonic() < end
        ):
            self.executor.spin_once(timeout_sec=0.05)

    def wait_arm_following(self, timeout: float) -> bool:
        """Spin until the arm reached a waypoint of a trajectory sent to it; False on timeout.

        A motion starts from rest on a smooth spline, so right after the last chunk the arm may
        have accepted it without visibly moving yet.

        Raises:
            RuntimeError: the policy node or the arm exited.

        """
        deadline = time.monotonic() + timeout
        while not self.listener.tracking.report().waypoints_reached:
            if time.monotonic() > deadline:
                return False
            self.executor.spin_once(timeout_sec=0.1)
            self._check_processes()
        return True

    def wait_chunks(
        self, count: int, timeout: float, on_chunk: Callable[[Any], None] = lambda chunk: None
    ) -> bool:
        """Spin until ``count`` more chunks arrived (``on_chunk`` sees each); False on timeout.

        Chunks received before the call are not counted: those published before the commands
        were enabled are not what the arm follows.

        Raises:
            RuntimeError: the policy node or the arm exited.

        """
        deadline = time.monotonic() + timeout
        self.listener.record_next_chunks(count)
        seen = 0
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.2)
            self._check_processes()
            for chunk in self.listener.chunks[seen:]:
                on_chunk(chunk)
                seen += 1
            if seen >= count:
                # the node's diagnostics after the last chunk (published every second)
                reports = self.listener.diagnostics_received
                end = time.monotonic() + 2.0
                while self.listener.diagnostics_received == reports and time.monotonic() < end:
                    self.executor.spin_once(timeout_sec=0.1)
                return True
        return False


@contextlib.contextmanager
def demo_system(
    checkpoint: Path,
    logs: Path,
    transport: str = 'raw',
    node_parameters: tuple[str, ...] = (),
    stream_rate: float = CLIP_FPS,
    arm: DemoArm | None = None,
) -> Iterator[DemoRun]:
    """Start the policy node (cpu_small.yaml on ``checkpoint``), the stream and a listener.

    Picks a random ROS_DOMAIN_ID (100-200) and loopback discovery unless the environment sets
    them. ``node_parameters`` are extra ``name:=value`` overrides. With ``arm``, a
    ``dreamzero-sim-arm`` (or ``dreamzero-sim``, the arm's ``simulator``) publishes the joint
    states and takes the node's commands (disabled until :meth:`DemoRun.enable_commands`), and
    the stream publishes the cameras only (none with ``dreamzero-sim``, which renders them and
    runs the node and this listener on simulated time); without, the stream publishes the joint
    states too and nothing follows the trajectories. The stream
    publishes at ``stream_rate`` Hz.
    """
    env = dict(os.environ)
    env.setdefault('ROS_DOMAIN_ID', str(random.randint(100, 200)))
    env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    env['PYTHONUNBUFFERED'] = '1'
    env.update(launcher_env())  # the processes end with the demo, however it ends
    os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE')})
    logs.mkdir(parents=True, exist_ok=True)
    config = config_file('cpu_small.yaml')
    print(f'ROS_DOMAIN_ID={env["ROS_DOMAIN_ID"]}; node config {config}; logs in {logs}')
    clips = find_clips_dir()
    if arm is not None and arm.simulator == 'mujoco':
        print('camera frames: rendered by dreamzero-sim (MuJoCo), on simulated time')
    else:
        print(
            f'camera frames: the real DROID clips in {clips}'
            if clips is not None
            else f'camera frames: synthetic (DROID clips not found; set {CLIPS_ENV})'
        )
    overrides = [f'engine.checkpoint:={checkpoint}', 'engine.warmup:=false']
    overrides += arm.node_parameters() if arm is not None else _stream_gripper_parameters()
    node_args = ['dreamzero_ros.ros.policy_node_main', '--ros-args', '--params-file', str(config)]
    for override in [*overrides, *node_parameters]:
        node_args += ['-p', override]
    node = _start(_module(node_args), env, logs / 'policy_node.log')
    arm_process = stream = None
    if arm is not None:
        arm_args = ['--ros-args', '-r', f'__node:={arm.node_name}']
        for parameter in arm.sim_arm_parameters():
            arm_args += ['-p', parameter]
        arm_command = (
            console_script('dreamzero-sim', 'dreamzero_ros.ros.mujoco_sim')
            if arm.simulator == 'mujoco'
            else console_script('dreamzero-sim-arm', 'dreamzero_ros.ros.sim_arm')
        )
        arm_process = _start([*arm_command, *arm_args], env, logs / 'sim_arm.log')
        print(f'simulated arm: {" ".join(arm_command)} (log {logs}/sim_arm.log)')
    if arm is None or arm.simulator != 'mujoco':  # the MuJoCo robot renders its own cameras
        stream_args = ['--frames', '90', '--image-transport', transport, '--rate', str(stream_rate)]
        if arm is not None:
            stream_args.append('--no-joint-states')
        stream = _start(
            _module(['dreamzero_ros.ros.demo_stream', *stream_args]), env, logs / 'demo_stream.log'
        )
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from dreamzero_ros.ros.demo_listener import DemoListener

    rclpy.init()
    listener = DemoListener(arm=arm.topics() if arm is not None else None)
    if arm is not None and arm.simulator == 'mujoco':
        from rclpy.parameter import Parameter

        listener.set_parameters([Parameter('use_sim_time', value=True)])
    executor = SingleThreadedExecutor()
    executor.add_node(listener)
    try:
        yield DemoRun(node, listener, executor, logs, arm_process)
    finally:
        executor.shutdown()
        listener.destroy_node()
        rclpy.try_shutdown()
        stop_process(node)  # first: it holds and shuts down before its inputs go stale
        if arm_process is not None:
            stop_process(arm_process)
        if stream is not None:
            stop_process(stream)


RANDOM_WEIGHTS_NOTE = (
    'note: the model has random weights, so its actions mean nothing and stay close to where '
    'the arm is; the node still applies its limits, hand-over and holds to them, which is '
    'what the demo shows. With a real checkpoint (docs/getting_started.md) the arm follows '
    'the task.'
)


def _print_chunk(chunk: Any) -> None:
    steps, columns = chunk.shape
    print(
        f'chunk {chunk.chunk_id}: {steps} steps x {columns} columns ({columns - 1} arm joint '
        f'positions in rad, then the gripper: 0 open .. 1 closed), {chunk.latency:.2f} s from '
        f'the observation to the chunk; first step {_fmt(chunk.first_row)}'
    )


def run(options: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    print(
        f'dreamzero-demo: the policy node on a random-weight {options.preset!r} model driving a '
        f'simulated arm, {options.chunks} chunks (checkpoint and logs in {options.cache_dir})',
        flush=True,
    )
    checkpoint, written = demo_checkpoint(options.cache_dir, options.preset)
    print(
        f'{"wrote" if written else "using"} a random-weight {options.preset!r} DreamZero '
        f'checkpoint at {checkpoint} (real layout, random weights: the actions are not '
        'meaningful, the pipeline is real)'
    )
    logs = options.cache_dir / 'logs'
    arm = DemoArm(
        table_height=options.table_height if options.toward_table else 0.0,
        simulator=options.simulator,
    )
    with contextlib.ExitStack() as stack:
        extra = stack.enter_context(_toward_the_table(options)) if options.toward_table else ()
        demo = stack.enter_context(
            demo_system(checkpoint, logs, options.image_transport, node_parameters=extra, arm=arm)
        )

        def on_chunk(chunk: Any) -> None:
            _print_chunk(chunk)
            demo.wait_arm_report()
            print(f'  {demo.listener.arm_line()}')

        try:
            answer = demo.enable_commands(options.timeout)
            if answer is not None:
                print(f'{NODE_NAME}/enable: {answer}')
                done = demo.wait_chunks(
                    options.chunks, options.timeout - (time.monotonic() - start), on_chunk
                )
                if done:
                    demo.wait_arm_following(options.arm_wait)
        except RuntimeError as error:
            print(error)
            return 1
        if answer is None:
            print(f'the node did not become active within {options.timeout:.0f} s')
            return 1
        demo.wait_arm_report()
        print(demo.listener.summary(time.monotonic() - start))
        if options.toward_table:
            print(_envelope_summary(demo.listener, options.table_height))
        else:
            print(RANDOM_WEIGHTS_NOTE)
    if not done:
        print(f'timed out after {options.timeout:.0f} s; see {logs}/policy_node.log')
        return 1
    return 0


@contextlib.contextmanager
def _toward_the_table(options: argparse.Namespace) -> Iterator[tuple[str, ...]]:
    """Serve the scripted policy; the node overrides that use it and the envelope."""
    from dreamzero_ros.demo_policy import TowardTheTable
    from dreamzero_ros.openpi.server import OpenPIServer
    from dreamzero_ros.openpi.server_config import ServerConfig

    handle = OpenPIServer(TowardTheTable(), ServerConfig(port=0)).start()
    print(f'scripted policy (hand towards the table) at {handle.url}')
    try:
        yield (
            'engine.backend:=remote',
            f'engine.remote_uri:={handle.url}',
            'scheduler.step_duration:=0.0',
            'scheduler.min_replan_period:=2.0',
            'envelope.enabled:=true',
            f'envelope.table_height:={options.table_height}',
            'robot_description.source:=topic',
            'robot_description.timeout:=30.0',
        )
    finally:
        handle.stop()


def _envelope_summary(listener: Any, table_height: float) -> str:
    """The node's envelope cuts and the lowest point the simulated arm reached."""
    node, arm = listener.diagnostics, listener.arm_diagnostics
    return (
        f'envelope: {node.get("envelope_cuts", "?")} trajectories cut into a hold (last: '
        f'{node.get("last_envelope") or "none"}); arm: lowest point '
        f'{arm.get("lowest_link", "?")} at {arm.get("lowest_z", "?")} m, table at '
        f'{table_height:g} m, {arm.get("below_table", "?")} updates below it'
    )


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-demo``."""
    return run_tool('dreamzero-demo', _demo, args)


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-demo``."""
    parser = new_parser(
        'dreamzero-demo',
        'Run the DreamZero policy node on a small random-weight model driving a simulated arm, '
        'with demo camera streams (real DROID clips where present); print its action chunks and '
        'how the arm follows.',
    )
    parser.add_argument('--chunks', type=int, default=3, help='chunks to print before stopping')
    add_preset(parser, RANDOM_PRESETS, 'small')
    add_image_transport(
        parser,
        IMAGE_TRANSPORTS,
        'raw',
        "how the demo cameras publish (the node's image_transport)",
        '--transport',
    )
    parser.add_argument(
        '--cache-dir',
        type=Path,
        default=DEFAULT_CACHE,
        metavar='DIR',
        help="where the preset's random checkpoint is kept for the next run (default: "
        '$XDG_CACHE_HOME/dreamzero_ros, else ~/.cache/dreamzero_ros)',
    )
    parser.add_argument(
        '--timeout', type=float, default=240.0, metavar='SECONDS', help='give up after seconds'
    )
    parser.add_argument(
        '--arm-wait',
        type=float,
        default=10.0,
        metavar='SECONDS',
        help='after the last chunk, seconds to wait for the arm to reach a waypoint',
    )
    parser.add_argument(
        '--simulator',
        choices=('kinematic', 'mujoco'),
        default='kinematic',
        help='kinematic: dreamzero-sim-arm (perfect tracking) and the DROID camera clips; mujoco: '
        'dreamzero-sim (physics, the DROID scene rendered, simulated time)',
    )
    parser.add_argument(
        '--toward-table',
        action='store_true',
        help='show the safety envelope: a scripted policy drives the hand towards the table, '
        'each trajectory ends in a hold above it',
    )
    parser.add_argument(
        '--table-height',
        type=float,
        default=0.3,
        metavar='M',
        help='with --toward-table: table height above the arm base, m',
    )
    add_debug_option(parser)
    return parser


def _demo(args: list[str]) -> int:
    return run(build_parser().parse_args(args))


if __name__ == '__main__':
    sys.exit(main())
