# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every parameter of the policy node: name, default, description; and the settings they make.

The node declares exactly :data:`PARAMETERS` (with these descriptions); a parameter file or
override naming anything else is an error (:func:`unknown_parameters`). :func:`build_settings`
turns a complete ``name -> value`` mapping into the typed pieces the core uses, raising
``ValueError`` naming the offending parameter. Nothing here imports ROS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dreamzero_ros.core.chunk_scheduler import BlendConfig
from dreamzero_ros.core.control_loop import LoopConfig
from dreamzero_ros.core.observation_cache import CacheConfig
from dreamzero_ros.core.safety import DELTA_MODES, SafetyLimits
from dreamzero_ros.policy_types import DROID_CAMERAS

#: Default node name (the launch file and the console script use it).
NODE_NAME = 'dreamzero_policy'

#: Franka Panda limits (radians) and the normalised gripper, in action-column order.
PANDA_LOWER = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973, 0.0]
PANDA_UPPER = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973, 1.0]


@dataclass(frozen=True)
class ParameterSpec:
    """One declared parameter."""

    name: str
    default: Any
    description: str
    choices: tuple[str, ...] = ()


def _spec(name: str, default: Any, description: str, choices: Iterable[str] = ()) -> ParameterSpec:
    return ParameterSpec(name, default, description, tuple(choices))


