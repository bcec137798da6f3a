# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Image messages -> RGB arrays: the package's codec, then cv_bridge where a ROS install has it.

The codec (:mod:`dreamzero_ros.core.observations.image_codec`) handles rgb8, bgr8, mono8, rgba8,
bgra8, JPEG and PNG without ROS, and rosbag replay uses it alone. On a robot with a ROS install,
cv_bridge also converts the raw encodings the codec refuses (``yuv422``, ``bayer_*``, 16-bit ...) to
rgb8; without cv_bridge (the PyPI wheels) those frames are refused as bad images.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dreamzero_ros.core.observations.image_codec import msg_to_rgb
from dreamzero_ros.errors import ImageDecodeError

try:
    from cv_bridge import CvBridge, CvBridgeError
except ImportError:  # no cv_bridge wheel: the codec alone
    CvBridge = CvBridgeError = None

_bridge = CvBridge() if CvBridge is not None else None


def decode_image(msg: Any) -> np.ndarray:
    """``(H, W, 3)`` RGB uint8 of a ``sensor_msgs/Image`` or ``CompressedImage``.

    Raises:
        ImageDecodeError: neither the codec nor cv_bridge (where present) can convert it.

    """
    try:
        return msg_to_rgb(msg)
    except ImageDecodeError as error:
        if _bridge is None or hasattr(msg, 'format'):
            raise
        try:
            return np.ascontiguousarray(_bridge.imgmsg_to_cv2(msg, desired_encoding='rgb8'))
        except CvBridgeError as bridge_error:
            raise ImageDecodeError(f'{error}; cv_bridge: {bridge_error}') from bridge_error
