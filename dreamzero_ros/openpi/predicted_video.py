# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The OpenPI bridge's opt-in predicted video: ``return_video: true`` in an infer request.

A request that carries ``return_video: true`` gets, besides the usual keys, ``predicted_video``:
``{"frames": uint8 (T, H, W, 3) stitched as the model's input, "times_s": float64 (T,) seconds
after the observation each frame stands for, "cameras": {camera key: uint8 (T, h, w, 3)}}``.
A request without the key (or with ``false``) gets exactly the reply it always got; array
replies (the seed route, RoboArena keys) never carry it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.imagination import policy_keeps_views, predicted_frame_times
from dreamzero_ros.errors import ProtocolError
from dreamzero_ros.policy_types import ActionChunk

#: The request key that asks for the predicted video.
RETURN_VIDEO = 'return_video'


def wants_video(request: Mapping[str, Any], policy: Any) -> bool:
    """Whether ``request`` asks for the predicted video; ProtocolError where it cannot have it."""
    value = _boolean(request.get(RETURN_VIDEO, False))
    if value and not policy_keeps_views(policy):
        raise ProtocolError(f"{RETURN_VIDEO}: this server's policy does not predict video")
    return value


def _boolean(value: Any) -> bool:
    """``value`` as a bool; ProtocolError naming the type of anything but a boolean.

    Booleans come as msgpack's, as NumPy's (``np.bool_``: msgpack-numpy's ``__npgeneric__``)
    or as a 0-d bool array.
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray) and value.dtype == np.bool_ and value.shape == ():
        return bool(value)
    if isinstance(value, np.ndarray):
        received = f'an array of {value.dtype} and shape {value.shape}'
    elif isinstance(value, np.generic):
        received = f'numpy {type(value).__name__}'
    else:
        received = type(value).__name__
    raise ProtocolError(f'{RETURN_VIDEO} must be a boolean (true or false), got {received}')


def predicted_video_reply(chunk: ActionChunk) -> dict[str, Any]:
    """Decode the chunk's predicted video into the reply's ``predicted_video`` map."""
    views = chunk.views
    if views is None or not views.has_predicted_video:
        raise ProtocolError(f'{RETURN_VIDEO}: the policy kept no predicted video')
    frames = views.decode_predicted()
    times = predicted_frame_times(0.0, chunk.step_duration * chunk.horizon, len(frames))
    return {'frames': frames, 'times_s': times, 'cameras': views.per_camera(frames)}
