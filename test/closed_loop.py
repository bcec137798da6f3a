# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The closed loop of the DDS tests: the policy node, the robot it drives, a policy, the harness.

What ros2_controllers' TrajectoryControllerTest is to its tests, :class:`ClosedLoop` is to ours:
one set-up and one teardown of the pieces a test over DDS starts, each in its own process (the
policy node, ``dreamzero-sim-arm`` or ``dreamzero-sim`` processes, a scripted OpenPI policy,
other peers) beside the harness node in the test process and its camera stream. A test starts
the pieces it needs, in the order it needs them; :meth:`ClosedLoop.close` ends them all (the
``closed_loop`` fixture of conftest.py does at the end of the test). The node is parameterised
by a params file (a shipped config, or an embodiment's: :meth:`ClosedLoop.start_embodiment`)
and overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
import signal
import subprocess
import sys
from types import TracebackType
from typing import Any

from embodiment_support import shipped_embodiment, write_shipped_checkpoint
from node_support import (
    CONFIG,
    NODE,
    REPO,
    Harness,
    NodeProcess,
    RobotStream,
    SimClock,
    end_process,
    ros_env,
)
import numpy as np
import yaml

from dreamzero_ros.core.config.node_config import read_params_file
from dreamzero_ros.engine.workers.protocol import free_port

#: The simulated robots by kind, as sim.launch.py's ``simulator`` argument names them.
SIMULATORS = {'kinematic': 'dreamzero_ros.ros.sim_arm', 'mujoco': 'dreamzero_ros.ros.mujoco_sim'}
#: The scripted OpenPI policies (see the file).
POLICY_PEER = REPO / 'test' / 'policy_peer.py'
#: Publishes a URDF as robot_state_publisher does (see the file).
DESCRIPTION_PEER = REPO / 'test' / 'robot_description_peer.py'


class Peer:
    """A process beside the node (a simulated robot, a policy server), its output in a log file."""

    def __init__(
        self,
        args: list[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        grace: float = 10.0,
    ) -> None:
        self.log_path = log_path
        self.grace = grace
        full_env = {**ros_env(), 'PYTHONUNBUFFERED': '1', **(env or {})}
        with open(log_path, 'a') as log:  # appended: a peer started again keeps one log
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=full_env
            )

    def log(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text()

    def send_signal(self, signum: int) -> None:
        """Signal the process (SIGKILL: it dies as a crashed controller does)."""
        self.process.send_signal(signum)

    def stop(self) -> None:
        """SIGTERM, then wait; one that outlives ``grace`` seconds is killed and reported."""
        if not end_process(self.process, self.grace, signal.SIGTERM):
            raise AssertionError(f'{self.log_path.stem} still ran {self.grace} s after SIGTERM')

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sim_command(*params: str, node: str | None = None, simulator: str = 'kinematic') -> list[str]:
    """The command line of a simulated robot: ``-p`` of each ``name:=value``, ``node`` its name."""
    args = [sys.executable, '-m', SIMULATORS[simulator]]
    if params or node:
        args.append('--ros-args')
    if node:
        args += ['-r', f'__node:={node}']
    for item in params:
        args += ['-p', item]
    return args


def start_sim(
    folder: Path,
    *params: str,
    node: str | None = None,
    simulator: str = 'kinematic',
    env: Mapping[str, str] | None = None,
) -> Peer:
    """``dreamzero-sim-arm`` (or ``dreamzero-sim``), its log ``folder/<node>.log``."""
    name = node or ('sim_arm' if simulator == 'kinematic' else 'sim')
    grace = 10.0 if simulator == 'kinematic' else 20.0  # the physics ends its step first
    command = sim_command(*params, node=node, simulator=simulator)
    return Peer(command, folder / f'{name}.log', env, grace)


def random_clips(topics: list[str]) -> dict[str, np.ndarray]:
    """30 random 24x64 frames per camera topic (an embodiment's cameras, letterboxed)."""
    rng = np.random.default_rng(0)
    return {topic: rng.integers(0, 255, (30, 24, 64, 3), np.uint8) for topic in topics}


def params_file(folder: Path, **parameters: Any) -> Path:
    """config/cpu_small.yaml with ``parameters`` (dotted names) replacing its values."""
    values = {**read_params_file(CONFIG / 'cpu_small.yaml'), **parameters}
    path = folder / 'params.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': values}}))
    return path