PARAMETERS: tuple[ParameterSpec, ...] = (
    # --- lifecycle and task
    _spec(
        'autostart',
        True,
        'Configure and activate at start-up instead of waiting for lifecycle transitions.',
    ),
    _spec(
        'prompt',
        '',
        'Task instruction given to the policy; settable at run time (also via '
        'the latched ~/prompt topic).',
    ),
    _spec('session_id', 'default', 'Policy session (episode) id; ~/reset starts a fresh one.'),
    _spec(
        'dry_run', False, 'Publish trajectories only on the preview topic, never to the controller.'
    ),
    _spec(
        'start_enabled',
        False,
        'Start with commands enabled. Keep false on a real robot: '
        'enable with the ~/enable service.',
    ),
    _spec(
        'control_rate_hz', 15.0, 'Rate of input checks, query scheduling and per-step commands, Hz.'
    ),
    _spec('diagnostics_period', 1.0, 'Seconds between /diagnostics and ~/status messages.'),
    # --- inputs
    _spec(
        'camera_topics',
        [f'{camera}' for camera in DROID_CAMERAS],
        'Image topics of the wrist, exterior 1 and exterior 2 cameras, in that order.',
    ),
    _spec(
        'image_transport',
        'raw',
        'raw: sensor_msgs/Image on each camera topic; compressed: '
        'sensor_msgs/CompressedImage on <topic>/compressed.',
        ('raw', 'compressed'),
    ),
    _spec(
        'joint_states_topic',
        'joint_states',
        'sensor_msgs/JointState topic (arm and gripper, in one or several messages).',
    ),
    _spec(
        'arm_joint_names',
        [f'panda_joint{i}' for i in range(1, 8)],
        'JointState names of the 7 arm joints in DROID order; also the command joint names.',
    ),
    _spec(
        'gripper_joint_name',
        'panda_gripper',
        'JointState name of the gripper joint; also its command name.',
    ),
    _spec(
        'gripper_range',
        [0.0, 1.0],
        "Gripper joint positions [a, b] mapped onto the policy's [0, 1] (and back for commands).",
    ),
    _spec('max_age', 0.5, 'Seconds after which a camera frame or joint state is stale.'),
    _spec('max_skew', 0.2, 'Largest allowed spread, seconds, between the stamps of all inputs.'),
    _spec('image_height', 180, 'Required camera image height, pixels; 0 accepts any.'),
    _spec('image_width', 320, 'Required camera image width, pixels; 0 accepts any.'),
    _spec(
        'clip_offsets',
        [0.0],
        'Seconds (ascending, ending at 0) relative to the newest frame '
        'of the frames given to the policy per camera; [0.0] gives single frames.',
    ),
    # --- outputs
    _spec(
        'trajectory_topic',
        'joint_trajectory_controller/joint_trajectory',
        'trajectory_msgs/JointTrajectory topic of the controller.',
    ),
    _spec(
        'preview_topic',
        '~/preview_trajectory',
        'Every merged trajectory, also in dry run and while disabled.',
    ),
    _spec(
        'chunk_topic',
        '~/action_chunk',
        'Raw chunks as dreamzero_ros_interfaces/ActionChunk '
        '(published only where that package is importable).',
    ),
    _spec('step_command.enabled', False, 'Also publish the command of each control step.'),
    _spec(
        'step_command.type',
        'float64_multi_array',
        'Per-step message type.',
        ('float64_multi_array', 'joint_state'),
    ),
    _spec(
        'step_command.topic',
        'forward_position_controller/commands',
        'Topic of the per-step commands.',
    ),
    # --- safety and scheduling
    _spec(
        'safety.joint_lower',
        PANDA_LOWER,
        'Lower position limits: 7 joints (rad) then the gripper (policy units 0..1).',
    ),
    _spec('safety.joint_upper', PANDA_UPPER, 'Upper position limits, same layout.'),
    _spec(
        'safety.max_step_delta', [0.1] * 7 + [1.0], 'Largest change per control step, same layout.'
    ),
    _spec(
        'safety.delta_mode',
        'clamp',
        'clamp: rate-limit steps beyond max_step_delta; refuse: drop the chunk and hold.',
        DELTA_MODES,
    ),
    _spec(
        'scheduler.step_duration',
        0.0,
        "Seconds between action rows; 0 keeps the policy's (1/15 s for DROID). A larger value "
        'plays chunks in slow motion, for CPU profiles whose chunks take longer than their '
        'horizon.',
    ),
    _spec(
        'scheduler.min_replan_period',
        0.0,
        'Least seconds between queries; 0 queries again as soon as a chunk arrives.',
    ),
    _spec('scheduler.blend_min_steps', 2, 'Shortest hand-over from the executing plan, steps.'),
    _spec(
        'scheduler.blend_max_steps',
        12,
        'Longest hand-over, steps; the measured latency '
        'chooses between the two; 0 disables blending.',
    ),
    # --- engine
    _spec(
        'engine.backend',
        'local',
        'local: DreamZeroEngine in this process; remote: an OpenPI server at engine.remote_uri.',
        ('local', 'remote'),
    ),
    _spec(
        'engine.checkpoint',
        '',
        'Folder of a DreamZero checkpoint (config.json, safetensors, '
        'experiment_cfg/metadata.json).',
    ),
    _spec('engine.device', 'cpu', 'Torch device of rank 0, e.g. cpu or cuda:0.'),
    _spec(
        'engine.dtype',
        'float32',
        'Weight and activation dtype.',
        ('float32', 'bfloat16', 'float16'),
    ),
    _spec('engine.num_threads', 0, 'torch CPU threads; 0 leaves the default.'),
    _spec(
        'engine.step_cache',
        'static',
        'Which denoising steps run the DiT: static (upstream default, 8 of 16), dynamic '
        '(skips steps whose velocities agree) or full (all 16, the reference).',
        ('static', 'dynamic', 'full'),
    ),
    _spec(
        'engine.compile',
        False,
        'torch.compile the DiT blocks and VAE norms '
        '(GPU: ~30-40 s more warm-up, 0.69x the chunk time).',
    ),
    _spec(
        'engine.fp8_linear',
        'off',
        'DiT block linears in FP8 e4m3 on Hopper GPUs (needs bfloat16); off is the reference.',
        ('off', 'rowwise', 'tensorwise'),
    ),
    _spec(
        'engine.attention_backend',
        'auto',
        'Attention kernel: auto (torch chooses), cudnn, flash, efficient, math, or fa3 '
        '(FlashAttention-3 on Hopper; needs the flash_attn_3 package).',
        ('auto', 'cudnn', 'flash', 'efficient', 'math', 'fa3'),
    ),
    _spec(
        'engine.cfg_parallel',
        1,
        'CFG-parallel world size: 2 runs the unconditional branch '
        'in a dreamzero-engine-worker process (rank 1).',
    ),
    _spec('engine.master_addr', '127.0.0.1', 'torch.distributed rendezvous address.'),
    _spec('engine.master_port', 29512, 'torch.distributed rendezvous port.'),
    _spec(
        'engine.warmup',
        True,
        'Run one inference at configure time so that the first chunk is not slow.',
    ),
    _spec('engine.remote_uri', 'ws://127.0.0.1:8000', 'OpenPI server URI (engine.backend remote).'),
    _spec('engine.remote_api_key', '', 'API key sent to the remote OpenPI server, if any.'),
    # --- OpenPI bridge
    _spec(
        'openpi_bridge.enabled', False, 'Also serve the engine over the OpenPI WebSocket protocol.'
    ),
    _spec('openpi_bridge.host', '127.0.0.1', 'Bridge bind address.'),
    _spec('openpi_bridge.port', 8000, 'Bridge TCP port.'),
    _spec('openpi_bridge.api_key', '', 'Required Api-Key of bridge clients; empty accepts all.'),
)

#: Parameters rclpy declares on every node; allowed in parameter files.
BUILTIN_PARAMETERS = frozenset({'use_sim_time', 'start_type_description_service'})

_SPECS = {spec.name: spec for spec in PARAMETERS}


def defaults() -> dict[str, Any]:
    """``name -> default`` of every declared parameter."""
    return {spec.name: spec.default for spec in PARAMETERS}


