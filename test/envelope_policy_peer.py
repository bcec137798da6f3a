# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An OpenPI server whose policy drives the Panda's hand down towards the table.

``python envelope_policy_peer.py PORT``: serves :class:`dreamzero_ros.demo_policy.TowardTheTable`.
"""

import sys
import time

from dreamzero_ros.demo_policy import TowardTheTable
from dreamzero_ros.openpi.server import OpenPIServer
from dreamzero_ros.openpi.server_config import ServerConfig

if __name__ == '__main__':
    port = int(sys.argv[1])
    handle = OpenPIServer(TowardTheTable(), ServerConfig(port=port)).start()
    print(f'serving on {port}', flush=True)
    while True:
        time.sleep(1.0)
