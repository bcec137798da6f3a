# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Message-level rules of the OpenPI WebSocket protocol shared by server and client.

After the handshake the server sends one binary metadata map; then each binary request gets
exactly one reply. Requests may carry ``endpoint`` (``"infer"``, the default, or ``"reset"``)
and ``session_id``. Errors are text frames holding a JSON object (the reference client raises on
any text reply and shows its content); they never carry a traceback, and never more than a short
preview of what the client sent.
"""

from __future__ import annotations

from collections.abc import Mapping
import json
from typing import Any

import numpy as np

from dreamzero_ros.errors import PolicyError, ProtocolError
from dreamzero_ros.openpi import msgpack_numpy
from dreamzero_ros.openpi.observation_keys import DROID_TAG, EMBODIMENT_METADATA_KEYS
from dreamzero_ros.policy_types import DROID_ACTION_DIM, ActionChunk, ObservationError

ENDPOINT_KEY = 'endpoint'
SESSION_KEY = 'session_id'
INFER = 'infer'
RESET = 'reset'
#: Metadata fields of RoboArena's ``PolicyServerConfig``, in its order. RoboArena clients build
#: that dataclass from the metadata map, so by default the map holds these keys and no others.
CLIENT_CONFIG_KEYS = (
    'image_resolution',
    'needs_wrist_camera',
    'n_external_cameras',
    'needs_stereo_camera',
    'needs_session_id',
    'action_space',
)
#: DreamZero's serving configuration, used where the policy's metadata leaves a field out.
DREAMZERO_CLIENT_CONFIG: dict[str, Any] = {
    'image_resolution': (180, 320),
    'needs_wrist_camera': True,
    'n_external_cameras': 2,
    'needs_stereo_camera': False,
    'needs_session_id': True,
    'action_space': 'joint_position',
}
#: Handshake header by which DreamZero's own clients (the remote policy of replay and the node)
#: ask for the metadata keys only they read (:data:`RANDOM_WEIGHTS_KEY`); other clients get the
#: client-configuration fields alone, as RoboArena's, which reject unknown keys, need.
CLIENT_HEADER = 'X-DreamZero-Client'
#: Metadata key (for DreamZero's clients) of a server of random weights (``--preset``): true.
RANDOM_WEIGHTS_KEY = 'random_weights'
#: Longest session id accepted, characters; most elements of an array session id.
MAX_SESSION_ID_LENGTH = 256
MAX_SESSION_ID_ELEMENTS = 16
#: The route the seed integration's clients connect to (``ws://host:port/v1/realtime/...``);
#: they want bare action arrays and a text reset reply.
SEED_ROUTE = '/v1/realtime/robot/openpi'
#: What upstream DreamZero's and RoboArena's servers answer to a reset (as a text frame).
RESET_ACKNOWLEDGEMENT = 'reset successful'
#: Longest error message sent or logged, characters.
MAX_ERROR_CHARS = 1000


def build_metadata(policy_metadata: Mapping[str, Any], extras: bool = False) -> dict[str, Any]:
    """The metadata map sent first on every connection.

    Args:
        policy_metadata: the policy's own metadata.
        extras: also send the policy's other plain-valued metadata (horizon, control rate, ...).
            RoboArena clients reject unknown keys, so this is off by default.

    A policy for a robot other than DROID always sends its embodiment (cameras and their
    resolutions, state keys and widths, action keys, ...): its clients need them to build a
    request, and no RoboArena client serves such a robot.
    """
    metadata = {
        key: policy_metadata.get(key, DREAMZERO_CLIENT_CONFIG[key]) for key in CLIENT_CONFIG_KEYS
    }
    resolution = metadata['image_resolution']
    metadata['image_resolution'] = None if resolution is None else [int(v) for v in resolution]
    if policy_metadata.get('embodiment', DROID_TAG) != DROID_TAG:
        for key in EMBODIMENT_METADATA_KEYS:
            if key in policy_metadata:
                metadata[key] = _plain(policy_metadata[key])
    if extras:
        for key, value in policy_metadata.items():
            if key not in metadata and isinstance(value, str | int | float | bool | list | tuple):
                metadata[key] = list(value) if isinstance(value, tuple) else value
    return metadata


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively (msgpack sends both as arrays)."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def preview(value: Any, limit: int = 48) -> str:
    """A short description of ``value`` for error messages, never longer than about ``limit``.

    Strings and bytes are cut before they are quoted; arrays are described by dtype and shape;
    anything else by its type, so that a huge field is never copied into a reply or a log.
    """
    if isinstance(value, str | bytes):
        head = repr(value[:limit])
        return head if len(value) <= limit else f'{head}... ({len(value)} long)'
    if isinstance(value, np.ndarray | np.generic):
        return f'{value.dtype} array of shape {np.shape(value)}'
    if isinstance(value, bool | int | float) or value is None:
        return repr(value)[:limit]
    return type(value).__name__


def truncate(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked where cut."""
    return text if len(text) <= limit else f'{text[:limit]}... ({len(text)} characters)'