def embodiment_parameters(checkpoint: Path, tag: str, groups: Any, safety: tuple) -> dict:
    """The node's parameters for the shipped ``tag`` layout, its groups from ``groups``.

    ``safety``: the arm joints, grippers and velocities (three sized collections) that the
    safety limits cover, in the layout's order.
    """
    embodiment = shipped_embodiment(tag)
    arm, grippers, velocities = (len(c) for c in safety)
    return {
        'engine.checkpoint': str(checkpoint),
        'engine.warmup': False,
        'camera_keys': list(embodiment.camera_keys),
        'camera_topics': [f'cameras/{key.replace("-", "_")}' for key in embodiment.camera_keys],
        'image_height': 0,
        'image_width': 0,
        'action_groups': str(groups),
        'start_enabled': False,
        'safety.joint_lower': [-3.0] * arm + [0.0] * grippers + [-0.2] * velocities,
        'safety.joint_upper': [3.0] * arm + [1.0] * grippers + [0.2] * velocities,
        'safety.max_step_delta': [0.2] * arm + [1.0] * grippers + [0.05] * velocities,
        'safety.max_velocity': [3.0] * arm,
        'safety.stop_deceleration': [10.0] * arm,
        'safety.max_acceleration': [10.0] * arm,
        'safety.max_jerk': [5000.0] * arm,
        # the tiny engine answers in ~0.1 s: space the chunks so that points are reached
        'scheduler.step_duration': 0.5,
        'scheduler.min_replan_period': 1.5,
    }


class ClosedLoop:
    """The harness in this process and the processes of one closed loop, ended together.

    Start the pieces with :meth:`serve_policy`, :meth:`start_sim`, :meth:`stream_cameras`,
    :meth:`start_node` and :meth:`start_peer`; :meth:`log` is what a failure shows, :meth:`close`
    (or leaving a ``with`` block) ends everything in reverse order.
    """

    def __init__(self, folder: Path, harness: str, use_sim_time: bool = False) -> None:
        self.folder = folder
        self.harness = Harness(harness, use_sim_time=use_sim_time)
        self.node: NodeProcess | None = None
        self.stream: RobotStream | None = None
        self.clock: SimClock | None = None
        #: The simulated robots by their log's name (the node's name).
        self.sims: dict[str, Peer] = {}
        self.peers: dict[str, Peer] = {}
        self.policy_port: int | None = None
        self._code: int | None = None
        self._closed = False

    def serve_policy(self, script: str, *args: str) -> int:
        """A scripted OpenPI policy (test/policy_peer.py) on a free port, which the node uses."""
        self.policy_port = free_port()
        command = [sys.executable, str(POLICY_PEER), str(self.policy_port), script, *args]
        self.start_peer('policy', command)
        return self.policy_port

    def publish_description(self, urdf: str, topic: str = '/robot_description') -> Peer:
        """``urdf`` on ``topic`` as robot_state_publisher publishes it, from a peer; once it has."""
        name = topic.strip('/').replace('/', '_')
        path = self.folder / f'{name}.urdf'
        path.write_text(urdf)
        peer = self.start_peer(name, [sys.executable, str(DESCRIPTION_PEER), str(path), topic])
        self.harness.wait_for(lambda: 'published' in peer.log(), 60, f'{topic} published', self.log)
        return peer

    def start_sim(
        self,
        *params: str,
        node: str | None = None,
        simulator: str = 'kinematic',
        env: Mapping[str, str] | None = None,
    ) -> Peer:
        """A simulated robot (:func:`start_sim`); one started again under its name replaces it."""
        sim = start_sim(self.folder, *params, node=node, simulator=simulator, env=env)
        previous = self.sims.pop(sim.log_path.stem, None)
        if previous is not None:
            previous.stop()
        self.sims[sim.log_path.stem] = sim
        return sim

    def start_peer(
        self,
        name: str,
        args: list[str],
        env: Mapping[str, str] | None = None,
        grace: float = 10.0,
    ) -> Peer:
        """Any other process of the system, its log ``<name>.log``."""
        self.peers[name] = Peer(args, self.folder / f'{name}.log', env, grace)
        return self.peers[name]

    def stream_cameras(
        self, clips: dict, joint_states: bool = False, **options: Any
    ) -> RobotStream:
        """The harness publishes ``clips`` (topic -> frames) with :class:`RobotStream`.

        The joint states are the simulated robot's, or with ``joint_states`` the harness's.
        """
        self.stream = RobotStream(self.harness, clips, **options)
        self.stream.joints_on = joint_states
        return self.stream

    def start_node(
        self, *overrides: str, params_file: Path | None = CONFIG / 'cpu_small.yaml'
    ) -> NodeProcess:
        """The policy node on ``params_file`` and ``overrides`` (on the served policy, if any)."""
        remote = ()
        if self.policy_port is not None:
            uri = f'ws://127.0.0.1:{self.policy_port}'
            remote = ('engine.backend:=remote', f'engine.remote_uri:={uri}')
        self.node = NodeProcess(
            self.folder / 'node.log', *remote, *overrides, params_file=params_file
        )
        return self.node

    def start_tiny_node(
        self, *overrides: str, params_file: Path = CONFIG / 'cpu_small.yaml'
    ) -> NodeProcess:
        """:meth:`start_node` on a random-weight tiny checkpoint (one per loop), no warm-up."""
        from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

        checkpoint = self.folder / 'tiny'
        if not checkpoint.exists():
            write_random_checkpoint(checkpoint, preset='tiny')
        tiny = (f'engine.checkpoint:={checkpoint}', 'engine.warmup:=false')
        return self.start_node(*tiny, *overrides, params_file=params_file)

    def start_clock(self) -> SimClock:
        """``/clock`` from the harness (:class:`SimClock`), once the harness runs on it."""
        self.clock = SimClock(self.harness)
        self.harness.wait_for(lambda: self.harness.now() > 900.0, 10, 'simulated time', self.log)
        return self.clock

    def start_embodiment(
        self, tag: str, groups: Any, safety: tuple, **parameters: Any
    ) -> NodeProcess:
        """The node on a tiny checkpoint of the shipped ``tag`` layout, its cameras streamed.

        :func:`embodiment_parameters` and ``parameters`` over config/cpu_small.yaml; the
        harness publishes random frames on the embodiment's camera topics.
        """
        checkpoint = write_shipped_checkpoint(self.folder / tag, tag)
        values = {**embodiment_parameters(checkpoint, tag, groups, safety), **parameters}
        node = self.start_node(params_file=params_file(self.folder, **values))
        self.stream_cameras(random_clips(values['camera_topics']))
        return node

    def log(self) -> str:
        """The node's log, then each simulated robot's and peer's."""
        text = self.node.log() if self.node is not None else '(node not started)'
        for name, peer in (*self.sims.items(), *self.peers.items()):
            text += f'\n--- {name}:\n{peer.log()}'
        return text

    def wait_configured(self, timeout: float) -> None:
        """Until the node says it is configured."""
        self.harness.wait_for(
            lambda: 'configured:' in self.node.log(), timeout, 'the node configured', self.log
        )

    def enable(self) -> Any:
        """Call the node's ``~/enable``; its response."""
        from std_srvs.srv import SetBool

        return self.harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=True))

    def enable_refused_naming(self, text: str, timeout: float) -> Any:
        """Call ``~/enable`` until it is refused naming ``text``; that response.

        What the test has just set up reaches the node's graph within a DDS announcement period
        (3 s with Fast DDS), not at once.
        """

        def refused() -> Any:
            response = self.enable()
            return not response.success and text in response.message and response

        what = f'an enable refusal naming {text!r}'
        return self.harness.wait_for(refused, timeout, what, self.log)

    def wait_enabled(self, timeout: float, what: str = 'enable') -> Any:
        """Call ``~/enable`` until it succeeds (the controllers are up); that response."""
        return self.harness.wait_for(
            lambda: (response := self.enable()).success and response, timeout, what, self.log
        )

    def close(self) -> int | None:
        """End the stream, node, clock, simulated robots, peers and harness; the node's exit code.

        Each piece ends even where an earlier one failed to; the first failure is raised.
        """
        if self._closed:
            return self._code
        self._closed = True
        steps = []
        if self.stream is not None:
            steps.append(self.stream.close)
        if self.node is not None:
            steps.append(self._stop_node)
        if self.clock is not None:
            steps.append(self.clock.close)
        steps += [peer.stop for peer in (*self.sims.values(), *self.peers.values())]
        steps.append(self.harness.close)
        failure = None
        for step in steps:
            try:
                step()
            except Exception as error:  # ended in any case, raised below
                failure = failure or error
        if failure is not None:
            raise failure
        return self._code

    def _stop_node(self) -> None:
        self._code = self.node.stop()

    def __enter__(self) -> ClosedLoop:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType
    ) -> None:
        self.close()


