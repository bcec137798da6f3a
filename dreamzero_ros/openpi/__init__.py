# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""OpenPI WebSocket bridge: serve a policy to openpi-client/RoboArena clients, or use a remote one.

``OpenPIServer(policy, ServerConfig(...))`` serves (``.serve_forever()`` or ``.start()`` on a
background thread); ``RemoteOpenPIPolicy(uri)`` is a Policy backed by a remote server.
"""

from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy
from dreamzero_ros.openpi.server import OpenPIServer, ServerHandle
from dreamzero_ros.openpi.server_config import ServerConfig

__all__ = ['OpenPIServer', 'RemoteOpenPIPolicy', 'ServerConfig', 'ServerHandle']
