# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's settings: one frozen dataclass tree, and the parameters made from it.

:class:`NodeSettings` declares every parameter once (default, description, range, choices; see
:mod:`~dreamzero_ros.parameter_schema`); the node declares exactly :data:`PARAMETERS`, and a
parameter file or override naming anything else is an error (:func:`unknown_parameters`).
:func:`build_settings` turns a ``name -> value`` mapping into the settings, raising
``ValueError`` naming the offending parameter. Nothing here imports ROS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

from dreamzero_ros.core.action_groups import (
    GroupLayout,
    GroupSpec,
    load_groups,
    resolve_groups,
    single_arm_groups,
)
from dreamzero_ros.core.chunk_scheduler import BlendConfig
from dreamzero_ros.core.control_loop import LoopConfig
from dreamzero_ros.core.controller_watch import ControllerWatchSettings
from dreamzero_ros.core.description_bounds import DescriptionBounds
from dreamzero_ros.core.envelope import EnvelopeConfig
from dreamzero_ros.core.gripper import GripperConfig
from dreamzero_ros.core.imagination import ViewSettings
from dreamzero_ros.core.joint_limits import ArmLimits, resolve_arm_limits, with_arm_limits
from dreamzero_ros.core.observation_cache import IMAGE_FITS, CacheConfig
from dreamzero_ros.core.plan_geometry import PlanSettings
from dreamzero_ros.core.robot_description import RobotDescription
from dreamzero_ros.core.robot_layout import RobotLayout
from dreamzero_ros.core.safety import DELTA_MODES, OUTSIDE_LIMITS_MODES, SafetyLimits
from dreamzero_ros.core.task_runner import prompt_too_long
from dreamzero_ros.core.trajectory import (
    PANDA_MAX_ACCELERATION,
    PANDA_MAX_JERK,
    PANDA_MAX_VELOCITY,
    PANDA_STOP_DECELERATION,
    MotionConfig,
)
from dreamzero_ros.engine.checkpoint.data_files import read_yaml
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.parameter_schema import ParameterSpec, build, parameter, parameter_specs
from dreamzero_ros.policy_types import DROID_CAMERAS

#: The safety.* limits with one value per arm joint.
PER_ARM_JOINT_LIMITS = ('max_velocity', 'stop_deceleration', 'max_acceleration', 'max_jerk')
#: ``max_skew`` 0 means the larger of this, seconds, and SKEW_PERIODS periods of the slowest
#: camera: 0.2 s for cameras of 7.5 Hz and faster, 0.3 s at 5 Hz.
DEFAULT_MAX_SKEW = 0.2
SKEW_PERIODS = 1.5

#: Default node name (the launch file and the console script use it).
NODE_NAME = 'dreamzero_policy'
#: How camera images travel (``image_transport``): Image, or CompressedImage on ``/compressed``.
IMAGE_TRANSPORTS = ('raw', 'compressed')

#: Franka Panda limits (radians) and the normalised gripper, in action-column order.
PANDA_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973, 0.0)
PANDA_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973, 1.0)


# Ranges of the number parameters (inclusive); arrays apply them to each element.
_SECONDS = (0.0, 3600.0)
_POSITIONS = (-10.0, 10.0)  # rad (or m for a prismatic joint), and gripper units
_PORT = (0, 65535)


@dataclass(frozen=True)
class StepCommandSettings:
    """The optional per-step command output (``step_command.*``)."""

    enabled: bool = parameter(False, 'Also publish the command of each control step.')
    type: str = parameter(
        'float64_multi_array',
        'Per-step message type.',
        choices=('float64_multi_array', 'joint_state'),
    )
    topic: str = parameter(
        'forward_position_controller/commands', 'Topic of the per-step commands.'
    )


@dataclass(frozen=True)
class CameraQoSSettings:
    """QoS of the camera subscriptions (``camera_qos.*``); docs/policy_node.md, Cameras."""

    reliability: str = parameter(
        'reliable',
        'reliable: lost fragments of a frame are resent (raw 720p/1080p frames arrive; matches '
        'reliable publishers only, the image_transport default); best_effort: matches every '
        'publisher, but default Fast DDS drops most large frames (benchmarks/camera_qos.py).',
        choices=('reliable', 'best_effort'),
    )
    depth: int = parameter(
        3,
        'Frames per camera the middleware keeps between two reads of the inputs (KEEP_LAST); '
        'at least the frames a camera publishes per control period, plus one.',
        range=(1, 100),
    )


