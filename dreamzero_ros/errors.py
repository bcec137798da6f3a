# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every exception of dreamzero_ros, under one base class.

``except DreamZeroError`` catches anything this package raises on purpose.  Each class also
derives from the built-in exception its callers expect (``ValueError`` for bad input,
``RuntimeError`` for a state that cannot serve), so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    'BagError',
    'CapacityError',
    'CfgParallelError',
    'CheckpointError',
    'ConfigError',
    'DatasetError',
    'DefinitionError',
    'DeviceMemoryError',
    'DeviceUnavailableError',
    'DreamZeroError',
    'EmbodimentError',
    'ImageDecodeError',
    'McapError',
    'MetadataError',
    'MsgpackNumpyError',
    'ObservationError',
    'PolicyError',
    'ProtocolError',
    'ServerConnectionError',
    'TaskRefusedError',
    'WorkerStartError',
]


class DreamZeroError(Exception):
    """Base class of every error dreamzero_ros raises on purpose."""


class ConfigError(DreamZeroError, ValueError):
    """``config.json`` or an engine setting is invalid; the message names the key."""


class DatasetError(DreamZeroError, ValueError):
    """A training dataset folder cannot be written or appended to; the message says why."""


class CheckpointError(DreamZeroError, RuntimeError):
    """A checkpoint folder is incomplete, corrupt, or does not match the model."""


class MetadataError(DreamZeroError, ValueError):
    """``metadata.json`` is missing, malformed, or lacks the statistics an embodiment needs."""


class PolicyError(DreamZeroError, RuntimeError):
    """A policy cannot serve an input or its state (the base of every policy error)."""


class ObservationError(PolicyError, ValueError):
    """An observation is malformed: missing camera, wrong shape or dtype, NaN state."""


class CapacityError(PolicyError):
    """No room on an OpenPI server for a new connection or session; the message names the limit."""


class ServerConnectionError(PolicyError, ConnectionError):
    """A remote OpenPI server cannot be reached, or refuses the handshake."""


class ProtocolError(PolicyError):
    """An OpenPI request breaks the protocol (not binary, not a map, undecodable)."""


class MsgpackNumpyError(DreamZeroError, ValueError):
    """A payload cannot be encoded or decoded as msgpack-numpy."""


class EmbodimentError(DreamZeroError, ValueError):
    """An embodiment is missing, malformed, or does not fit the checkpoint; names the field."""


class ImageDecodeError(DreamZeroError, ValueError):
    """An image message cannot be turned into an RGB array; the message says why."""


class BagError(DreamZeroError, ValueError):
    """A bag cannot be used: missing, corrupt, truncated, or without the topics asked for."""


class McapError(DreamZeroError, ValueError):
    """A file is not an MCAP file, or nothing in it can be read."""


class DefinitionError(DreamZeroError, ValueError):
    """A message type of a bag cannot be decoded: its definition is absent, unparsable or wrong."""


class DeviceMemoryError(DreamZeroError, RuntimeError):
    """An engine configuration needs more device memory than the device has free."""


class DeviceUnavailableError(DreamZeroError, RuntimeError):
    """The device an engine is asked to run on is not on this machine (no CUDA, no such GPU)."""


class CfgParallelError(DreamZeroError, RuntimeError):
    """The CFG-parallel group cannot work (a worker failed or was configured differently)."""


class WorkerStartError(DreamZeroError, RuntimeError):
    """The worker ranks of an engine could not be started, or a stop was requested meanwhile."""


class TaskRefusedError(DreamZeroError, ValueError):
    """A ``~/run_task`` goal cannot run now (node state, empty instruction, bad time limit)."""
