# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Publish a demo robot: three camera streams and (optionally) joint states, at the DROID rate.

Frames come from the real DROID clips where present (``dreamzero_ros.droid_clips``), synthetic
ones otherwise; joint states follow ``demo_joint_trajectory`` unless ``--no-joint-states``
leaves them to an arm that publishes its own (``dreamzero-sim-arm`` in the demo). Stamps are the
node's clock at publication, so the policy node pairs them as it would a live robot's.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
import sys

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState

from dreamzero_ros.cli_options import add_image_transport, new_parser
from dreamzero_ros.core.config.node_parameters import IMAGE_TRANSPORTS
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.observations.image_codec import (
    SUPPORTED_ENCODINGS,
    encode_compressed,
    encode_raw,
)
from dreamzero_ros.core.processes.process_lifetime import ParentWatchdog
from dreamzero_ros.droid_clips import CLIP_FPS, demo_clips, demo_joint_trajectory
from dreamzero_ros.policy_types import DROID_CAMERAS
from dreamzero_ros.ros.conversions import to_time
from dreamzero_ros.ros.ros_arguments import tool_arguments
from dreamzero_ros.ros.spin import spin_until_shutdown

_DEFAULTS = NodeSettings()


class DemoStream(Node):
    """Publishes ``clips`` (camera -> ``(T, H, W, 3)``) in a loop, with joint states or not.

    ``joint_states`` False publishes the cameras only.
    """

    def __init__(
        self,
        clips: Mapping[str, np.ndarray],
        *,
        rate_hz: float = CLIP_FPS,
        encoding: str = 'rgb8',
        transport: str = 'raw',
        camera_topics: Sequence[str] = _DEFAULTS.camera_topics,
        joint_states_topic: str = _DEFAULTS.joint_states_topic,
        joint_names: Sequence[str] = (
            *_DEFAULTS.arm_joint_names,
            _DEFAULTS.gripper_joint_name,
        ),
        joint_states: bool = True,
        node_name: str = 'dreamzero_demo_stream',
    ) -> None:
        super().__init__(node_name)
        self._clips = clips
        self._encoding = encoding
        self._compressed = transport == 'compressed'
        self._joint_names = list(joint_names)
        self._length = min(len(clip) for clip in clips.values())
        self._encoded: dict[tuple[str, int], bytes] = {}
        self._cameras = []
        for camera, topic in zip(DROID_CAMERAS, camera_topics, strict=True):
            msg_type = CompressedImage if self._compressed else Image
            name = f'{topic}/compressed' if self._compressed else topic
            # reliable, as image_transport publishes: a reliable or a best-effort reader
            # matches it (the node's camera_qos.reliability)
            self._cameras.append((camera, self.create_publisher(msg_type, name, 5)))
        self._joints = (
            self.create_publisher(JointState, joint_states_topic, qos_profile_sensor_data)
            if joint_states
            else None
        )
        self.frames_published = 0
        self._start = self.get_clock().now().nanoseconds * 1e-9
        self.create_timer(1.0 / rate_hz, self.publish_once)

    def publish_once(self) -> None:
        """Publish the next frame of every camera and the joint state, all with one stamp."""
        now = self.get_clock().now().nanoseconds * 1e-9
        index = self.frames_published % self._length
        stamp = to_time(now)
        for camera, publisher in self._cameras:
            msg = self._image(camera, index)
            msg.header.stamp = stamp
            msg.header.frame_id = camera
            publisher.publish(msg)
        if self._joints is not None:
            joints, gripper = demo_joint_trajectory(np.array([now - self._start]))
            state = JointState(name=self._joint_names, position=[*joints[0], *gripper[0]])
            state.header.stamp = stamp
            self._joints.publish(state)
        self.frames_published += 1

    def _image(self, camera: str, index: int) -> Image | CompressedImage:
        key = (camera, index)
        if self._compressed:
            if key not in self._encoded:
                self._encoded[key] = encode_compressed(self._clips[camera][index], 'jpeg')
            return CompressedImage(format='jpeg', data=self._encoded[key])
        raw = encode_raw(self._clips[camera][index], self._encoding)
        return Image(
            encoding=raw.encoding, height=raw.height, width=raw.width, step=raw.step, data=raw.data
        )


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-demo-stream`` (ROS arguments after --ros-args)."""
    parser = new_parser(
        'dreamzero-demo-stream',
        'Publish DROID camera clips (synthetic frames where absent) and a joint trajectory as '
        'a live robot would, for the policy node.',
        epilog='exit codes: 0 stopped (Ctrl-C or --duration), 2 invalid arguments or ROS arguments',
    )
    parser.add_argument(
        '--joint-states',
        action=argparse.BooleanOptionalAction,
        default=True,
        help='also publish demo joint states (default; --no-joint-states: an arm publishes '
        'its own)',
    )
    parser.add_argument('--frames', type=int, default=150, help='clip frames to loop over')
    parser.add_argument(
        '--rate', type=float, default=CLIP_FPS, metavar='HZ', help='publication rate, Hz'
    )
    parser.add_argument(
        '--encoding',
        default='rgb8',
        choices=SUPPORTED_ENCODINGS,
        help='pixel encoding of the raw images',
    )
    add_image_transport(
        parser,
        IMAGE_TRANSPORTS,
        'raw',
        'raw: Image on each camera topic; compressed: CompressedImage (jpeg) on '
        "<topic>/compressed (the node's image_transport)",
        '--transport',
    )
    parser.add_argument(
        '--duration',
        type=float,
        default=0.0,
        metavar='SECONDS',
        help='stop after this many seconds; 0 never',
    )
    return parser


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-demo-stream``."""
    watchdog = ParentWatchdog(None).start()  # ros2 launch killed: no camera stream left
    parser = build_parser()
    argv = sys.argv[1:] if args is None else args
    try:
        options = parser.parse_args(tool_arguments(argv))
    except ValueError as error:
        parser.error(str(error))
    clips, source = demo_clips(options.frames)
    rclpy.init(args=['prog', *argv])
    watchdog.on_lost = rclpy.try_shutdown  # leave the graph, then exit
    node = DemoStream(
        clips,
        rate_hz=options.rate,
        encoding=options.encoding,
        transport=options.image_transport,
        joint_states=options.joint_states,
    )
    node.get_logger().info(
        f'publishing {source} ({len(next(iter(clips.values())))} frames, looped) '
        f'{"with joint states " if options.joint_states else ""}at {options.rate:g} Hz'
    )
    spin_until_shutdown(node, options.duration)
    return 0


if __name__ == '__main__':
    sys.exit(main())
