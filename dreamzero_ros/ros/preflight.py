# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-preflight``: check a live robot system before the policy node's first enable.

Reads the node's parameters (``--params-file``, ``-p name:=value``), listens for ``--duration``
seconds, and prints one line per check (core/preflight.py) with what to fix: every camera topic
publishing at ``control_rate_hz`` or faster and decodable, ``joint_states`` at that rate with
the configured joints, the robot description (``robot_description.*``) naming them, the arm's
pose inside the safety envelope (with ``envelope.enabled``), a subscriber on
``trajectory_topic``, the gripper action server (with ``gripper.interface: action``), and the
engine's memory on its GPU. Exit code 0 when every check passed, 1 when one failed, 2 when the
arguments or parameters are invalid (the parameter file missing, unreadable or not a
``ros__parameters`` map within the bounds of every configuration file included).

    ros2 run dreamzero_ros dreamzero-preflight --params-file config/droid.yaml
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any
import xml.etree.ElementTree as ElementTree

import numpy as np

from dreamzero_ros.cli_options import (
    add_node_name,
    add_node_parameter_options,
    new_parser,
    seconds,
)
from dreamzero_ros.console import add_debug_option, run_tool
from dreamzero_ros.core import preflight
from dreamzero_ros.core.envelope import Envelope
from dreamzero_ros.core.node_config import NODE_NAME, NodeSettings, build_settings, read_params_file
from dreamzero_ros.core.preflight import Check

#: Longest --duration: a preflight listens for seconds, not for hours.
MAX_DURATION_S = 600.0


def _settings(options: argparse.Namespace) -> NodeSettings:
    values = read_params_file(options.params_file, options.node_name) if options.params_file else {}
    values.update(options.param)
    return build_settings(values)


class _Listener:
    """Subscriptions recording arrivals of each camera and the newest joint state."""

    def __init__(self, node: Any, settings: NodeSettings) -> None:
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState

        compressed = settings.image_transport == 'compressed'
        self.arrivals: dict[str, list[float]] = {}
        self.frames: dict[str, Any] = {}
        self.joint_names: set[str] = set()
        self.joints: dict[str, float] = {}
        for topic in settings.camera_topics:
            name = f'{topic}/compressed' if compressed else topic
            self.arrivals[name] = []
            node.create_subscription(
                CompressedImage if compressed else Image,
                name,
                lambda msg, name=name: self._frame(name, msg),
                qos_profile_sensor_data,
            )
        self.joint_topic = settings.joint_states_topic
        self.arrivals[self.joint_topic] = []
        node.create_subscription(
            JointState, self.joint_topic, self._joint_state, qos_profile_sensor_data
        )

    def _frame(self, topic: str, msg: Any) -> None:
        self.arrivals[topic].append(time.monotonic())
        self.frames[topic] = msg

    def _joint_state(self, msg: Any) -> None:
        self.arrivals[self.joint_topic].append(time.monotonic())
        self.joint_names.update(msg.name)
        self.joints.update(zip(msg.name, msg.position, strict=False))


def _image_checks(listener: _Listener, settings: NodeSettings, window: float) -> list[Check]:
    from dreamzero_ros.ros.image_decoding import decode_image

    checks = []
    for topic, arrivals in listener.arrivals.items():
        checks.append(preflight.topic_rate(topic, arrivals, settings.control_rate_hz, window))
        if topic in listener.frames:
            msg = listener.frames[topic]
            encoding = getattr(msg, 'encoding', '') or getattr(msg, 'format', '')
            try:
                decode_image(msg)
                error = None
            except Exception as failure:  # noqa: BLE001 - any decode failure is the finding
                error = str(failure)
            checks.append(preflight.image_decodes(topic, error, encoding))
    return checks


