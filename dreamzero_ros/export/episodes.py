# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Where a bag's episodes start and end, what they were told to do, and whether they succeeded.

Episodes (:data:`EPISODE_SOURCES`):

* ``bag``: the whole bag is one episode.
* ``task``: one episode per ``~/run_task`` goal, from the node's ``~/task_events``
  (``dreamzero_ros/msg/TaskEvent``): its span, its instruction, its outcome. A goal whose end is
  not in the bag (the recording stopped first) runs to the end of the bag, success unknown.
* ``topic``: a topic the user names: ``std_msgs/Bool`` (true starts an episode, false ends it)
  or ``std_msgs/String`` (a text starts an episode with that instruction, an empty text ends
  it). One still open at the end of the bag ends there.

The instruction of each frame: ``--task`` where given; else the episode's own (the goal's, the
String's); else the prompt in force at that frame (the last ``~/prompt`` message at or before
it, the node's ``prompt`` parameter before the first one). Success: the last operator marker
(``std_msgs/Bool`` on the success topic) from the episode's start until the next episode
starts; else a task's outcome (success where it is one of ``success_outcomes``); else unknown.
Times are seconds of the bag's log time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from dreamzero_ros.core.observations.messages import NS_PER_S, TASK_EVENT_TYPE
from dreamzero_ros.errors import BagError
from dreamzero_ros.replay.bag_io import BagReader

__all__ = [
    'EPISODE_SOURCES',
    'EpisodeSources',
    'EpisodeSpan',
    'PromptTimeline',
    'find_episodes',
    'prompt_timeline',
]

EPISODE_SOURCES = ('bag', 'task', 'topic')
BOOL_TYPE = 'std_msgs/msg/Bool'
STRING_TYPE = 'std_msgs/msg/String'
#: TaskEvent.event values.
STARTED, ENDED = 0, 1


@dataclass(frozen=True)
class EpisodeSources:
    """Where episodes, instructions and success come from (see the module docstring).

    Attributes:
        mode: one of :data:`EPISODE_SOURCES`.
        task_topic: the node's ``~/task_events`` topic (absolute).
        episode_topic: the user's Bool or String topic (``topic`` mode).
        prompt_topic: the node's ``~/prompt`` topic (absolute); empty: none read.
        success_topic: the operator's Bool marker topic; empty: none.
        success_outcomes: task outcomes that count as success.
        task: the instruction of every episode (``--task``); empty: from the bag.
        default_prompt: the prompt before any ``~/prompt`` message (the node's parameter).

    """

    mode: str = 'bag'
    task_topic: str = '/dreamzero_policy/task_events'
    episode_topic: str = ''
    prompt_topic: str = '/dreamzero_policy/prompt'
    success_topic: str = ''
    success_outcomes: tuple[str, ...] = ('time_limit',)
    task: str = ''
    default_prompt: str = ''

    def __post_init__(self) -> None:
        if self.mode not in EPISODE_SOURCES:
            raise ValueError(f'episodes from {self.mode!r}: choose one of {EPISODE_SOURCES}')
        if self.mode == 'topic' and not self.episode_topic:
            raise ValueError('episodes from a topic need the topic (--episode-topic)')


@dataclass(frozen=True)
class EpisodeSpan:
    """One episode of a bag before it is sampled.

    Attributes:
        start: first second (log time) of the episode.
        end: last second of the episode.
        instruction: the episode's own instruction (goal, topic text, ``--task``); empty: the
            prompt in force at each frame.
        success: True, False, or None where unknown.
        label: where it comes from, for the report (``bag``, ``task <goal id>``, ``topic``).

    """

    start: float
    end: float
    instruction: str = ''
    success: bool | None = None
    label: str = 'bag'


@dataclass(frozen=True)
class PromptTimeline:
    """The prompt in force over time: ``(time, text)`` ascending, and the one before them."""

    changes: tuple[tuple[float, str], ...] = ()
    initial: str = ''

    def at(self, time: float) -> str:
        """The prompt in force at ``time`` (empty where none is)."""
        index = bisect.bisect_right([t for t, _ in self.changes], time)
        return self.changes[index - 1][1] if index else self.initial


def _messages(reader: BagReader, topic: str, types: tuple[str, ...], role: str) -> list:
    """``(seconds, message)`` of ``topic``; BagError where it is absent or of another type."""
    reader.require(topic, types, role)
    return [(log_ns / NS_PER_S, message) for _, log_ns, message in reader.messages([topic])]


