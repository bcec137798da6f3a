# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A base for what is used in a ``with`` block and closed when the block ends (files, clients)."""

from __future__ import annotations

from typing import TypeVar

_Self = TypeVar('_Self', bound='Closing')


class Closing:
    """Closes itself (:meth:`close`) at the end of a ``with`` block, however the block ends."""

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError
