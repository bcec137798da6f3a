# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The rosbags type store used for replay: ROS 2 Kilted types plus the package's messages.

The ``.msg`` files live in ``msg/`` of dreamzero_ros, which rosidl builds as the package's own
interfaces (``dreamzero_ros/msg/*``); they are registered here under the same names, so a bag
written here and one recorded by ``ros2 bag record`` name the types alike.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
import sys

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from dreamzero_ros.core.observations.messages import MessageBuilder

PACKAGE_NAME = 'dreamzero_ros'
#: The package's messages that replay registers.
PACKAGE_MESSAGES = ('ActionChunk', 'PolicyStatus', 'TaskEvent')


def _ament_msg_dir() -> Path | None:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE_NAME)) / 'msg'
    except (ImportError, LookupError, OSError):  # no ament index, or the package is not in it
        return None


def find_msg_dir() -> Path:
    """Return the folder holding the package's ``.msg`` files (checkout, prefix or ament index).

    Raises:
        FileNotFoundError: where none of them holds ``ActionChunk.msg``.

    """
    candidates = [
        Path(__file__).resolve().parents[2] / 'msg',
        Path(sys.prefix) / 'share' / PACKAGE_NAME / 'msg',
    ]
    for folder in candidates:
        if (folder / 'ActionChunk.msg').is_file():
            return folder
    folder = _ament_msg_dir()
    if folder is not None and (folder / 'ActionChunk.msg').is_file():
        return folder
    raise FileNotFoundError(
        'ActionChunk.msg not found in '
        + ', '.join(str(folder) for folder in candidates)
        + ' nor in the ament index'
    )


@cache
def replay_typestore() -> Typestore:
    """ROS 2 Kilted message types plus ``dreamzero_ros/msg/*`` from the .msg files."""
    store = get_typestore(Stores.ROS2_KILTED)
    folder = find_msg_dir()
    types = {}
    for name in PACKAGE_MESSAGES:
        text = (folder / f'{name}.msg').read_text()
        types.update(get_types_from_msg(text, f'{PACKAGE_NAME}/msg/{name}'))
    store.register(types)
    return store


def bag_message_type(name: str) -> type:
    """The rosbags class of a full message type name, e.g. ``'sensor_msgs/msg/JointState'``."""
    return replay_typestore().types[name]


#: The shared message builders, making rosbags messages (what replay writes into bags).
BAG_MESSAGES = MessageBuilder(bag_message_type)