def _description(node: Any, settings: NodeSettings) -> tuple[str | None, Check]:
    from dreamzero_ros.ros.robot_description import load_description

    fix = (
        'set robot_description.source to topic (start robot_state_publisher with the robot '
        'URDF) or to file (robot_description.file)'
    )
    try:
        description = load_description(node, settings.robot_description)
    except ValueError as error:
        return None, Check('robot description', False, str(error), fix)
    if description is None:  # needed by the envelope only; the typed safety.* limits apply
        needed = settings.envelope.enabled
        text = 'none (robot_description.source none): the typed safety.* limits apply'
        return None, Check('robot description', not needed, text, fix if needed else '')
    text = f'{len(description.urdf)} characters from {description.source}'
    return description.urdf, Check('robot description', True, text)


def run_checks(node: Any, settings: NodeSettings, window: float) -> list[Check]:
    """Listen for ``window`` seconds, then check everything."""
    import rclpy
    from rclpy.action import get_action_names_and_types

    listener = _Listener(node, settings)
    end = time.monotonic() + window
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    checks = _image_checks(listener, settings, window)
    urdf, described = _description(node, settings)
    checks.append(described)
    joints = None
    if urdf is not None:
        root = ElementTree.fromstring(urdf)
        joints = [joint.get('name') for joint in root.iter('joint')]
    checks += preflight.joint_names(
        listener.joint_names, settings.arm_joint_names, settings.gripper_joint_name, joints
    )
    arm = settings.arm_joint_names
    if settings.envelope.enabled and urdf is not None and all(j in listener.joints for j in arm):
        try:
            envelope = Envelope.from_description(urdf, arm, settings.envelope_config)
        except ValueError as error:
            checks.append(
                Check('pose in envelope', False, str(error), 'fix envelope.* or the description')
            )
        else:
            position = np.array([listener.joints[name] for name in arm])
            checks.append(preflight.pose_in_envelope(envelope, position))
    topic = node.resolve_topic_name(settings.trajectory_topic)
    checks.append(
        preflight.trajectory_subscribed(topic, node.count_subscribers(topic), settings.dry_run)
    )
    if settings.gripper.interface == 'action':
        servers = [name for name, _ in get_action_names_and_types(node)]
        name = node.resolve_topic_name(settings.gripper.command_name)
        checks.append(preflight.action_server(name, servers))
    checks.append(preflight.engine_memory(settings.engine))
    return checks


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-preflight``."""
    return run_tool('dreamzero-preflight', _preflight, args)


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-preflight``."""
    parser = new_parser(
        'dreamzero-preflight',
        "Check a live robot system before the policy node's first enable.",
        epilog='exit codes: 0 every check passed, 1 a check failed, 2 invalid arguments or '
        'parameters (a missing, unreadable or invalid --params-file included), 130 interrupted',
    )
    add_node_parameter_options(parser)
    add_node_name(parser, NODE_NAME, 'its section in the parameter file')
    parser.add_argument(
        '--duration',
        type=seconds(MAX_DURATION_S),
        default=3.0,
        metavar='SECONDS',
        help=f'seconds to listen, more than 0 and at most {MAX_DURATION_S:g}',
    )
    add_debug_option(parser)
    return parser


def _preflight(args: list[str]) -> int:
    options = build_parser().parse_args(args)
    try:
        settings = _settings(options)
    except ValueError as error:
        print(f'[FAIL] parameters: {error}')
        return 2
    print(
        f'dreamzero-preflight: listening {options.duration:g} s to the cameras and joint states, '
        'then checking',
        file=sys.stderr,
        flush=True,
    )
    import rclpy

    rclpy.init(args=['dreamzero-preflight'])
    try:
        node = rclpy.create_node('dreamzero_preflight')
        checks = run_checks(node, settings, options.duration)
    finally:
        rclpy.try_shutdown()
    for check in checks:
        print(check.line())
    failed = sum(not check.ok for check in checks)
    print(f'{len(checks) - failed} of {len(checks)} checks passed')
    return preflight.exit_code(checks)


if __name__ == '__main__':
    sys.exit(main())
