# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``StrEnum``: Python 3.11's ``enum.StrEnum`` for Python 3.10 (ROS 2 Humble) as well."""

import enum


class StrEnum(str, enum.Enum):
    """An enum whose members are strings: ``str()`` and ``format()`` give the value itself."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(str(self), format_spec)