@dataclass(frozen=True)
class SafetySettings:
    """Position and step limits applied to every command (``safety.*``)."""

    joint_lower: tuple[float, ...] = parameter(
        PANDA_LOWER,
        'Lower position limits: the arm joints (rad; DROID: 7) then the gripper, if any '
        '(policy units, DROID 0..1).',
        range=_POSITIONS,
    )
    joint_upper: tuple[float, ...] = parameter(
        PANDA_UPPER, 'Upper position limits, same layout.', range=_POSITIONS
    )
    max_step_delta: tuple[float, ...] = parameter(
        (0.1,) * 7 + (1.0,),
        'Largest change per control step, same layout (each > 0).',
        range=(0.0, 10.0),
    )
    delta_mode: str = parameter(
        'clamp',
        'clamp: rate-limit steps beyond max_step_delta; refuse: drop the chunk and hold.',
        choices=DELTA_MODES,
    )
    outside_limits: str = parameter(
        'approach',
        'A start outside the position limits (a joint measured beyond them): approach: move '
        'into the limits at most max_step_delta per step; hold: refuse chunks and hold.',
        choices=OUTSIDE_LIMITS_MODES,
    )
    max_velocity: tuple[float, ...] = parameter(
        PANDA_MAX_VELOCITY,
        'Largest speed of each arm joint anywhere on the trajectory the controller '
        'interpolates, rad/s, one value per arm joint (Panda datasheet). Segments too fast '
        'for it are played slower (trajectory.max_stretch).',
        range=(0.001, 100.0),
    )
    stop_deceleration: tuple[float, ...] = parameter(
        PANDA_STOP_DECELERATION,
        'Peak deceleration of each arm joint when a hold brakes a motion, rad/s^2, one value '
        'per arm joint (half the Panda limits; lowered onto max_acceleration where above it); '
        'the braking is lengthened where the acceleration or jerk limits need it.',
        range=(0.001, 1000.0),
    )
    max_acceleration: tuple[float, ...] = parameter(
        PANDA_MAX_ACCELERATION,
        'Largest acceleration of each arm joint anywhere on the trajectory the controller '
        'interpolates, rad/s^2, one value per arm joint (Panda datasheet). Segments that need '
        'more are played slower (trajectory.max_stretch).',
        range=(0.001, 10000.0),
    )
    max_jerk: tuple[float, ...] = parameter(
        PANDA_MAX_JERK,
        'Largest jerk of each arm joint anywhere on the trajectory the controller interpolates, '
        'hand-overs and holds included, rad/s^3, one value per arm joint (Panda datasheet); '
        'enforced like max_acceleration.',
        range=(0.001, 1.0e7),
    )


@dataclass(frozen=True)
class RobotDescriptionSettings:
    """Where the robot description (URDF) and its limits come from (``robot_description.*``)."""

    source: str = parameter(
        'none',
        'topic: the URDF on robot_description.topic (std_msgs/String, transient local, as '
        'robot_state_publisher publishes it), waited for at configure; file: the URDF in '
        'robot_description.file; none: no description, the safety.* limits as typed. With a '
        'description, its joint limits apply; safety.* values other than their defaults may '
        'only tighten them (configure refuses a wider one).',
        choices=('none', 'topic', 'file'),
    )
    topic: str = parameter('robot_description', 'Topic of the URDF (source topic).')
    file: str = parameter('', 'URDF file (source file).')
    joint_limits_file: str = parameter(
        '',
        "MoveIt-style joint_limits.yaml over the description's limits (acceleration, jerk, "
        'tighter positions and velocities); empty: none.',
    )
    timeout: float = parameter(
        10.0,
        'Longest wait at configure for the description on robot_description.topic, seconds.',
        range=(0.0, 3600.0),
    )
    max_bytes: int = parameter(
        DescriptionBounds.max_bytes,
        'Largest URDF accepted, bytes; a bigger one is refused before it is parsed.',
        range=(1024, 2**30),
    )
    max_links: int = parameter(
        DescriptionBounds.max_links,
        'Most links (and most joints) a URDF may have; checked before the kinematics library '
        'builds its tree (time grows with the square of the links there).',
        range=(1, 100_000),
    )
    max_depth: int = parameter(
        DescriptionBounds.max_depth,
        'Most joints between the root link and any other (the kinematics library recurses '
        'along them).',
        range=(1, 1000),
    )
    max_length: float = parameter(
        DescriptionBounds.max_length,
        'Largest magnitude of a length in the URDF (origin xyz, geometry sizes), metres.',
        range=(1e-3, 1e9),
    )
    max_value: float = parameter(
        DescriptionBounds.max_value,
        'Largest magnitude of any other number in the URDF (limits, inertia, rpy, ...).',
        range=(1.0, 1e300),
    )

    @property
    def bounds(self) -> DescriptionBounds:
        """What a description may hold (``max_*``)."""
        return DescriptionBounds(
            self.max_bytes, self.max_links, self.max_depth, self.max_length, self.max_value
        )


@dataclass(frozen=True)
class TrajectorySettings:
    """How merged rows become the arm trajectory (``trajectory.*``)."""

    handover_lead: float = parameter(
        0.05,
        "Seconds from a chunk's arrival to its hand-over point (on the motion in force; the "
        "trajectory's points before it repeat that motion): time for the message to reach the "
        'controller.',
        range=(0.0, 10.0),
    )
    max_stretch: float = parameter(
        4.0,
        "How much longer than the policy's timing a chunk's rows may take to respect "
        'safety.max_velocity, max_acceleration and max_jerk (a segment alone may be slowed '
        'more); a chunk that needs more is refused with a hold.',
        range=(1.0, 100.0),
    )


@dataclass(frozen=True)
class GripperSettings:
    """The gripper command output (``gripper.*``); positions from ``gripper_range``."""

    interface: str = parameter(
        'none',
        'action: control_msgs/action/GripperCommand goals (franka_gripper gripper_action, '
        'GripperActionController; needs control_msgs); float64: std_msgs/Float64 positions; '
        'joint_trajectory: a one-point trajectory_msgs/JointTrajectory for a gripper '
        'controller; none: no gripper command. Sent only while commands reach the controller.',
        choices=('none', 'action', 'float64', 'joint_trajectory'),
    )
    command_name: str = parameter(
        'gripper_action', 'Action name (action) or topic (float64, joint_trajectory).'
    )
    binary: bool = parameter(
        True,
        'Binary gripper: close when the policy value rises above close_above, open when it '
        'falls below open_below; false sends the mapped position when it moves by min_change.',
    )
    close_above: float = parameter(
        0.6, 'Policy value above which a binary gripper closes.', range=(0.0, 1.0)
    )
    open_below: float = parameter(
        0.4, 'Policy value below which a binary gripper opens.', range=(0.0, 1.0)
    )
    min_change: float = parameter(
        0.05,
        'Least change of the policy value that sends a continuous gripper again.',
        range=(0.001, 1.0),
    )
    max_effort: float = parameter(
        20.0, 'max_effort of GripperCommand goals, N (0: no limit).', range=(0.0, 1000.0)
    )
    move_time: float = parameter(
        0.5, 'time_from_start of the joint_trajectory command point, s.', range=(0.001, 60.0)
    )


@dataclass(frozen=True)
class TaskSettings:
    """The task action ``~/run_task`` (``task.*``)."""

    input_timeout: float = parameter(
        2.0,
        'Seconds the inputs may stay unusable (stale, missing, skewed, bad) during a ~/run_task '
        'task before it ends as a fault; the node holds from the first refusal anyway.',
        range=(0.01, 3600.0),
    )
    client_timeout: float = parameter(
        1.0,
        "Seconds a ~/run_task goal outlives its client (an action client seen at the task's "
        'start that left the ROS graph; a killed client leaves it when its DDS lease ends) '
        'before it ends as a fault and the node holds; 0: goals outlive their clients.',
        range=(0.0, 3600.0),
    )


_ENVELOPE_DEFAULT = EnvelopeConfig()
_METRES = (-100.0, 100.0)


@dataclass(frozen=True)
class EnvelopeSettings:
    """Where the robot's links may go, from its description (``envelope.*``)."""

    enabled: bool = parameter(
        False,
        'Cut every trajectory before a configured link point would leave the envelope (workspace '
        'box, above the table, out of keep_out boxes), ending in a braking hold. Needs the '
        'robot description (robot_description.source topic or file).',
    )
    links: tuple[str, ...] = parameter(
        _ENVELOPE_DEFAULT.links,
        'Links of the description whose points are checked (Panda: the flange and both fingers).',
    )
    link_offsets: tuple[float, ...] = parameter(
        tuple(_ENVELOPE_DEFAULT.offsets.ravel().tolist()),
        'x, y, z of each point in its link, metres, 3 values per link (Panda fingertips: 0.045 '
        'beyond the finger links).',
        range=_METRES,
    )
    frame: str = parameter(
        _ENVELOPE_DEFAULT.frame,
        'Link of the description the bounds are given in; it must not move with the arm '
        'joints. Empty: the description root.',
    )
    workspace_min: tuple[float, ...] = parameter(
        tuple(_ENVELOPE_DEFAULT.workspace_min.tolist()),
        'Lower corner x, y, z of the workspace box, metres.',
        range=_METRES,
    )
    workspace_max: tuple[float, ...] = parameter(
        tuple(_ENVELOPE_DEFAULT.workspace_max.tolist()),
        'Upper corner x, y, z of the workspace box, metres.',
        range=_METRES,
    )
    table_height: float = parameter(
        _ENVELOPE_DEFAULT.table_height,
        'Height (z) of the table plane in the frame, metres; every point stays above it.',
        range=_METRES,
    )
    keep_out: tuple[float, ...] = parameter(
        (),
        'Boxes no point may enter, 6 values each: min x, y, z then max x, y, z, metres.',
        range=_METRES,
    )
    resolution: float = parameter(
        _ENVELOPE_DEFAULT.resolution,
        'Largest motion of a point between two checked samples of the trajectory, metres; '
        'each sample must lie this far inside every bound.',
        range=(0.0001, 1.0),
    )


@dataclass(frozen=True)
class SchedulerSettings:
    """Query pacing and chunk hand-over (``scheduler.*``)."""

    step_duration: float = parameter(
        0.0,
        "Seconds between action rows; 0 keeps the policy's (1/15 s for DROID). A larger value "
        'plays chunks in slow motion, for CPU profiles whose chunks take longer than their '
        'horizon.',
        range=(0.0, 10.0),
    )
    min_replan_period: float = parameter(
        0.0,
        'Least seconds between queries; 0 queries again as soon as a chunk arrives.',
        range=_SECONDS,
    )
    blend_min_steps: int = parameter(
        2, 'Shortest hand-over from the executing plan, steps.', range=(0, 1000)
    )
    blend_max_steps: int = parameter(
        12,
        'Longest hand-over, steps; the measured latency chooses between the two; 0 disables '
        'blending.',
        range=(0, 1000),
    )


@dataclass(frozen=True)
class EngineSettings(EngineOptions):
    """The policy behind the node (``engine.*``): the engine options, then the node's own."""

    backend: str = parameter(
        'local',
        'local: DreamZeroEngine in this process; remote: an OpenPI server at engine.remote_uri.',
        choices=('local', 'remote'),
    )
    checkpoint: str = parameter(
        '',
        'Folder of a DreamZero checkpoint (config.json, safetensors, experiment_cfg/): DROID '
        'or a fine-tune for another robot, full or LoRA-only.',
    )
    master_addr: str = parameter('127.0.0.1', 'torch.distributed rendezvous address.')
    master_port: int = parameter(
        0,
        'torch.distributed rendezvous port; 0 chooses a free one at each configure (so that '
        'two nodes on one host never collide).',
        range=_PORT,
    )
    warmup: bool = parameter(
        True, 'Run one inference at configure time so that the first chunk is not slow.'
    )
    remote_uri: str = parameter('ws://127.0.0.1:8000', 'OpenPI server URI (engine.backend remote).')
    remote_api_key_file: str = parameter(
        '',
        'File holding the API key sent to the remote OpenPI server (one line; keep it mode 600); '
        'empty: $DREAMZERO_REMOTE_API_KEY, else no key. Never the key itself: parameters are '
        'readable by any DDS participant.',
    )


@dataclass(frozen=True)
class BridgeSettings:
    """Serving the engine over the OpenPI WebSocket protocol too (``openpi_bridge.*``)."""

    enabled: bool = parameter(False, 'Also serve the engine over the OpenPI WebSocket protocol.')
    host: str = parameter('127.0.0.1', 'Bridge bind address.')
    port: int = parameter(8000, 'Bridge TCP port.', range=_PORT)
    api_key_file: str = parameter(
        '',
        'File holding the Api-Key that bridge clients must send (one line; keep it mode 600); '
        'empty: $DREAMZERO_OPENPI_API_KEY, else every client is accepted. Never the key itself.',
    )


