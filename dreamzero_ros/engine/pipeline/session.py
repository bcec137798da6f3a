# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-session inference state and a bounded store of sessions.

A session is one episode of one robot (the ``session_id`` of the observations).  It owns its
frame history, its DiT state (context-window position, K/V caches of both CFG branches,
cross-attention context, I2V conditioning), the prompt of its current window and its chunk
counter.  Sessions never share state.  The store keeps at most ``max_sessions``; when a new
session would exceed that, the least recently used one is dropped and its device memory freed
(if it comes back, it starts over like a reset session).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from dreamzero_ros.engine.pipeline.denoise import DenoiseSession
from dreamzero_ros.engine.pipeline.model_inputs import FRAMES_AFTER_FIRST_CALL, FrameHistory

__all__ = ['Session', 'SessionStore']


@dataclass
class Session:
    """State of one session.

    Attributes:
        session_id: the observations' ``session_id``.
        denoise: DiT-side state (window position, caches, context, conditioning).
        history: recent frames of every view.
        prompt: model text (templated, cleaned instruction) of the current context window,
            ``None`` before the first call.
        calls: inferences since the last reset.

    """

    session_id: str
    denoise: DenoiseSession
    history: FrameHistory
    prompt: str | None = None
    calls: int = 0

    @property
    def frames_per_call(self) -> int:
        """Frames per view this call gives the model: 1 on the first call, then 4."""
        return 1 if self.calls == 0 else FRAMES_AFTER_FIRST_CALL

    def needs_new_window(self, prompt: str, num_frames: int) -> bool:
        """Whether this call starts a new context window (upstream's reset conditions).

        On the first call, on a change of the model text ``prompt``, for a single-frame input
        and when the current window is used up.
        """
        return self.prompt != prompt or num_frames == 1 or self.denoise.needs_new_window


class SessionStore:
    """At most ``max_sessions`` sessions, least recently used dropped first.

    Args:
        max_sessions: capacity.
        open_denoise: creates the DiT-side state of a new session.
        close_denoise: frees the DiT-side state of a dropped or reset session.
        cameras: the cameras whose frames a session keeps.

    """

    def __init__(
        self,
        max_sessions: int,
        open_denoise: Callable[[], DenoiseSession],
        close_denoise: Callable[[DenoiseSession], None],
        cameras: tuple[str, ...],
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f'max_sessions must be >= 1, got {max_sessions}')
        self.max_sessions = max_sessions
        self._open = open_denoise
        self._close = close_denoise
        self.cameras = cameras
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._sessions

    def ids(self) -> list[str]:
        """Session ids, least recently used first."""
        return list(self._sessions)

    def get(self, session_id: str) -> Session:
        """The session ``session_id``, created (and the oldest dropped) if needed."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
            return session
        while len(self._sessions) >= self.max_sessions:
            _, oldest = self._sessions.popitem(last=False)
            self._close(oldest.denoise)
        session = Session(session_id, self._open(), FrameHistory(self.cameras))
        self._sessions[session_id] = session
        return session

    def reset(self, session_id: str) -> None:
        """Forget a session entirely (unknown ids are fine)."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._close(session.denoise)

    def clear(self) -> None:
        """Forget every session."""
        for session_id in list(self._sessions):
            self.reset(session_id)
