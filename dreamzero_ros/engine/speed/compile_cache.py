# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A compile cache that outlives the process: the second start compiles from disk.

``torch.compile`` keeps its work in caches -- inductor's FX graphs and generated kernels,
AOTAutograd's graphs and Triton's compiled kernels -- under ``/tmp/torchinductor_<user>`` by
default, which a container or a reboot empties.  :func:`use_compile_cache` puts them in one
folder, by default ``$XDG_CACHE_HOME/dreamzero_ros/torch_compile`` (``~/.cache/...``), so
that a restarted node finds what an earlier run compiled (Dynamo still traces the Python
again: a warm cache shortens the first chunk, it does not make it as fast as the second).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    'COMPILE_CACHE_OFF',
    'compile_cache_folder',
    'default_compile_cache',
    'use_compile_cache',
]

#: ``compile_cache`` value that leaves torch's own cache locations alone.
COMPILE_CACHE_OFF = 'off'
_INDUCTOR_ENV = 'TORCHINDUCTOR_CACHE_DIR'
_TRITON_ENV = 'TRITON_CACHE_DIR'


def default_compile_cache() -> Path:
    """``$XDG_CACHE_HOME/dreamzero_ros/torch_compile`` (``~/.cache`` without the variable)."""
    base = os.environ.get('XDG_CACHE_HOME') or str(Path.home() / '.cache')
    return Path(base) / 'dreamzero_ros' / 'torch_compile'


def _user_inductor_dir() -> str | None:
    """``TORCHINDUCTOR_CACHE_DIR`` if the user set it (torch writes its own default there too)."""
    value = os.environ.get(_INDUCTOR_ENV)
    if not value:
        return None
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return None if os.path.abspath(value) == os.path.abspath(default_cache_dir()) else value


def compile_cache_folder(option: str) -> Path | None:
    """The folder of the ``compile_cache`` option: ``''`` the default, ``off`` None, else a path.

    With ``''`` a ``TORCHINDUCTOR_CACHE_DIR`` the user set is kept.
    """
    if option == COMPILE_CACHE_OFF:
        return None
    if option:
        return Path(option).expanduser()
    user = _user_inductor_dir()
    return Path(user).parent if user else default_compile_cache()


def use_compile_cache(option: str) -> Path | None:
    """Point torch.compile's caches at the folder of ``option``; return it (None: ``off``).

    Inductor's cache goes to ``<folder>/inductor`` (unless ``TORCHINDUCTOR_CACHE_DIR`` is set
    and ``option`` is ``''``), Triton's to ``<folder>/triton``; the FX graph and AOTAutograd
    caches are switched on.  Call it before the first compilation of the process.
    """
    folder = compile_cache_folder(option)
    if folder is None:
        return None
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    folder.mkdir(parents=True, exist_ok=True)
    if option or not _user_inductor_dir():
        os.environ[_INDUCTOR_ENV] = str(folder / 'inductor')
    if option or not os.environ.get(_TRITON_ENV):
        os.environ[_TRITON_ENV] = str(folder / 'triton')
    inductor_config.fx_graph_cache = True
    functorch_config.enable_autograd_cache = True
    return folder
