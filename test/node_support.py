# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the policy-node tests: a node process, and a harness node talking to it over DDS."""

from __future__ import annotations

from collections.abc import Callable
import os
from pathlib import Path
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from machine_load import load_factor

from dreamzero_ros.core.observations.messages import is_hold

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'config'
NODE = '/dreamzero_policy'
ARM = [f'panda_joint{i}' for i in range(1, 8)]
#: The arm and the Franka hand's finger (config/cpu_small.yaml; 0.04 m open .. 0.0 closed).
JOINTS = [*ARM, 'panda_finger_joint1']
FINGER_OPEN = 0.04


def loaded_input_tolerances(max_age: float = 1.0, max_skew: float = 0.2) -> tuple[str, str]:
    """``max_age`` and ``max_skew`` node overrides scaled by :func:`load_factor`.

    A node that shares a loaded machine with its cameras reads their frames late and one
    camera after another: it pairs older frames, further apart (0.38 s apart and 1.02 s old
    were seen at a load of 3 per core, where the idle machine's defaults allow 0.2 s and 1 s).
    What a test asserts about refusals does not depend on these bounds.
    """
    factor = load_factor()
    return f'max_age:={max_age * factor:.3f}', f'max_skew:={max_skew * factor:.3f}'


def ros_env() -> dict[str, str]:
    """Set (once per test session) a random ROS_DOMAIN_ID and loopback-only discovery."""
    os.environ.setdefault('ROS_DOMAIN_ID', str(random.randint(100, 200)))
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    return dict(os.environ)


#: Stands in for ``ros2 launch``: starts the command given and waits.
_LAUNCHER = 'import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(3600)'


class NodeProcess:
    """``dreamzero-policy-node`` in its own process, its output in a log file.

    With ``launcher``, :attr:`process` is a parent process that started the node (as
    ``ros2 launch`` does) and :meth:`node_pid` the node's process id; a string ``launcher`` is
    the parent's Python code (the node's command line in ``sys.argv[1:]``). Unless the test sets
    it, ``controller_watch.state_timeout`` is 2 s times the machine's load factor: a test's own
    joint-state stream stalls on a loaded machine, which would stop the node's commands.
    :attr:`added_parameters` holds what was added so.
    """

    def __init__(
        self,
        log_path: Path,
        *ros_args: str,
        params_file: Path | None = None,
        launcher: bool | str = False,
    ) -> None:
        args = [sys.executable, '-m', 'dreamzero_ros.ros.policy_node_main', '--ros-args']
        if params_file is not None:
            args += ['--params-file', str(params_file)]
        given = ' '.join(ros_args) + (params_file.read_text() if params_file is not None else '')
        self.added_parameters: dict[str, float] = {}
        if 'state_timeout' not in given:
            # a loaded machine delays the test's own joint-state stream (not the point here)
            self.added_parameters['controller_watch.state_timeout'] = round(2.0 * load_factor(), 3)
        ros_args = (*ros_args, *(f'{k}:={v!r}' for k, v in self.added_parameters.items()))
        for item in ros_args:
            args += ['-p', item]
        self.log_path = log_path
        self._log = open(log_path, 'w')  # noqa: SIM115 - closed in stop()
        env = {**ros_env(), 'PYTHONUNBUFFERED': '1', 'OMP_NUM_THREADS': '1'}
        if launcher:
            code = launcher if isinstance(launcher, str) else _LAUNCHER
            args = [sys.executable, '-c', code, *args]
        self.process = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO, env=env
        )

    def node_pid(self, timeout: float = 10.0) -> int:
        """The node's process id (the launcher's child where there is a launcher)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            children = child_pids(self.process.pid)
            if children:
                return children.pop()
            time.sleep(0.05)
        raise AssertionError('the launcher started no node')

    def log(self) -> str:
        """Everything the node printed so far."""
        return self.log_path.read_text()

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to end on its own; its exit code.

        Stopped either way: one still running after ``timeout`` s raises TimeoutExpired.
        """
        try:
            return self.process.wait(timeout)
        finally:
            self.stop()

    def stop(self, timeout: float = 20.0) -> int:
        """SIGINT (the node holds and cleans up), then SIGKILL if it hangs."""
        end_process(self.process, timeout)
        self._log.close()
        return self.process.returncode