@dataclass(frozen=True)
class NodeSettings:
    """Every parameter of the policy node, checked and typed; read by attribute.

    Groups are nested settings (``settings.engine.checkpoint`` is the parameter
    ``engine.checkpoint``). Derived core configurations: :attr:`cache`, :attr:`loop`.
    """

    # --- lifecycle and task
    autostart: bool = parameter(
        True,
        'Configure and activate at start-up instead of waiting for lifecycle transitions.',
    )
    prompt: str = parameter(
        '',
        'Task instruction given to the policy; settable at run time (also via '
        'the latched ~/prompt topic).',
        runtime=True,
    )
    max_prompt_length: int = parameter(
        4096,
        'Longest prompt or ~/run_task instruction, characters: longer ones are refused with a '
        'reason (diagnostics and logs show prompts abbreviated anyway).',
        range=(1, 1048576),
    )
    session_id: str = parameter(
        'default', 'Policy session (episode) id; ~/reset starts a fresh one.', runtime=True
    )
    dry_run: bool = parameter(
        False,
        'Publish trajectories only on the preview topic, never to the controller.',
        runtime=True,
    )
    start_enabled: bool = parameter(
        False,
        'Start with commands enabled. Keep false on a real robot: '
        'enable with the ~/enable service.',
    )
    control_rate_hz: float = parameter(
        15.0,
        'Rate of input checks, query scheduling and per-step commands, Hz.',
        range=(0.1, 1000.0),
    )
    diagnostics_period: float = parameter(
        1.0, 'Seconds between /diagnostics and ~/status messages.', range=(0.01, 3600.0)
    )
    # --- inputs
    camera_topics: tuple[str, ...] = parameter(
        tuple(DROID_CAMERAS),
        'Image topics of the cameras named in camera_keys, in that order (DROID: wrist, '
        'exterior 1, exterior 2).',
    )
    camera_keys: tuple[str, ...] = parameter(
        tuple(DROID_CAMERAS),
        "The policy's camera (checkpoint video key) of each of camera_topics; they must be the "
        "cameras the policy reads (DROID's by default).",
    )
    camera_rates_hz: tuple[float, ...] = parameter(
        (15.0,),
        'Expected frame rate of each of camera_topics, Hz (one value: every camera). A camera '
        'received below 0.7 of it is reported (diagnostics, warning); the slowest sets the '
        'max_skew default and the least max_age.',
        range=(0.1, 1000.0),
    )
    camera_qos: CameraQoSSettings = field(default_factory=CameraQoSSettings)
    image_transport: str = parameter(
        'raw',
        'raw: sensor_msgs/Image on each camera topic; compressed: '
        'sensor_msgs/CompressedImage on <topic>/compressed.',
        choices=IMAGE_TRANSPORTS,
    )
    joint_states_topic: str = parameter(
        'joint_states',
        'sensor_msgs/JointState topic (arm and gripper, in one or several messages).',
    )
    arm_joint_names: tuple[str, ...] = parameter(
        tuple(f'panda_joint{i}' for i in range(1, 8)),
        "JointState names of the arm joints in the policy's order (as many as it reads; DROID: "
        '7); also the command joint names.',
    )
    gripper_joint_name: str = parameter(
        'panda_gripper',
        "JointState name of the gripper joint, read through gripper_range as the policy's "
        'gripper state; also the joint of the joint_trajectory gripper command and the gripper '
        'column of ~/action_chunk, never in the arm trajectory (the gripper has its own output, '
        'gripper.interface). Empty for a robot without a gripper.',
    )
    gripper_range: tuple[float, ...] = parameter(
        (0.0, 1.0),
        "Gripper joint positions [open, closed] at the policy's 0 (open) and 1 (closed), "
        "DROID's convention; read from joint_states and sent by the gripper output "
        '(Franka hand finger: [0.04, 0.0]).',
        range=_POSITIONS,
    )
    max_age: float = parameter(
        0.5, 'Seconds after which a camera frame or joint state is stale.', range=(0.001, 3600.0)
    )
    max_skew: float = parameter(
        0.0,
        'Largest allowed spread, seconds, between the stamps of all inputs; a message stamped '
        'further ahead of the clock at its receipt is dropped. 0: from camera_rates_hz, the '
        'larger of 0.2 s and 1.5 periods of the slowest camera; a value not above one period '
        'of the slowest camera is refused at configure.',
        range=_SECONDS,
    )
    image_height: int = parameter(
        0,
        "Height of the frames given to the policy, pixels; 0: the policy's resolution of each "
        'camera (DROID: 180x320; its own size where the policy names none).',
        range=(0, 16384),
    )
    image_width: int = parameter(
        0,
        "Width of the frames given to the policy, pixels; 0: the policy's resolution of each "
        'camera.',
        range=(0, 16384),
    )
    image_fit: str = parameter(
        'letterbox',
        'Camera frames of another size than image_height x image_width: letterbox: resized '
        'keeping the aspect ratio, centred on black bands (as OpenPI clients do); exact: '
        'refused as bad_image.',
        choices=IMAGE_FITS,
    )
    clip_offsets: tuple[float, ...] = parameter(
        (0.0,),
        'Seconds (ascending, ending at 0) relative to the newest frame '
        'of the frames given to the policy per camera; [0.0] gives single frames.',
        range=(-3600.0, 0.0),
    )
    # --- outputs
    trajectory_topic: str = parameter(
        'joint_trajectory_controller/joint_trajectory',
        'trajectory_msgs/JointTrajectory topic of the controller.',
    )
    preview_topic: str = parameter(
        '~/preview_trajectory', 'Every merged trajectory, also in dry run and while disabled.'
    )
    chunk_topic: str = parameter(
        '~/action_chunk',
        'Raw chunks as dreamzero_ros/msg/ActionChunk '
        '(published only where the package messages are built).',
    )
    step_command: StepCommandSettings = field(default_factory=StepCommandSettings)
    envelope: EnvelopeSettings = field(default_factory=EnvelopeSettings)
    plan: PlanSettings = field(default_factory=PlanSettings)
    action_groups: str = parameter(
        '',
        'Controllers of a robot with several groups (arms, grippers, head, base): a YAML file '
        'with a "groups" list mapping each action key to its output, or the tag of a shipped '
        'embodiment file (agibot, yam). Then the joints and outputs come from the groups, and '
        'the safety arrays cover every command column (arm joints, grippers, velocities). '
        'Empty: one arm (arm_joint_names on trajectory_topic) and at most one gripper '
        '(gripper_joint_name, gripper.*).',
    )
    controller_watch: ControllerWatchSettings = field(default_factory=ControllerWatchSettings)
    # --- safety, scheduling, engine, bridge
    gripper: GripperSettings = field(default_factory=GripperSettings)
    safety: SafetySettings = field(default_factory=SafetySettings)
    robot_description: RobotDescriptionSettings = field(default_factory=RobotDescriptionSettings)
    trajectory: TrajectorySettings = field(default_factory=TrajectorySettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    task: TaskSettings = field(default_factory=TaskSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    openpi_bridge: BridgeSettings = field(default_factory=BridgeSettings)
    views: ViewSettings = field(default_factory=ViewSettings)

    def __post_init__(self) -> None:
        keys, topics = self.camera_keys, self.camera_topics
        if len(topics) != len(keys) or not all(topics):
            raise ValueError(
                f'camera_topics needs a topic name for each of camera_keys {list(keys)}, '
                f'got {list(topics)}'
            )
        if not keys or len(set(keys)) != len(keys) or not all(keys):
            raise ValueError(f'camera_keys must be distinct and non-empty, got {list(keys)}')
        if not self.gripper_joint_name and self.gripper.interface != 'none':
            raise ValueError(
                f'gripper.interface {self.gripper.interface!r} needs a gripper_joint_name'
            )
        if (self.image_height == 0) != (self.image_width == 0):
            raise ValueError(
                f'image_height/image_width must both be > 0, or both 0 (any): '
                f'{self.image_height}, {self.image_width}'
            )
        if len(self.prompt) > self.max_prompt_length:
            raise ValueError(prompt_too_long('prompt', self.prompt, self.max_prompt_length))
        self._check_camera_timing()
        if len(self.gripper_range) != 2:
            raise ValueError(f'gripper_range needs 2 values, got {list(self.gripper_range)}')
        try:
            self.group_specs  # noqa: B018 - reads (and so checks) the action groups
        except ValueError as error:
            raise ValueError(f'action_groups: {error}') from error
        widths = {name: len(getattr(self.safety, name)) for name in PER_ARM_JOINT_LIMITS}
        if len(set(widths.values())) > 1:
            raise ValueError(
                'safety.' + '/'.join(PER_ARM_JOINT_LIMITS) + ' need one value per arm joint '
                f'each, got {", ".join(f"{n} {w}" for n, w in widths.items())}'
            )
        if self.action_groups:  # the limits' widths are checked against the policy's groups
            try:
                self.loop  # noqa: B018 - builds (and so checks) the limits
                self.cache  # noqa: B018 - and the cache configuration
            except ValueError as error:
                raise ValueError(f'invalid parameters: {error}') from error
            return
        arm = len(self.arm_joint_names)
        if self.robot_description.source == 'file' and not self.robot_description.file:
            raise ValueError('robot_description.source file needs robot_description.file')
        for name in PER_ARM_JOINT_LIMITS:
            if len(getattr(self.safety, name)) != arm:
                raise ValueError(
                    f'safety.{name} needs one value per arm joint ({arm}), got '
                    f'{list(getattr(self.safety, name))}'
                )
        try:
            limits = self.loop.limits
            self.cache  # noqa: B018 - builds (and so checks) the cache configuration
            self.gripper_config  # noqa: B018 - checks the gripper settings
            self.envelope_config  # noqa: B018 - checks the envelope settings
        except ValueError as error:
            raise ValueError(f'invalid parameters: {error}') from error
        columns = len(self.command_joint_names)
        if limits.lower.shape != (columns,):
            raise ValueError(
                f'safety limits need {columns} values (the {arm} arm joints'
                f'{" and the gripper" if self.gripper_joint_name else ""}), got '
                f'{limits.lower.shape[0]}'
            )

    def _check_camera_timing(self) -> None:
        rates = self.camera_rates_hz
        if len(rates) not in (1, len(self.camera_topics)):
            raise ValueError(
                f'camera_rates_hz needs one value, or one per camera_topics entry '
                f'({len(self.camera_topics)}), got {list(rates)}'
            )
        period = 1.0 / min(rates)
        if self.max_skew and self.max_skew <= period:
            raise ValueError(
                f'max_skew {self.max_skew} s is not longer than one period of the slowest camera '
                f'({min(rates):g} Hz: {period:.3g} s): its frames would be refused as skewed; '
                f'set max_skew > {period:.3g}, or 0 for {self._derived_skew:.3g} s'
            )
        if self.max_age <= period:
            raise ValueError(
                f'max_age {self.max_age} s is not longer than one period of the slowest camera '
                f'({min(rates):g} Hz: {period:.3g} s): its frames would be refused as stale'
            )
        fastest = max(rates)
        needed = math.ceil(fastest / self.control_rate_hz) + 1
        if self.camera_qos.depth < needed:
            raise ValueError(
                f'camera_qos.depth {self.camera_qos.depth} holds fewer frames than a '
                f'{fastest:g} Hz camera sends between two reads at control_rate_hz '
                f'{self.control_rate_hz:g}, plus one: set it >= {needed}'
            )

    @property
    def skew_limit(self) -> float:
        """``max_skew``, or where it is 0 the default derived from ``camera_rates_hz``."""
        return self.max_skew or self._derived_skew

    @property
    def _derived_skew(self) -> float:
        return max(DEFAULT_MAX_SKEW, SKEW_PERIODS / min(self.camera_rates_hz))

    @property
    def camera_rates(self) -> dict[str, float]:
        """Policy camera name -> expected frame rate, Hz."""
        rates = self.camera_rates_hz
        if len(rates) == 1:
            rates = rates * len(self.camera_keys)
        return dict(zip(self.camera_keys, rates, strict=True))

    @functools.cached_property
    def cache(self) -> CacheConfig:
        """The observation cache's configuration, before the policy is known.

        Frames keep their own size unless ``image_height``/``image_width`` say otherwise; see
        :meth:`cache_for` for the policy's resolutions.
        """
        return self.cache_for(None)

    @functools.cached_property
    def group_specs(self) -> tuple[GroupSpec, ...]:
        """The robot's action groups (``action_groups``, or the single arm's parameters)."""
        if self.action_groups:
            return load_groups(self.action_groups, EMBODIMENTS_DIR)
        gripper = self.gripper
        return single_arm_groups(
            self.arm_joint_names,
            self.trajectory_topic,
            self.gripper_joint_name,
            gripper.interface,
            gripper.command_name,
            self.gripper_config,
            gripper.max_effort,
            gripper.move_time,
        )

    def group_layout(self, layout: RobotLayout) -> GroupLayout:
        """The action groups placed on the command row of a policy of ``layout``."""
        return resolve_groups(
            self.group_specs,
            layout.action_keys,
            layout.action_dims,
            layout.arm_columns,
            layout.gripper_columns,
            layout.velocity_columns,
            self.joint_states_topic,
        )

    def cache_for(self, layout: RobotLayout | None) -> CacheConfig:
        """The observation cache's configuration for a policy of ``layout``.

        With ``image_height``/``image_width`` 0, each camera's frames are fitted to the
        policy's resolution of that camera.
        """
        cameras = tuple(self.camera_keys)
        sizes: tuple[tuple[int, int], ...] = ()
        if layout is not None and all(camera in layout.camera_sizes for camera in cameras):
            sizes = tuple(layout.camera_sizes[camera] for camera in cameras)
        arm_joints = self.arm_joint_names
        grippers = (
            ((self.gripper_joint_name, *self.gripper_range),) if self.gripper_joint_name else ()
        )
        if layout is not None:
            groups = self.group_layout(layout)
            arm_joints, grippers = groups.arm_joints, groups.grippers
        elif self.action_groups:
            specs = self.group_specs
            arm_joints = tuple(j for spec in specs if spec.output != 'gripper' for j in spec.joints)
            grippers = tuple(
                (spec.gripper_joint, spec.gripper.open_position, spec.gripper.closed_position)
                for spec in specs
                if spec.output == 'gripper'
            )
        first = grippers[0] if grippers else ('', *self.gripper_range)
        return CacheConfig(
            arm_joints=arm_joints,
            gripper_joint=first[0],
            more_grippers=tuple(grippers[1:]),
            cameras=cameras,
            max_age=self.max_age,
            max_skew=self.skew_limit,
            image_size=(self.image_height, self.image_width) if self.image_height else None,
            camera_sizes=sizes,
            image_fit=self.image_fit,
            gripper_range=(first[1], first[2]),
            clip_offsets=self.clip_offsets,
        )

    def check_policy(self, layout: RobotLayout) -> None:
        """Raise ``ValueError`` unless these parameters can drive a policy of ``layout``."""
        if self.action_groups:  # the groups name the joints: they must fit first
            groups = self._fitted_groups(layout)
            arm_joints, grippers = groups.arm_joints, [g[0] for g in groups.grippers]
        else:
            arm_joints, grippers = self.cache.arm_joints, [g[0] for g in self.cache.grippers]
        source = 'action_groups' if self.action_groups else 'arm_joint_names'
        problems = layout.mismatches(self.camera_keys, arm_joints, grippers, source)
        if problems:
            raise ValueError('the parameters do not fit the policy: ' + '; '.join(problems))
        groups = self._fitted_groups(layout)
        width, arm = layout.command_width, len(layout.arm_columns)
        limits, motion = self.loop.limits, self.loop.motion
        if limits.lower.shape != (width,):
            problems.append(
                f'safety.joint_lower/joint_upper/max_step_delta need {width} values (the '
                f'command columns {groups.command_names}), got {limits.lower.shape[0]}'
            )
        if len(motion.max_velocity) != arm:
            problems.append(
                'safety.'
                + '/'.join(PER_ARM_JOINT_LIMITS)
                + f' need one value per arm joint ({arm}), '
                f'got {len(motion.max_velocity)}'
            )
        if problems:
            raise ValueError('the parameters do not fit the policy: ' + '; '.join(problems))

    def _fitted_groups(self, layout: RobotLayout) -> GroupLayout:
        try:
            return self.group_layout(layout)
        except ValueError as error:
            raise ValueError(f'the action groups do not fit the policy: {error}') from error

    @functools.cached_property
    def loop(self) -> LoopConfig:
        """The control loop's configuration (safety limits, hand-over, pacing)."""
        safety, scheduler = self.safety, self.scheduler
        return LoopConfig(
            limits=SafetyLimits(
                lower=np.array(safety.joint_lower, dtype=np.float64),
                upper=np.array(safety.joint_upper, dtype=np.float64),
                max_step_delta=np.array(safety.max_step_delta, dtype=np.float64),
                delta_mode=safety.delta_mode,
                outside_limits=safety.outside_limits,
            ),
            blend=BlendConfig(scheduler.blend_min_steps, scheduler.blend_max_steps),
            min_replan_period=scheduler.min_replan_period,
            step_duration=scheduler.step_duration,
            motion=MotionConfig(
                max_velocity=np.array(safety.max_velocity, dtype=np.float64),
                stop_deceleration=np.minimum(safety.stop_deceleration, safety.max_acceleration),
                lead=self.trajectory.handover_lead,
                hold_time=1.0 / self.control_rate_hz,
                max_stretch=self.trajectory.max_stretch,
                max_acceleration=np.array(safety.max_acceleration, dtype=np.float64),
                max_jerk=np.array(safety.max_jerk, dtype=np.float64),
            ),
        )

    def loop_for(
        self, description: RobotDescription | None, arm_joints: Sequence[str] | None = None
    ) -> tuple[LoopConfig, str]:
        """The control loop's configuration with ``description``'s arm limits, and a log line.

        ``arm_joints``: the joint of each arm column (default: the single arm's
        ``arm_joint_names``, or every trajectory group's joints in the groups' order; the
        node passes the command row's order once the policy is loaded). Without a
        description: :attr:`loop` (the safety.* limits as typed).

        Raises:
            ValueError: the description lacks an arm joint or its limits, or a safety.* value
                that differs from its default is wider than the description's bound.

        """
        if description is None:
            return self.loop, 'no robot description: joint limits from the safety.* parameters'
        arm_joints = tuple(self.cache_for(None).arm_joints if arm_joints is None else arm_joints)
        arm = len(arm_joints)

        def limits(safety: SafetySettings) -> ArmLimits:
            def column(values: tuple[float, ...]) -> tuple[float, ...]:
                return tuple(values[i] if i < len(values) else float('nan') for i in range(arm))

            return ArmLimits(
                column(safety.joint_lower),
                column(safety.joint_upper),
                column(safety.max_velocity),
                column(safety.max_acceleration),
                column(safety.max_jerk),
            )

        resolved = resolve_arm_limits(
            description, arm_joints, limits(self.safety), limits(SafetySettings())
        )
        where = description.source or 'robot description'
        return (
            with_arm_limits(self.loop, resolved.limits),
            f'joint limits of {arm} arm joints from {where} ({description.name!r}): '
            + resolved.summary(),
        )

    @functools.cached_property
    def envelope_config(self) -> EnvelopeConfig:
        """The Cartesian envelope (``envelope.*``), checked whether enabled or not."""
        envelope = self.envelope
        boxes = np.asarray(envelope.keep_out, dtype=np.float64)
        if boxes.size % 6:
            raise ValueError(f'envelope.keep_out needs 6 values per box, got {boxes.size} values')
        try:
            return EnvelopeConfig(
                links=envelope.links,
                offsets=envelope.link_offsets,
                frame=envelope.frame,
                workspace_min=envelope.workspace_min,
                workspace_max=envelope.workspace_max,
                table_height=envelope.table_height,
                keep_out=tuple((box[:3], box[3:]) for box in boxes.reshape(-1, 6)),
                resolution=envelope.resolution,
            )
        except ValueError as error:
            raise ValueError(f'envelope: {error}') from None

    @functools.cached_property
    def gripper_config(self) -> GripperConfig:
        """The gripper command's position range and switching rule."""
        gripper = self.gripper
        return GripperConfig(
            open_position=self.gripper_range[0],
            closed_position=self.gripper_range[1],
            binary=gripper.binary,
            close_above=gripper.close_above,
            open_below=gripper.open_below,
            min_change=gripper.min_change,
        )

    @property
    def cameras(self) -> dict[str, str]:
        """Policy camera name -> image topic."""
        return dict(zip(self.camera_keys, self.camera_topics, strict=True))

    @property
    def command_joint_names(self) -> list[str]:
        """Names of the command columns: the arm joints, then the gripper (if any)."""
        gripper = [self.gripper_joint_name] if self.gripper_joint_name else []
        return [*self.arm_joint_names, *gripper]

    def gripper_to_joint(self, rows: np.ndarray) -> np.ndarray:
        """Policy rows -> command rows: the gripper column mapped from [0, 1] to joint units."""
        out = np.array(rows, dtype=np.float64, copy=True)
        if self.gripper_joint_name:
            low, high = self.gripper_range
            out[..., -1] = low + out[..., -1] * (high - low)
        return out


#: Every parameter the node declares, in declaration order.
PARAMETERS: tuple[ParameterSpec, ...] = parameter_specs(NodeSettings)

#: Parameters rclpy declares on every node; allowed in parameter files.
BUILTIN_PARAMETERS = frozenset({'use_sim_time', 'start_type_description_service'})

_SPECS = {spec.name: spec for spec in PARAMETERS}


def defaults() -> dict[str, Any]:
    """``name -> default`` of every declared parameter."""
    return {spec.name: spec.default for spec in PARAMETERS}


#: Parameters that are no longer declared -> what replaces them (named in the error).
RETIRED_PARAMETERS = {
    'engine.remote_api_key': 'engine.remote_api_key_file or $DREAMZERO_REMOTE_API_KEY',
    'openpi_bridge.api_key': 'openpi_bridge.api_key_file or $DREAMZERO_OPENPI_API_KEY',
}


def unknown_parameters(names: Iterable[str]) -> list[str]:
    """The names that are neither declared by the node nor built into rclpy, sorted."""
    return sorted(
        name
        for name in names
        if name not in _SPECS
        and name not in BUILTIN_PARAMETERS
        and not name.startswith('qos_overrides.')
    )


def unknown_parameters_message(unknown: list[str]) -> str:
    """``unknown parameters [...]``, with what replaces any retired one."""
    hints = [
        f'; {name} is replaced by {RETIRED_PARAMETERS[name]} (a parameter is readable by any '
        'DDS participant)'
        for name in unknown
        if name in RETIRED_PARAMETERS
    ]
    return f'unknown parameters {unknown}' + ''.join(hints)


def read_params_file(path: str | Path, node_name: str = NODE_NAME) -> dict[str, Any]:
    """Read the parameters a ``ros__parameters`` YAML gives ``node_name`` (``/**`` included).

    Sections apply in file order, as rcl applies them; nested maps flatten to dotted names.

    The file is read with the bounds of every configuration file (size, depth, nodes with
    aliases expanded: :func:`~dreamzero_ros.engine.checkpoint.data_files.read_yaml`).

    Raises:
        ValueError: the file is missing, unreadable, not YAML, beyond those bounds or not a map
            of node sections; it has no section for the node or names unknown parameters.

    """
    document = read_yaml(Path(path), ValueError) or {}
    if not isinstance(document, dict):
        raise ValueError(
            f'{path}: expected a map of node sections ("/**:" with ros__parameters), got a '
            f'{type(document).__name__}'
        )
    values: dict[str, Any] = {}
    matched = False
    for key, section in document.items():
        if key.lstrip('/') not in ('**', node_name) or not isinstance(section, dict):
            continue
        matched = True
        values.update(_flatten(section.get('ros__parameters') or {}))
    if not matched:
        raise ValueError(f'{path}: no "/**:" or "{node_name}:" ros__parameters section')
    unknown = unknown_parameters(values)
    if unknown:
        raise ValueError(f'{path}: {unknown_parameters_message(unknown)}')
    return values


def _flatten(tree: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f'{prefix}{key}'
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f'{name}.'))
        else:
            flat[name] = value
    return flat


def build_settings(values: Mapping[str, Any]) -> NodeSettings:
    """Check a ``name -> value`` parameter mapping (defaults for the rest) and build the settings.

    Raises:
        ValueError: an unknown name, or a bad value, naming the parameter.

    """
    unknown = unknown_parameters(values)
    if unknown:
        raise ValueError(unknown_parameters_message(unknown))
    return build(NodeSettings, values)
