# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-preflight``: check a live robot system before the policy node's first enable.

Reads the node's parameters (``--params-file``, ``-p name:=value``), waits for a publisher of every
topic (``--discovery-timeout`` seconds at most), listens for ``--duration`` seconds, and prints one
line per check (core/processes/preflight.py, core/processes/preflight_groups.py) with what to fix:
every camera topic publishing at ``control_rate_hz`` or faster and decodable; for every action group
(``action_groups``, or the single arm and gripper of the parameters) its joints in the joint states
of its topic (each at that rate), its controller by the rule ``~/enable`` applies
(ros/controller_monitor.py) and the joints that controller was configured with, a base's odometry;
the robot description (``robot_description.*``) naming the arm joints, the arm's pose inside the
safety envelope (with ``envelope.enabled``), and the engine's memory on its GPU. Exit code 0 when
every check passed, 1 when one failed, 2 when the arguments or parameters are invalid (the parameter
file missing, unreadable or not a ``ros__parameters`` map within the bounds of every configuration
file included).

    ros2 run dreamzero_ros dreamzero-preflight --params-file config/droid.yaml
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import math
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
from dreamzero_ros.core.config.node_config import NODE_NAME, build_settings, read_params_file
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.control.controller_watch import odometry_problem
from dreamzero_ros.core.motion.envelope import Envelope
from dreamzero_ros.core.processes import preflight, preflight_groups
from dreamzero_ros.core.processes.preflight import Check

#: Longest --duration: a preflight listens for seconds, not for hours.
MAX_DURATION_S = 600.0
#: Longest --discovery-timeout: DDS discovery takes seconds where it works at all.
MAX_DISCOVERY_S = 120.0


def _settings(options: argparse.Namespace) -> NodeSettings:
    values = read_params_file(options.params_file, options.node_name) if options.params_file else {}
    values.update(options.param)
    return build_settings(values)


class _Listener:
    """Subscriptions recording arrivals of each camera, joint-state and odometry topic."""

    def __init__(self, node: Any, settings: NodeSettings) -> None:
        from nav_msgs.msg import Odometry
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState

        compressed = settings.image_transport == 'compressed'
        self.arrivals: dict[str, list[float]] = {}
        self.frames: dict[str, Any] = {}
        #: Joint-state topic -> the names it published; every joint's newest position.
        self.joint_names: dict[str, set[str]] = {}
        self.joints: dict[str, float] = {}
        #: Odometry topic -> its newest message.
        self.odometry: dict[str, Any] = {}
        for topic in settings.camera_topics:
            name = f'{topic}/compressed' if compressed else topic
            self.arrivals[name] = []
            node.create_subscription(
                CompressedImage if compressed else Image,
                name,
                lambda msg, name=name: self._frame(name, msg),
                qos_profile_sensor_data,
            )
        specs = settings.group_specs
        for topic in preflight_groups.state_topics(specs, settings.joint_states_topic):
            self.arrivals[topic], self.joint_names[topic] = [], set()
            node.create_subscription(
                JointState,
                topic,
                lambda msg, topic=topic: self._joint_state(topic, msg),
                qos_profile_sensor_data,
            )
        for spec in specs:
            if spec.output == 'twist' and spec.odometry:
                self.arrivals[spec.odometry] = []
                node.create_subscription(
                    Odometry,
                    spec.odometry,
                    lambda msg, topic=spec.odometry: self._odometry(topic, msg),
                    qos_profile_sensor_data,
                )

    def _frame(self, topic: str, msg: Any) -> None:
        self.arrivals[topic].append(time.monotonic())
        self.frames[topic] = msg

    def _joint_state(self, topic: str, msg: Any) -> None:
        self.arrivals[topic].append(time.monotonic())
        self.joint_names[topic].update(msg.name)
        self.joints.update(zip(msg.name, msg.position, strict=False))

    def _odometry(self, topic: str, msg: Any) -> None:
        self.arrivals[topic].append(time.monotonic())
        self.odometry[topic] = msg


def _image_checks(
    listener: _Listener, settings: NodeSettings, window: float, publishers: dict[str, int]
) -> list[Check]:
    from dreamzero_ros.ros.image_decoding import decode_image

    checks = []
    for topic, arrivals in listener.arrivals.items():
        rate = preflight.topic_rate(
            topic, arrivals, settings.control_rate_hz, window, publishers[topic]
        )
        checks.append(rate)
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