def session_id_of(request: Mapping[str, Any]) -> str | None:
    """The request's session id as a str, or None where it has none.

    Accepts a str, an int, or a small integer/str array (RoboArena's test client sends
    ``np.zeros(1, np.int32)``).
    """
    value = request.get(SESSION_KEY)
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode('utf-8', errors='replace')
    elif isinstance(value, np.ndarray | np.generic) and value.dtype.kind in 'biuSU':
        if np.size(value) > MAX_SESSION_ID_ELEMENTS:
            raise ObservationError(
                f'session_id: at most {MAX_SESSION_ID_ELEMENTS} elements, got {preview(value)}'
            )
        value = ','.join(str(v) for v in np.asarray(value).reshape(-1).tolist())
    elif isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ObservationError(f'session_id: expected a str, got {preview(value)}')
    if len(value) > MAX_SESSION_ID_LENGTH:
        raise ObservationError(f'session_id: longer than {MAX_SESSION_ID_LENGTH} characters')
    return value


def endpoint_of(request: Mapping[str, Any]) -> str:
    """The request's endpoint, ``infer`` where absent (the openpi-client sends none)."""
    endpoint = request.get(ENDPOINT_KEY, INFER)
    if isinstance(endpoint, bytes):
        endpoint = endpoint.decode('utf-8', errors='replace')
    if endpoint not in (INFER, RESET):
        raise ObservationError(
            f'unknown endpoint {preview(endpoint)}; expected {INFER!r} or {RESET!r}'
        )
    return endpoint


def reset_reply(session_id: str | None, as_text: bool = False) -> bytes | str:
    """The reply to a reset.

    A binary map ``{"status": "reset successful", "reset": true, "session_id"}`` by default:
    openpi-client's ``infer({"endpoint": "reset"})`` decodes it, the seed integration's example
    client checks ``status``, and upstream DreamZero's and RoboArena's clients read nothing of
    it. ``as_text`` gives the text frame ``reset successful`` instead, which the seed's DROID
    sim-eval client requires.
    """
    if as_text:
        return RESET_ACKNOWLEDGEMENT
    return msgpack_numpy.packb(
        {'status': RESET_ACKNOWLEDGEMENT, 'reset': True, SESSION_KEY: session_id}
    )


def error_text(
    kind: str, message: str, endpoint: str | None = None, limit: int = MAX_ERROR_CHARS
) -> str:
    """The text frame of an error reply, its message cut to ``limit`` characters."""
    return json.dumps({'error': kind, 'message': truncate(message, limit), 'endpoint': endpoint})


def parse_error_text(text: str) -> tuple[str, str]:
    """``(kind, message)`` of an error reply; any text that is not ours is an unknown error."""
    try:
        body = json.loads(text)
        return str(body['error']), str(body['message'])
    except (ValueError, KeyError, TypeError):
        return 'ServerError', text


def checked_actions(chunk: ActionChunk, action_dim: int = DROID_ACTION_DIM) -> np.ndarray:
    """The chunk's actions as C-order float32, refusing anything a robot must not receive."""
    actions = np.ascontiguousarray(chunk.actions, dtype=np.float32)
    if actions.ndim != 2 or actions.shape[1] != action_dim or actions.shape[0] < 1:
        raise PolicyError(
            f'policy returned actions of shape {actions.shape}, expected (H, {action_dim})'
        )
    if not np.all(np.isfinite(actions)):
        raise PolicyError('policy returned non-finite actions')
    return actions


#: First bytes of a msgpack map (fixmap, map 16, map 32): every request is one.
_MAP_HEADERS = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])


def check_request_header(message: bytes | str) -> None:
    """Refuse, on its first byte and on the event loop, a frame that cannot be a request.

    Raises:
        ProtocolError: a text frame, or binary data that is not a msgpack map.

    """
    if isinstance(message, str):
        raise ProtocolError('requests must be binary msgpack frames, got a text frame')
    if not message:
        raise ProtocolError('malformed msgpack: an empty frame; a request must be a map')
    if message[0] not in _MAP_HEADERS:
        raise ProtocolError(
            f'malformed msgpack: a request must be a map, the frame starts with byte '
            f'0x{message[0]:02x}'
        )