def prompt_timeline(reader: BagReader, sources: EpisodeSources) -> PromptTimeline:
    """The prompts of the bag's ``~/prompt`` topic (none where the bag lacks it)."""
    topic = sources.prompt_topic
    if not topic or topic not in reader.topics:
        return PromptTimeline((), sources.default_prompt)
    changes = _messages(reader, topic, (STRING_TYPE,), 'prompt')
    return PromptTimeline(tuple((t, m.data) for t, m in changes), sources.default_prompt)


def _bag_span(reader: BagReader) -> tuple[float, float]:
    return reader.start_ns / NS_PER_S, (reader.end_ns - 1) / NS_PER_S


def _task_spans(reader: BagReader, sources: EpisodeSources) -> list[EpisodeSpan]:
    if sources.task_topic not in reader.topics:
        raise BagError(
            f'bag {reader.path} has no {sources.task_topic} (the node publishes each task '
            'there; record it, or export with --episodes bag)'
        )
    events = _messages(reader, sources.task_topic, (TASK_EVENT_TYPE,), 'task events')
    _, bag_end = _bag_span(reader)
    started: dict[str, tuple[float, str]] = {}
    spans = []
    for _, event in events:
        stamp = event.header.stamp.sec + event.header.stamp.nanosec / NS_PER_S
        if event.event == STARTED:
            started[event.goal_id] = (stamp, event.instruction)
        elif event.event == ENDED and event.goal_id in started:
            start, instruction = started.pop(event.goal_id)
            success = event.outcome in sources.success_outcomes
            label = f'task {event.goal_id[:8]} ({event.outcome})'
            spans.append(EpisodeSpan(start, stamp, instruction, success, label))
    for goal_id, (start, instruction) in started.items():
        label = f'task {goal_id[:8]} (unfinished in the bag)'
        spans.append(EpisodeSpan(start, bag_end, instruction, None, label))
    return spans


def _topic_spans(reader: BagReader, sources: EpisodeSources) -> list[EpisodeSpan]:
    types = (BOOL_TYPE, STRING_TYPE)
    messages = _messages(reader, sources.episode_topic, types, 'episode')
    _, bag_end = _bag_span(reader)
    spans, open_at, text = [], None, ''
    for time, message in messages:
        starts = bool(message.data)
        if open_at is not None and (not starts or isinstance(message.data, str)):
            spans.append(EpisodeSpan(open_at, time, text, None, 'topic'))
            open_at = None
        if starts and open_at is None:
            open_at, text = time, message.data if isinstance(message.data, str) else ''
    if open_at is not None:
        spans.append(EpisodeSpan(open_at, bag_end, text, None, 'topic (open at the end)'))
    return spans


def _with_markers(
    reader: BagReader, spans: list[EpisodeSpan], sources: EpisodeSources
) -> list[EpisodeSpan]:
    """Each span's success from the operator's markers, where there are any for it."""
    if not sources.success_topic:
        return spans
    markers = _messages(reader, sources.success_topic, (BOOL_TYPE,), 'success marker')
    result = []
    for index, span in enumerate(spans):
        until = spans[index + 1].start if index + 1 < len(spans) else float('inf')
        mine = [bool(m.data) for t, m in markers if span.start <= t < until]
        result.append(span if not mine else replace(span, success=mine[-1]))
    return result


def find_episodes(reader: BagReader, sources: EpisodeSources) -> list[EpisodeSpan]:
    """The bag's episodes in time order, with their instruction and success.

    Raises:
        BagError: a topic the mode needs is absent or of another type.

    """
    if sources.mode == 'bag':
        spans = [EpisodeSpan(*_bag_span(reader))]
    elif sources.mode == 'task':
        spans = _task_spans(reader, sources)
    else:
        spans = _topic_spans(reader, sources)
    spans = sorted((s for s in spans if s.end > s.start), key=lambda s: s.start)
    for first, second in zip(spans, spans[1:], strict=False):
        if second.start < first.end:
            raise BagError(
                f'bag {reader.path}: episodes {first.label} and {second.label} overlap '
                f'({first.start:.3f}..{first.end:.3f} s and {second.start:.3f}.. s)'
            )
    spans = _with_markers(reader, spans, sources)
    if sources.task:
        spans = [replace(span, instruction=sources.task) for span in spans]
    return spans
