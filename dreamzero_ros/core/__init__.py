# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ROS-free core of the policy node, in sub-packages by part.

Lowest layer first: ``robot`` and ``observations``; ``motion``; ``control``; ``config`` and
``processes``; ``policy``.  A sub-package imports only those of lower layers (``str_enum`` is
below them all), and none imports ROS or the package's ``ros``.
"""