def hand_toward_the_table(loop: ClosedLoop, table: float) -> tuple[str, ...]:
    """The scripted policy lowering the hand, the sim arm at a table ``table`` m up, the cameras.

    Returns the node's overrides for that loop: the envelope on the table, the description from
    the sim arm's topic, a chunk per 2 s.
    """
    from dreamzero_ros.droid_clips import demo_clips

    loop.serve_policy('toward_the_table')
    loop.start_sim('gripper.interface:=none', f'table.height:={table}')
    loop.stream_cameras(demo_clips(30)[0])
    return (
        'engine.warmup:=false',
        'scheduler.step_duration:=0.0',
        'scheduler.min_replan_period:=2.0',
        'envelope.enabled:=true',
        f'envelope.table_height:={table}',
        'robot_description.source:=topic',
        'robot_description.timeout:=30.0',
    )


def split_groups(folder: Path, tag: str, apart: set[str]) -> dict[str, Path]:
    """Groups files ``main`` and ``apart`` (the groups named in ``apart``) of a shipped layout.

    Two simulated robots serve one layout this way, so that one part can fail alone.
    """
    from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR

    data = yaml.safe_load((EMBODIMENTS_DIR / f'{tag}.yaml').read_text())['groups']
    files = {}
    for part, entries in (
        ('main', [g for g in data if g['name'] not in apart]),
        ('apart', [g for g in data if g['name'] in apart]),
    ):
        files[part] = folder / f'{part}.yaml'
        files[part].write_text(yaml.safe_dump({'groups': entries}))
    return files
