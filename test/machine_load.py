# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""How loaded the machine is now, for tests whose timing rides on it."""

import os


def load_factor(limit: float = 5.0) -> float:
    """Runnable processes per core now (the 1-minute load average), between 1 and ``limit``."""
    return min(limit, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