def unknown_parameters(names: Iterable[str]) -> list[str]:
    """The names that are neither declared by the node nor built into rclpy, sorted."""
    return sorted(
        name
        for name in names
        if name not in _SPECS
        and name not in BUILTIN_PARAMETERS
        and not name.startswith('qos_overrides.')
    )


def read_params_file(path: str | Path, node_name: str = NODE_NAME) -> dict[str, Any]:
    """Read the parameters a ``ros__parameters`` YAML gives ``node_name`` (``/**`` included).

    Sections apply in file order, as rcl applies them; nested maps flatten to dotted names.

    Raises:
        ValueError: the file has no section for the node or names unknown parameters.

    """
    import yaml

    document = yaml.safe_load(Path(path).read_text()) or {}
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
        raise ValueError(f'{path}: unknown parameters {unknown}')
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


@dataclass(frozen=True)
class NodeSettings:
    """The checked, typed view of all parameters."""

    values: Mapping[str, Any]
    cache: CacheConfig
    loop: LoopConfig
    camera_topics: dict[str, str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def command_joint_names(self) -> list[str]:
        """Names of the command columns: the arm joints, then the gripper."""
        return [*self.cache.arm_joints, self.cache.gripper_joint]

    def gripper_to_joint(self, rows: np.ndarray) -> np.ndarray:
        """Policy rows -> command rows: the gripper column mapped from [0, 1] to joint units."""
        low, high = self.cache.gripper_range
        out = np.array(rows, dtype=np.float64, copy=True)
        out[..., -1] = low + out[..., -1] * (high - low)
        return out


def build_settings(values: Mapping[str, Any]) -> NodeSettings:
    """Check a complete parameter mapping and build the core configuration from it."""
    unknown = unknown_parameters(values)
    if unknown:
        raise ValueError(f'unknown parameters {unknown}')
    merged = {**defaults(), **values}
    for name, spec in _SPECS.items():
        if spec.choices and merged[name] not in spec.choices:
            raise ValueError(f'{name} must be one of {list(spec.choices)}, got {merged[name]!r}')
    for name in ('control_rate_hz', 'diagnostics_period', 'max_age'):
        if not merged[name] > 0:
            raise ValueError(f'{name} must be > 0, got {merged[name]}')
    topics = list(merged['camera_topics'])
    if len(topics) != len(DROID_CAMERAS) or not all(topics):
        raise ValueError(f'camera_topics needs {len(DROID_CAMERAS)} topic names, got {topics}')
    height, width = int(merged['image_height']), int(merged['image_width'])
    if (height == 0) != (width == 0) or height < 0 or width < 0:
        raise ValueError(
            f'image_height/image_width must both be > 0, or both 0 (any): {height}, {width}'
        )
    gripper_range = tuple(float(v) for v in merged['gripper_range'])
    if len(gripper_range) != 2:
        raise ValueError(f'gripper_range needs 2 values, got {list(gripper_range)}')
    try:
        cache = CacheConfig(
            arm_joints=tuple(merged['arm_joint_names']),
            gripper_joint=str(merged['gripper_joint_name']),
            max_age=float(merged['max_age']),
            max_skew=float(merged['max_skew']),
            image_size=(height, width) if height else None,
            gripper_range=gripper_range,
            clip_offsets=tuple(float(v) for v in merged['clip_offsets']),
        )
        limits = SafetyLimits(
            lower=np.array(merged['safety.joint_lower'], dtype=np.float64),
            upper=np.array(merged['safety.joint_upper'], dtype=np.float64),
            max_step_delta=np.array(merged['safety.max_step_delta'], dtype=np.float64),
            delta_mode=merged['safety.delta_mode'],
        )
        loop = LoopConfig(
            limits=limits,
            blend=BlendConfig(
                int(merged['scheduler.blend_min_steps']), int(merged['scheduler.blend_max_steps'])
            ),
            min_replan_period=float(merged['scheduler.min_replan_period']),
            step_duration=float(merged['scheduler.step_duration']),
        )
    except ValueError as error:
        raise ValueError(f'invalid parameters: {error}') from error
    if limits.lower.shape != (len(cache.arm_joints) + 1,):
        raise ValueError(
            f'safety limits need {len(cache.arm_joints) + 1} values (7 joints and '
            f'the gripper), got {limits.lower.shape[0]}'
        )
    if int(merged['engine.cfg_parallel']) < 1:
        raise ValueError(f'engine.cfg_parallel must be >= 1, got {merged["engine.cfg_parallel"]}')
    if merged['engine.backend'] == 'local' and not merged['engine.checkpoint']:
        raise ValueError('engine.checkpoint is required with engine.backend local')
    return NodeSettings(merged, cache, loop, dict(zip(DROID_CAMERAS, topics, strict=True)))
