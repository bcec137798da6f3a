# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's parameters, declared once: the settings tree its parameters come from.

Every parameter is a :func:`~dreamzero_ros.parameter_schema.parameter` field (default,
description, range, choices, whether it may change at run time) of :class:`NodeParameters` or
of one of its groups; the node declares exactly these
(:data:`~dreamzero_ros.core.config.node_config.PARAMETERS`), as joint_trajectory_controller declares
the parameters generate_parameter_library makes from its YAML. The views', plan views' and
controller watch's groups are declared beside the code they drive. Nothing here checks one
parameter against another (:mod:`~dreamzero_ros.core.config.node_validation`) or builds anything
from them (:class:`~dreamzero_ros.core.config.node_settings.NodeSettings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamzero_ros.core.control.controller_watch import ControllerWatchSettings
from dreamzero_ros.core.motion.envelope import EnvelopeConfig
from dreamzero_ros.core.motion.plan_geometry import PlanSettings
from dreamzero_ros.core.motion.safety import DELTA_MODES, OUTSIDE_LIMITS_MODES
from dreamzero_ros.core.observations.imagination import ViewSettings
from dreamzero_ros.core.observations.observation_cache import IMAGE_FITS
from dreamzero_ros.core.robot.description_bounds import DescriptionBounds
from dreamzero_ros.core.robot.gripper import GRIPPER_INTERFACES
from dreamzero_ros.core.robot.panda import (
    PANDA_ARM_JOINTS,
    PANDA_LOWER,
    PANDA_MAX_ACCELERATION,
    PANDA_MAX_JERK,
    PANDA_MAX_VELOCITY,
    PANDA_STOP_DECELERATION,
    PANDA_UPPER,
)
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.parameter_schema import parameter
from dreamzero_ros.policy_types import DROID_CAMERAS

#: How camera images travel (``image_transport``): Image, or CompressedImage on ``/compressed``.
IMAGE_TRANSPORTS = ('raw', 'compressed')
#: The safety.* limits with one value per arm joint.
PER_ARM_JOINT_LIMITS = ('max_velocity', 'stop_deceleration', 'max_acceleration', 'max_jerk')

# Ranges of the number parameters (inclusive); arrays apply them to each element.
_SECONDS = (0.0, 3600.0)
#: Positions: rad (or m for a prismatic joint), and gripper units.
POSITIONS = (-10.0, 10.0)
_METRES = (-100.0, 100.0)
_PORT = (0, 65535)
_ENVELOPE_DEFAULT = EnvelopeConfig()


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
        range=POSITIONS,
    )
    joint_upper: tuple[float, ...] = parameter(
        PANDA_UPPER, 'Upper position limits, same layout.', range=POSITIONS
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
        choices=GRIPPER_INTERFACES,
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
class NodeParameters:
    """Every parameter of the policy node, declared once: type, default, description, range.

    Groups are nested declarations (``engine.checkpoint`` is the field ``checkpoint`` of
    ``engine``). :class:`~dreamzero_ros.core.config.node_settings.NodeSettings` adds the checks
    between parameters and the core configurations built from them.
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
        PANDA_ARM_JOINTS,
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
        range=POSITIONS,
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
