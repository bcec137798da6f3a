# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""API keys of the node: from a file or an environment variable, never from a parameter value.

Any DDS participant can read a node's parameters (``~/get_parameters``), so a key is never one:
the node's parameters name a file holding it (``engine.remote_api_key_file``,
``openpi_bridge.api_key_file``), or the key comes from the node's environment.
"""

from __future__ import annotations

from collections.abc import Callable
import os
from pathlib import Path

#: Environment variable of the key sent to a remote OpenPI server (``engine.backend: remote``).
REMOTE_API_KEY_ENV = 'DREAMZERO_REMOTE_API_KEY'
#: Environment variable of the key the OpenPI bridge requires (as for dreamzero-openpi-server).
BRIDGE_API_KEY_ENV = 'DREAMZERO_OPENPI_API_KEY'


def read_api_key(path: str, env_var: str, log: Callable[[str], None] = print) -> str | None:
    """The key in file ``path`` if given, else in ``$env_var``; None when neither is set.

    The file holds the key on one line (surrounding whitespace is dropped). A file other users
    may read is used with a warning.

    Raises:
        ValueError: the file cannot be read, is empty, or holds more than one line; the message
            names the file, never its content.

    """
    if not path:
        return os.environ.get(env_var) or None
    file = Path(path).expanduser()
    try:
        key = file.read_text().strip()
        mode = file.stat().st_mode
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f'cannot read the API key file {path}: {error}') from error
    if not key or '\n' in key:
        raise ValueError(f'the API key file {path} must hold the key on one line')
    if mode & 0o077:
        log(f'warning: the API key file {path} is readable by other users (chmod 600 it)')
    return key