class Harness:
    """An rclpy node in the test process, spinning in a thread; records what arrives."""

    def __init__(self, name: str = 'dreamzero_test_harness', use_sim_time: bool = False) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter

        ros_env()
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(
            name,
            context=self.context,
            parameter_overrides=[Parameter('use_sim_time', value=use_sim_time)],
        )
        self.received: dict[str, list[tuple[float, Any]]] = {}
        self._lock = threading.Lock()
        self._controllers: list[Any] = []
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def now(self) -> float:
        """The harness clock, seconds."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def record(self, key: str, msg_type: Any, topic: str, qos: Any = 10, node: Any = None) -> None:
        """Keep every message of ``topic`` under ``key``, with its arrival time."""

        def keep(msg: Any) -> None:
            with self._lock:
                self.received.setdefault(key, []).append((self.now(), msg))

        (node or self.node).create_subscription(msg_type, topic, keep, qos)

    def record_controller(self, key: str, msg_type: Any, topic: str, qos: Any = 10) -> None:
        """:meth:`record` on a node named as ros2_control names the controller of ``topic``.

        That is the topic's namespace (``joint_trajectory_controller`` for
        ``joint_trajectory_controller/joint_trajectory``): the policy node's ``~/enable`` takes
        this subscriber for the controller, as it takes a real joint_trajectory_controller,
        where it refuses a mere recorder.
        """
        import rclpy

        from dreamzero_ros.core.robot.controller_identity import controller_node

        namespace, _, name = f'/{controller_node(topic).lstrip("/")}'.rpartition('/')
        controller = rclpy.create_node(name, namespace=namespace or '/', context=self.context)
        self._controllers.append(controller)
        self._executor.add_node(controller)
        self.record(key, msg_type, topic, qos, controller)

    def messages(self, key: str, since: float = 0.0) -> list[Any]:
        """Messages recorded under ``key`` that arrived after ``since``."""
        with self._lock:
            return [msg for arrived, msg in self.received.get(key, []) if arrived >= since]

    def motions(self, key: str, since: float = 0.0) -> list[Any]:
        """The trajectories recorded under ``key`` after ``since`` that are not holds."""
        return [msg for msg in self.messages(key, since) if not is_hold(msg)]

    def wait_motions(
        self, key: str, count: int, since: float, timeout: float, log: Callable[[], str]
    ) -> list[Any]:
        """:meth:`motions` once there are ``count`` of them."""
        return self.wait_for(
            lambda: found if len(found := self.motions(key, since)) >= count else None,
            timeout,
            f'{count} trajectories on {key}',
            log,
        )

    def wait_for(
        self, predicate: Callable[[], Any], timeout: float, what: str, log: Callable[[], str]
    ) -> Any:
        """Poll ``predicate`` until truthy; fail with the node's log on timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(
            f'timed out after {timeout} s waiting for {what}\n--- node log:\n{log()[-4000:]}'
        )

    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 10.0) -> Any:
        """Call a service and return its response."""
        client = self.node.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise AssertionError(f'service {name} not available')
            future = client.call_async(request)
            end = time.monotonic() + timeout
            while not future.done() and time.monotonic() < end:
                time.sleep(0.01)
            if not future.done():
                raise AssertionError(f'service {name} did not answer within {timeout} s')
            return future.result()
        finally:
            self.node.destroy_client(client)

    def get_parameters(self, node: str, names: list[str]) -> dict[str, Any]:
        """Read parameters through the node's parameter service."""
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python

        response = self.call(
            GetParameters, f'{node}/get_parameters', GetParameters.Request(names=names)
        )
        return {
            name: parameter_value_to_python(value)
            for name, value in zip(names, response.values, strict=True)
        }

    def set_parameter(self, node: str, name: str, value: Any) -> Any:
        """Set one parameter through the node's parameter service; the result."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        request = SetParameters.Request(
            parameters=[Parameter(name, value=value).to_parameter_msg()]
        )
        return self.call(SetParameters, f'{node}/set_parameters', request).results[0]

    def change_state(self, node: str, transition: str, timeout: float = 120.0) -> bool:
        """Request a lifecycle transition (``configure``, ``activate``, ...); its success."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        request = ChangeState.Request()
        request.transition.id = getattr(Transition, f'TRANSITION_{transition.upper()}')
        return self.call(ChangeState, f'{node}/change_state', request, timeout).success

    def lifecycle_state(self, node: str) -> str:
        """The node's lifecycle state label (``unconfigured``, ``inactive``, ``active``, ...)."""
        from lifecycle_msgs.srv import GetState

        return self.call(GetState, f'{node}/get_state', GetState.Request()).current_state.label

    def close(self) -> None:
        """Stop spinning and shut the context down."""
        self._executor.shutdown()
        for controller in self._controllers:
            controller.destroy_node()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(5)


#: Camera publishers' QoS: reliable, as image_transport's default (the node reads reliable).
CAMERA_QOS = 5


