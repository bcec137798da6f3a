# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-sim``: a simulated robot with physics and cameras (MuJoCo), on simulated time.

The ROS interfaces of ``dreamzero-sim-arm`` (whose controllers it runs: joint_trajectory_
controller's rules and splines for every arm, its FollowJointTrajectory action where a group asks
for it, the grippers' command interfaces, ``robot_description``, ``/diagnostics``), now in front
of MuJoCo physics (:mod:`dreamzero_ros.sim`) instead of perfect tracking: the controllers' set-
points drive position servos at every physics step, ``joint_states`` carries the measured
positions, velocities and efforts, the fingers stop on what they grasp. Besides:

- each camera of the scene renders ``sensor_msgs/Image`` (rgb8) on its topic (``cameras.topics``,
  in the scene's camera order; default the camera names, DROID's keys) and, while someone
  subscribes, ``sensor_msgs/CompressedImage`` (jpeg) on ``<topic>/compressed`` as
  image_transport does, at ``cameras.rate_hz`` of simulated time;
- ``/clock`` (rosgraph_msgs/Clock) every ``clock_period`` of simulated time: run the other nodes
  with ``use_sim_time:=true``. Physics and controllers advance in fixed steps of simulated time;
  where rendering is slower than real time the clock runs slower, the control never does
  (``real_time_factor`` caps how fast it may run; 0: as fast as it can);
- ``/tf`` and ``/tf_static`` (tf2_msgs, where installed): every link in its parent (what
  robot_state_publisher would publish), the robot's base and the objects in ``world``, the
  cameras' optical frames;
- the task: ``~/task`` (std_msgs/String, transient local) its instruction, once per episode,
  ``~/task_success`` (std_msgs/Bool) whether it has succeeded, at 2 Hz. ``~/reset``
  (std_srvs/Trigger) starts a new episode: the robot back at its initial positions, the objects
  placed from ``seed`` (a parameter, which a reset then advances by one).
"""

from __future__ import annotations

from collections.abc import Callable
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import rclpy
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from dreamzero_ros.core.motion.jtc import TrajectoryFollower
from dreamzero_ros.core.observations.image_codec import encode_compressed
from dreamzero_ros.core.observations.imagination import topic_token
from dreamzero_ros.ros.conversions import to_time
from dreamzero_ros.ros.sim_arm import SimArm
from dreamzero_ros.ros.sim_robot_main import RobotCommand
from dreamzero_ros.sim.cameras import CameraRenderer, RenderingError, load_mujoco
from dreamzero_ros.sim.parameters import SimulatorParameters
from dreamzero_ros.sim.scenes import build_scene
from dreamzero_ros.sim.tasks import TableTask

if TYPE_CHECKING:
    from dreamzero_ros.sim.frames import Frame
    from dreamzero_ros.sim.physics import SimWorld

try:  # tf2_msgs has no PyPI wheel: /tf where a ROS install provides it
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - depends on the install
    TFMessage = None

NODE_NAME = 'dreamzero_sim'


class MujocoSim(SimArm):
    """The simulated robot: SimArm's controllers in front of MuJoCo physics and cameras."""

    TIMER_DRIVEN = False
    PARAMETERS = SimulatorParameters

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        self.world: SimWorld | None = None
        super().__init__(node_name, **kwargs)
        self._epoch_ns = 0  # its times are the simulated clock's (/clock), which starts at zero
        load_mujoco()  # MuJoCo with an offscreen OpenGL platform, or a one-line OSError
        from dreamzero_ros.sim.frames import SceneFrames
        from dreamzero_ros.sim.physics import SimWorld

        settings: SimulatorParameters = self.settings
        if self.bases:
            raise ValueError('the simulated scenes have no mobile base: remove the twist groups')
        scene = build_scene(settings.scene, self.description or None)
        self._check_joints(scene)
        self.world = SimWorld(scene, gripper_speed=settings.gripper.speed)
        self.task = TableTask(
            scene.objects,
            settings.task.object,
            settings.task.container,
            fingers=scene.fingers,
            workspace=scene.workspace,
            kind=settings.task.name,
        )
        topics = list(settings.cameras.topics)
        if topics == ['']:
            topics = [topic_token(camera) for camera in scene.cameras]
        if len(topics) != len(scene.cameras):
            raise ValueError(
                f'cameras.topics names {len(topics)} topics; scene {scene.name} has '
                f'{len(scene.cameras)} cameras ({", ".join(scene.cameras)})'
            )
        self.camera_topics = dict(zip(scene.cameras, topics, strict=True))
        self._images = {
            camera: (
                self.create_publisher(Image, topic, 5),
                self.create_publisher(CompressedImage, f'{topic}/compressed', 5),
            )
            for camera, topic in self.camera_topics.items()
        }
        self._clock_topic = self.create_publisher(Clock, '/clock', 10)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self._task_topic = self.create_publisher(String, '~/task', latched)
        self._success_topic = self.create_publisher(Bool, '~/task_success', 10)
        self._frames = SceneFrames(self.world.model)
        self._tf = self._tf_static = None
        if TFMessage is not None and settings.publish_tf:
            self._tf = self.create_publisher(TFMessage, '/tf', 10)
            self._tf_static = self.create_publisher(TFMessage, '/tf_static', latched)
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_timer(0.5, self._publish_success)
        self._reset_requested = threading.Event()
        self._stop = threading.Event()
        self._started = threading.Event()
        #: Why the simulation could not start or stopped; empty while it runs.
        self.failure = ''
        self._episode_start = 0.0
        self.steps_rendered = 0
        #: Called with (time, images in the scene's camera order) at each rendering.
        self.on_frames: Callable[[float, list[np.ndarray]], None] | None = None
        #: Where each episode starts: arm joint -> position, gripper joint -> position; the
        #: scene's home where a group layout leaves initial_positions to the default.
        arm = dict(zip(scene.arm_joints, scene.home, strict=True))
        joints = [joint for group in self.joint_groups for joint in group.rules.joints]
        if not settings.action_groups or len(settings.initial_positions) == len(joints):
            for group in self.joint_groups:
                arm.update(zip(group.rules.joints, group.follower.position, strict=True))
        self._initial = (arm, {g.spec.gripper_joint: g.position for g in self.grippers})
        self._new_episode()
        if self._tf_static is not None:
            self._tf_static.publish(_tf_message(self._frames.static(self.world.data), 0.0))
        self._thread = threading.Thread(target=self._run, name='physics', daemon=True)

    # ------------------------------------------------------------------------ set-up

    def _check_joints(self, scene: Any) -> None:
        arm = {joint for group in self.joint_groups for joint in group.rules.joints}
        fingers = {gripper.spec.gripper_joint for gripper in self.grippers}
        missing = sorted(arm - set(scene.arm_joints)) + sorted(fingers - set(scene.gripper_joints))
        if missing:
            raise ValueError(
                f'scene {scene.name} has no joint {", ".join(missing)} (its arm joints: '
                f'{", ".join(scene.arm_joints)}; grippers: {", ".join(scene.gripper_joints)})'
            )

    def ready_line(self) -> str:
        """What the simulated robot serves and its cameras, logged once it is up."""
        return f'{super().ready_line()}; cameras on {", ".join(self.camera_topics.values())}'

    def now(self) -> float:
        """Seconds of simulated time (the /clock it publishes)."""
        return self.world.time if self.world is not None else 0.0

    def _new_episode(self) -> None:
        """Robot at its initial positions, objects placed from ``seed``; seed advanced by one."""
        world = self.world
        seed = int(self.get_parameter('seed').value)
        arm, grippers = self._initial
        with self.lock:
            self.task.reset(world, seed)
            for group in self.joint_groups:
                positions = np.array([arm[joint] for joint in group.rules.joints])
                group.follower = TrajectoryFollower(group.rules.joints, positions)
            world.reset(
                [
                    arm.get(joint, home)
                    for joint, home in zip(world.scene.arm_joints, world.scene.home, strict=True)
                ],
                [
                    grippers.get(joint, world.gripper_target(joint))
                    for joint in world.scene.gripper_joints
                ],
            )
            for gripper in self.grippers:
                gripper.target = gripper.position = world.gripper_target(gripper.spec.gripper_joint)
            self._episode_start = world.time
            self.seed = seed
        self.set_parameters([Parameter('seed', value=seed + 1)])
        self.get_logger().info(f'episode (seed {seed}): {self.task.instruction()}')
        self._publish_task()

    def request_reset(self, timeout: float = 10.0) -> None:
        """Start a new episode (on the physics thread while it runs); return once done."""
        if not self._thread.is_alive():
            self._new_episode()
            return
        self._reset_requested.set()
        deadline = time.monotonic() + timeout
        while self._reset_requested.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        self.request_reset()
        response.success = True
        response.message = f'seed {self.seed}: {self.task.instruction()}'
        return response

    # ------------------------------------------------------------------------ running

    def start(self, timeout: float = 60.0) -> None:
        """Start simulating on a thread of its own, once its renderer works.

        Raises:
            RenderingError: the cameras cannot be rendered (no OpenGL for ``MUJOCO_GL``).

        """
        self._thread.start()
        if not self._started.wait(timeout):
            raise RuntimeError(f'the physics thread did not start within {timeout:g} s')
        if self.failure:
            raise RenderingError(self.failure)

    def stop(self) -> None:
        """Stop simulating; returns once the physics thread has ended."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _run(self) -> None:
        """The physics thread: its renderer (an OpenGL context is the thread's), then the loop.

        An error ends the simulation: logged, kept in :attr:`failure`, and the node shuts down
        (the other nodes then see joint states and the clock stop, and hold).
        """
        cameras = self.settings.cameras
        try:
            renderer = CameraRenderer(self.world.model, cameras.height, cameras.width)
        except OSError as error:
            self.failure = str(error)
            self._started.set()
            return
        self._started.set()
        try:
            self._loop(renderer)
        except Exception as error:  # noqa: BLE001 - any fault stops the simulation, said once
            if self._stop.is_set() or not rclpy.ok():  # shutting down: publishing may fail
                return
            self.failure = f'the simulation stopped: {type(error).__name__}: {error}'
            self.get_logger().fatal(self.failure)
            rclpy.try_shutdown()
        finally:
            renderer.close()

    def _loop(self, renderer: CameraRenderer) -> None:
        settings: SimulatorParameters = self.settings
        world = self.world
        frame_period = 1.0 / settings.cameras.rate_hz
        state_period = 1.0 / settings.rate_hz
        clock_period = settings.clock_period
        speed = settings.real_time_factor
        due = {'frame': world.time, 'state': world.time, 'clock': world.time}
        wall_start, sim_start = time.monotonic(), world.time
        while not self._stop.is_set() and rclpy.ok():
            if self._reset_requested.is_set():
                self._new_episode()
                wall_start, sim_start = time.monotonic(), world.time
                self._reset_requested.clear()
            self._step()
            now = world.time
            if now >= due['clock']:
                self._clock_topic.publish(Clock(clock=to_time(now)))
                due['clock'] += clock_period
            if now >= due['state']:
                self._publish_state(now)
                due['state'] += state_period
            if now >= due['frame']:
                self._publish_images(renderer, now)
                due['frame'] += frame_period
            if speed > 0:
                ahead = sim_start + (time.monotonic() - wall_start) * speed
                if now > ahead:
                    time.sleep((now - ahead) / speed)

    def _step(self) -> None:
        """The controllers' set-points at this step into the servos; one physics step."""
        world = self.world
        with self.lock:
            now = world.time
            for group in self.joint_groups:
                follower = group.follower
                follower.update(now)
                world.command_arm(group.rules.joints, follower.position, follower.velocity)
            for gripper in self.grippers:
                world.command_gripper(gripper.spec.gripper_joint, gripper.target)
            world.step()
            for gripper in self.grippers:
                gripper.position = float(world.positions([gripper.spec.gripper_joint])[0])
                gripper.velocity = float(world.velocities([gripper.spec.gripper_joint])[0])
            self.task.check(world)

    def gripper_reached(self, gripper: Any) -> bool:
        """At the target within 1 mm, or stopped on an object (GripperActionController's stall)."""
        command = self.world.data.ctrl[self.world.model.actuator(gripper.spec.gripper_joint).id]
        settled = abs(command - gripper.target) < 1e-9 and abs(gripper.velocity) < 1e-3
        return abs(gripper.position - gripper.target) < 1e-3 or settled

    def _publish_state(self, now: float) -> None:
        world = self.world
        states: dict[str, tuple[list, list, list, list]] = {}
        default_topic = self.settings.joint_states_topic
        with self.lock:
            joints = [(g.spec.state_topic, g.rules.joints) for g in self.joint_groups]
            joints += [(g.spec.state_topic, (g.spec.gripper_joint,)) for g in self.grippers]
            for topic, names in joints:
                entry = states.setdefault(topic or default_topic, ([], [], [], []))
                entry[0].extend(names)
                entry[1].extend(world.positions(names))
                entry[2].extend(world.velocities(names))
                entry[3].extend(world.efforts(names))
            if self.table_points is not None:
                self._check_table(world.positions(self.joint_groups[0].rules.joints))
            moving = self._frames.moving(world.data) if self._tf is not None else []
            waiting, self._waiting = self._waiting, []
        stamp = to_time(now)
        for topic, (names, positions, velocities, efforts) in states.items():
            msg = JointState(
                name=list(names),
                position=list(map(float, positions)),
                velocity=list(map(float, velocities)),
                effort=list(map(float, efforts)),
            )
            msg.header.stamp = stamp
            self._states[topic].publish(msg)
        if self._tf is not None:
            self._tf.publish(_tf_message(moving, now))
        for future in waiting:  # the action goals see this update
            future.set_result(None)

    def _publish_images(self, renderer: CameraRenderer, now: float) -> None:
        stamp = to_time(now)
        images = []
        for camera, (raw, compressed) in self._images.items():
            rgb = renderer.render(self.world.data, camera)
            images.append(rgb)
            msg = Image(
                height=rgb.shape[0],
                width=rgb.shape[1],
                encoding='rgb8',
                step=3 * rgb.shape[1],
                data=rgb.tobytes(),
            )
            msg.header.stamp, msg.header.frame_id = stamp, camera
            raw.publish(msg)
            if compressed.get_subscription_count():
                jpeg = CompressedImage(format='jpeg', data=encode_compressed(rgb, 'jpeg'))
                jpeg.header = msg.header
                compressed.publish(jpeg)
        self.steps_rendered += 1
        if self.on_frames is not None:
            self.on_frames(now, images)

    def _publish_task(self) -> None:
        """The episode's instruction (once: a new one starts an episode) and its success."""
        with self.lock:
            instruction = self.task.instruction()
        self._task_topic.publish(String(data=instruction))
        self._publish_success()

    def _publish_success(self) -> None:
        with self.lock:
            success = self.task.succeeded_at is not None
        self._success_topic.publish(Bool(data=success))

    def task_report(self) -> dict[str, Any]:
        """Seed, instruction, success, when it succeeded and how long after the episode began."""
        with self.lock:
            done = self.task.succeeded_at
            return {
                'seed': self.seed,
                'instruction': self.task.instruction(),
                'success': done is not None,
                'succeeded_at': done,
                'time_to_success': None if done is None else done - self._episode_start,
            }


def _tf_message(frames: list[Frame], now: float) -> Any:
    from geometry_msgs.msg import TransformStamped

    message = TFMessage()
    stamp = to_time(now)
    for frame in frames:
        transform = TransformStamped()
        transform.header.stamp, transform.header.frame_id = stamp, frame.parent
        transform.child_frame_id = frame.child
        x, y, z = map(float, frame.position)
        transform.transform.translation.x, transform.transform.translation.y = x, y
        transform.transform.translation.z = z
        w, qx, qy, qz = map(float, frame.quaternion)
        rotation = transform.transform.rotation
        rotation.w, rotation.x, rotation.y, rotation.z = w, qx, qy, qz
        message.transforms.append(transform)
    return message


#: ``dreamzero-sim``: its command line (``build_parser``) and console script (``main``).
COMMAND = RobotCommand('dreamzero-sim', __doc__, SimulatorParameters, MujocoSim)
build_parser = COMMAND.build_parser
main = COMMAND.main


if __name__ == '__main__':
    sys.exit(main())