def _group_checks(node: Any, settings: NodeSettings, listener: _Listener) -> list[Check]:
    """Every group's joints, controller, the controller's joints, a base's odometry."""
    from dreamzero_ros.ros.controller_monitor import (
        axis_values,
        configured_joints,
        find_controllers,
        resolved_claims,
    )

    specs = settings.group_specs
    checks = []
    for topic, groups in preflight_groups.state_topics(specs, settings.joint_states_topic).items():
        checks += [
            preflight_groups.group_joints(s, topic, listener.joint_names[topic]) for s in groups
        ]
    by_name = {spec.name: spec for spec in specs}
    for group, finding in find_controllers(node, resolved_claims(node, specs)).items():
        checks.append(preflight_groups.controller(finding, settings.dry_run))
        spec = by_name[group]
        if finding.found and spec.output != 'twist':
            parameter, names = configured_joints(node, finding.controller, 2.0)
            checks.append(
                preflight_groups.controller_joints(spec, finding.controller, names, parameter)
            )
    safety = settings.safety
    limits = preflight_groups.velocity_limits(specs, safety.joint_lower, safety.joint_upper)
    for spec in specs:
        msg = listener.odometry.get(spec.odometry) if spec.output == 'twist' else None
        if msg is not None:
            values = axis_values(msg.twist.twist, spec.axes)
            lower, upper = limits.get(
                spec.name, ([-math.inf] * len(values), [math.inf] * len(values))
            )
            checks.append(
                preflight_groups.odometry(spec, odometry_problem(spec.axes, values, lower, upper))
            )
    return checks


def _spin(node: Any, seconds: float, done: Callable[[], bool] = lambda: False) -> None:
    """Take messages for ``seconds``, or until ``done()``."""
    import rclpy

    end = time.monotonic() + seconds
    while time.monotonic() < end and not done():
        rclpy.spin_once(node, timeout_sec=0.05)


def run_checks(node: Any, settings: NodeSettings, window: float, discovery: float) -> list[Check]:
    """Wait for the publishers (``discovery`` s at most), listen ``window`` s, check everything.

    Waiting first: DDS discovery of a publisher can take one participant announcement period
    (3 s with Fast DDS); a window started at once would find a publishing camera silent.
    """
    listener = _Listener(node, settings)
    topics = list(listener.arrivals)
    _spin(node, discovery, lambda: all(node.count_publishers(topic) for topic in topics))
    for arrivals in listener.arrivals.values():
        arrivals.clear()
    _spin(node, window)
    publishers = {topic: node.count_publishers(topic) for topic in topics}
    checks = _image_checks(listener, settings, window, publishers)
    urdf, described = _description(node, settings)
    checks.append(described)
    checks += _group_checks(node, settings, listener)
    arm = preflight_groups.arm_joints(settings.group_specs)
    if urdf is not None:
        root = ElementTree.fromstring(urdf)
        checks.append(
            preflight.description_joints(arm, [j.get('name') for j in root.iter('joint')])
        )
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
    parser.add_argument(
        '--discovery-timeout',
        type=seconds(MAX_DISCOVERY_S),
        default=10.0,
        metavar='SECONDS',
        help='seconds to wait, before listening, for a publisher of every topic listened to, '
        f'more than 0 and at most {MAX_DISCOVERY_S:g}',
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
        f'dreamzero-preflight: waiting up to {options.discovery_timeout:g} s for the publishers, '
        f'listening {options.duration:g} s to the cameras and joint states, then checking',
        file=sys.stderr,
        flush=True,
    )
    import rclpy

    rclpy.init(args=['dreamzero-preflight'])
    try:
        node = rclpy.create_node('dreamzero_preflight')
        checks = run_checks(node, settings, options.duration, options.discovery_timeout)
    finally:
        rclpy.try_shutdown()
    for check in checks:
        print(check.line())
    failed = sum(not check.ok for check in checks)
    print(f'{len(checks) - failed} of {len(checks)} checks passed')
    return preflight.exit_code(checks)


if __name__ == '__main__':
    sys.exit(main())