class RobotStream:
    """Publishes camera frames and joint states from the harness, in a background thread."""

    def __init__(
        self,
        harness: Harness,
        clips: dict,
        rate_hz: float = 15.0,
        compressed: bool = False,
        joint_names: list[str] = JOINTS,
    ) -> None:
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState

        from dreamzero_ros.core.observations.image_codec import encode_compressed

        #: Topic -> frames (DROID's camera names are its topics by default).
        self.harness = harness
        self.clips = clips
        self.jpegs = (
            {camera: [encode_compressed(frame) for frame in clip] for camera, clip in clips.items()}
            if compressed
            else None
        )
        self.rate_hz = rate_hz
        self.cameras_on = True
        self.joints_on = True
        self.override: dict[str, Callable[[float], Any]] = {}
        self.joint_names = list(joint_names)
        #: time -> the positions of joint_names; None follows the demo trajectory (DROID joints).
        self.joint_positions: Callable[[float], list[float]] | None = None
        self.stamps: list[float] = []
        node = harness.node
        self._images = {
            camera: node.create_publisher(
                CompressedImage if compressed else Image,
                f'{camera}/compressed' if compressed else camera,
                CAMERA_QOS,
            )
            for camera in clips
        }
        self._joints = node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import numpy as np
        from sensor_msgs.msg import CompressedImage, JointState

        from dreamzero_ros.core.observations.messages import to_ns
        from dreamzero_ros.droid_clips import demo_joint_trajectory
        from dreamzero_ros.ros.conversions import ROS_MESSAGES, to_time

        index = 0
        start = self.harness.now()
        length = min(len(clip) for clip in self.clips.values())
        while not self._stop.wait(1.0 / self.rate_hz):
            now = self.harness.now()
            if self.cameras_on:
                for camera, publisher in self._images.items():
                    if camera in self.override:
                        msg = self.override[camera](now)
                    elif self.jpegs is not None:
                        msg = CompressedImage(
                            format='jpeg', data=self.jpegs[camera][index % length]
                        )
                        msg.header.stamp = to_time(now)
                    else:
                        frame = self.clips[camera][index % length]
                        msg = ROS_MESSAGES.image(to_ns(now), frame, camera)
                    publisher.publish(msg)
            if self.joints_on:
                if self.joint_positions is not None:
                    positions = list(self.joint_positions(now))
                else:
                    joints, gripper = demo_joint_trajectory(np.array([now - start]))
                    # the demo's gripper signal (0 open .. 1 closed) as the finger's opening
                    positions = [*joints[0], FINGER_OPEN * (1.0 - gripper[0][0])]
                state = JointState(name=self.joint_names, position=positions)
                state.header.stamp = to_time(now)
                self._joints.publish(state)
            self.stamps.append(now)
            index += 1

    def close(self) -> None:
        """Stop publishing."""
        self._stop.set()
        self._thread.join(5)


class SimClock:
    """Publishes ``/clock`` from the harness at 100 Hz: simulated seconds that can jump."""

    def __init__(self, harness: Harness, start: float = 1000.0) -> None:
        from rosgraph_msgs.msg import Clock

        self._publisher = harness.node.create_publisher(Clock, '/clock', 10)
        self._offset = start - time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> float:
        """The simulated time, seconds."""
        return time.monotonic() + self._offset

    def jump(self, seconds: float) -> None:
        """Move the simulated time by ``seconds`` (negative: back, as a bag loop does)."""
        self._offset += seconds

    def _run(self) -> None:
        from rosgraph_msgs.msg import Clock

        from dreamzero_ros.ros.conversions import to_time

        while not self._stop.wait(0.01):
            self._publisher.publish(Clock(clock=to_time(self.now())))

    def close(self) -> None:
        """Stop publishing."""
        self._stop.set()
        self._thread.join(5)


def node_diagnostics(
    harness: Harness,
    since: float = 0.0,
    predicate: Callable[[Any, dict[str, str]], Any] = lambda status, values: True,
    name: str = 'dreamzero_policy',
) -> tuple[Any, dict[str, str]] | None:
    """The newest status of node ``name`` under ``diagnostics`` after ``since`` that passes.

    ``predicate(status, values)`` decides; returns ``(status, values)`` or None.
    """
    for msg in reversed(harness.messages('diagnostics', since)):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if status.name.startswith(name) and predicate(status, values):
                return status, values
    return None


def diagnostic_count(harness: Harness, key: str, name: str = 'sim_arm') -> int:
    """The largest count ``key`` that node ``name`` reported under ``diagnostics`` (0: none)."""
    counts = [
        int(value.value)
        for array in harness.messages('diagnostics')
        for status in array.status
        if status.name.startswith(name)
        for value in status.values
        if value.key == key
    ]
    return max(counts, default=0)


def latched_qos() -> Any:
    """Reliable, transient-local depth-1 QoS (the node's ~/prompt subscription)."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )


def end_process(process: subprocess.Popen, timeout: float, signum: int = signal.SIGINT) -> bool:
    """``signum`` (SIGINT: as Ctrl-C) to a running ``process``, SIGKILL past ``timeout`` s.

    True where it ended by itself (or had ended), False where it had to be killed.
    """
    if process.poll() is not None:
        return True
    process.send_signal(signum)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True


def child_pids(pid: int) -> set[int]:
    """Process ids of the children of process ``pid`` (Linux ``/proc``)."""
    children: set[int] = set()
    for task in Path(f'/proc/{pid}/task').glob('*'):
        try:
            children.update(int(text) for text in (task / 'children').read_text().split())
        except OSError:
            continue
    return children


def alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        status = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return False
    return status.rpartition(')')[2].split()[0] != 'Z'
