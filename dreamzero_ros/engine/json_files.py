# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Reading the JSON files of a checkpoint folder, every failure as the caller's error type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ['read_json']


def read_json(path: str | Path, error: type[Exception]) -> Any:
    """Parse the JSON file at ``path``; raise ``error`` naming the file if that fails.

    Invalid UTF-8 or JSON, nesting too deep for the parser (a ``RecursionError`` otherwise)
    and an unreadable file all become ``error``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError as cause:
        raise error(f'{path} is not valid JSON: {cause}') from cause
    except OSError as cause:
        raise error(f'{path} is unreadable: {cause}') from cause
    try:
        return json.loads(text)
    except json.JSONDecodeError as cause:
        raise error(f'{path} is not valid JSON: {cause}') from cause
    except RecursionError:
        raise error(f'{path} is not valid JSON: nested too deeply to parse') from None
