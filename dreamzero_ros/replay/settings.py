# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's parameters as replay uses them: parameter file, overrides, node defaults."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dreamzero_ros.core.config import node_config
from dreamzero_ros.core.config.node_settings import NodeSettings


def node_settings(
    params_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> NodeSettings:
    """Settings of a node started with ``params_file`` and ``overrides`` (node defaults else).

    The node's ``engine.*`` parameters are not used by replay, which brings its own policy.

    Raises:
        ValueError: unknown parameter names or invalid values, naming them.

    """
    values = node_config.read_params_file(params_file) if params_file else {}
    values.update(overrides or {})
    unknown = node_config.unknown_parameters(values)
    if unknown:
        raise ValueError(f'unknown node parameters {unknown}')
    return node_config.build_settings(values)
