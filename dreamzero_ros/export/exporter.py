# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rosbags to a training dataset: find, sample, check and write every episode, then the metadata.

Each bag is read once (:func:`.sampling.sample_bag`); an accepted episode's videos are encoded
while it is read, into a staging folder, and moved into place with its parquet file once it is
certain. A bag that cannot be read (damaged, a camera or joint topic missing) costs only its own
episodes: they are reported as dropped, with the reason, like refused episodes. The dataset
appears (or an appended one changes) only when everything is written: a new one through
:func:`~dreamzero_ros.replay.staged_folder.staged_folder`, an appended one through
:func:`~dreamzero_ros.replay.staged_folder.staged_update`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import contextlib
from dataclasses import dataclass, field
import functools
import itertools
from pathlib import Path
import shutil
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.messages import NS_PER_S
from dreamzero_ros.core.observations.observation_cache import CacheConfig
from dreamzero_ros.engine.embodiment import Embodiment
from dreamzero_ros.errors import BagError, DatasetError
from dreamzero_ros.export.bag_group import BagGroup
from dreamzero_ros.export.dataset_folder import DatasetFolder
from dreamzero_ros.export.droid_columns import DroidColumns
from dreamzero_ros.export.episodes import EpisodeSources, find_episodes, prompt_timeline
from dreamzero_ros.export.layout import DatasetLayout
from dreamzero_ros.export.rows import episode_columns
from dreamzero_ros.export.sampling import (
    EpisodeRefusedError,
    SampledEpisode,
    SamplingOptions,
    sample_bag,
)
from dreamzero_ros.export.stats import episode_statistics
from dreamzero_ros.export.video_encoder import EncoderSettings, VideoEncoder
from dreamzero_ros.replay.staged_folder import staged_folder, staged_update
from dreamzero_ros.replay.topics import ReplayTopics

__all__ = ['EpisodeReport', 'ExportConfig', 'ExportSummary', 'NothingExportedError', 'export']

_STAGING = '.staging'


class NothingExportedError(DatasetError):
    """Every episode was dropped: no dataset is written (or changed)."""


@dataclass(frozen=True)
class ExportConfig:
    """Everything an export needs besides the bags and the output folder.

    Attributes:
        embodiment: the robot as the model sees it (cameras, state and action keys).
        layout: the dataset's columns (:func:`.layout.layout_for` of the embodiment).
        topics: where the cameras and joint states are in the bags.
        cache: the node's observation pairing (its ``cache_for`` the embodiment).
        sources: where episodes, instructions and success come from.
        sampling: frame clock, actions and refusal limits.
        encoder: video settings.
        only_success: drop episodes that are not known to be successful.
        allow_partial: use the intact parts of damaged bags.
        urdf: the robot description (DROID's cartesian columns need it).

    """

    embodiment: Embodiment
    layout: DatasetLayout
    topics: ReplayTopics
    cache: CacheConfig
    sources: EpisodeSources
    sampling: SamplingOptions
    encoder: EncoderSettings
    only_success: bool = False
    allow_partial: bool = False
    urdf: str = ''


@dataclass
class EpisodeReport:
    """What became of one episode found in a bag (``episode_index`` None: dropped)."""

    bag: str
    label: str
    start_s: float
    end_s: float
    episode_index: int | None = None
    frames: int = 0
    tasks: list[str] = field(default_factory=list)
    success: bool | None = None
    dropped: str = ''
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for the log."""
        where = f'{self.bag} {self.label} ({self.start_s:.2f}..{self.end_s:.2f} s)'
        if self.dropped:
            return f'dropped {where}: {self.dropped}'
        return f'episode {self.episode_index}: {where}, {self.frames} frames' + ''.join(
            f'; {note}' for note in self.notes
        )


@dataclass
class ExportSummary:
    """The outcome of an export."""

    output: str
    episodes: int
    frames: int
    hours: float
    tasks: int
    dataset_episodes: int
    dataset_frames: int
    reports: list[EpisodeReport]

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON data (dropped episodes with their reasons)."""
        return {
            'output': self.output,
            'episodes_written': self.episodes,
            'frames_written': self.frames,
            'hours_written': round(self.hours, 4),
            'dataset': {
                'episodes': self.dataset_episodes,
                'frames': self.dataset_frames,
                'tasks': self.tasks,
            },
            'dropped': [report.line() for report in self.reports if report.dropped],
        }


class _EpisodeVideos:
    """An episode's cameras encoded into the staging folder until it is accepted."""

    def __init__(self, folder: Path, layout: DatasetLayout, settings: EncoderSettings) -> None:
        folder.mkdir(parents=True)
        self.folder = folder
        self.encoders: dict[str, VideoEncoder] = {}
        self._cameras: dict[str, str] = {}
        for (key, height, width), video_key in zip(layout.cameras, layout.video_keys, strict=True):
            path = folder / f'{video_key}.mp4'
            self.encoders[video_key] = VideoEncoder(path, height, width, settings)
            self._cameras[video_key] = key

    def add(self, images: Mapping[str, np.ndarray]) -> None:
        for video_key, encoder in self.encoders.items():
            encoder.add(images[self._cameras[video_key]])

    def discard(self) -> None:
        for encoder in self.encoders.values():
            encoder.abort()
        shutil.rmtree(self.folder, ignore_errors=True)

    def close(self, target: Callable[[str], Path]) -> dict[str, Any]:
        """Finish the files, move each to ``target(video_key)``; their image statistics."""
        stats = {}
        for video_key, encoder in self.encoders.items():
            stats[video_key] = encoder.close()
            path = target(video_key)
            path.parent.mkdir(parents=True, exist_ok=True)
            encoder.path.rename(path)
        shutil.rmtree(self.folder, ignore_errors=True)
        return stats


class _Writer:
    """Turns accepted episodes into files and entries of the dataset."""

    def __init__(self, folder: DatasetFolder, config: ExportConfig) -> None:
        self.folder = folder
        self.config = config
        self._tokens = itertools.count()
        self.droid = None
        if config.layout.droid:
            self.droid = DroidColumns(config.urdf, config.cache.arm_joints)

    def open_sink(self) -> _EpisodeVideos:
        staging = self.folder.root / _STAGING / f'{next(self._tokens):06d}'
        return _EpisodeVideos(staging, self.config.layout, self.config.encoder)

    def write(self, episode: SampledEpisode, report: EpisodeReport) -> None:
        folder, config = self.folder, self.config
        index = len(folder.episodes)
        columns = episode_columns(
            config.layout,
            config.embodiment,
            self.droid,
            episode,
            index,
            folder.total_frames,
            folder.task_index,
        )
        videos = episode.sink.close(lambda key: folder.video_path(index, key))
        folder.write_parquet(index, columns)
        tasks = list(dict.fromkeys(episode.instructions))
        entry = {
            'episode_index': index,
            'tasks': tasks,
            'length': len(episode.times),
            'success': episode.span.success,
            'recording': {
                'bag': report.bag,
                'episode': report.label,
                'start_s': round(float(episode.times[0]), 6),
            },
        }
        folder.add_episode(entry, episode_statistics(columns, videos))
        report.episode_index, report.frames, report.tasks = index, len(episode.times), tasks
        report.notes = list(episode.notes)


def _accept(episode: SampledEpisode, config: ExportConfig) -> str:
    """Why an episode that sampled well is still dropped ('' where it is kept)."""
    if not all(episode.instructions):
        return (
            'no_instruction: neither --task, the episode nor a ~/prompt before its frames gives '
            'one (nor the prompt parameter)'
        )
    if config.only_success and episode.span.success is not True:
        known = 'unknown' if episode.span.success is None else 'false'
        return f'not_successful: success {known} (--only-success)'
    return ''


def _export_bag(
    bag: Sequence[Path],
    config: ExportConfig,
    writer: _Writer,
    progress: Callable[[float], None] | None,
    on_report: Callable[[EpisodeReport], None],
) -> None:
    """Every episode of one bag, written or dropped, each reported once decided."""
    reports: list[EpisodeReport] = []
    decided = 0
    name = ','.join(path.name for path in bag)
    try:
        with BagGroup(bag, config.allow_partial) as reader:
            start = reader.start_ns / NS_PER_S
            spans = find_episodes(reader, config.sources)
            reports = [EpisodeReport(name, s.label, s.start - start, s.end - start) for s in spans]
            prompts = prompt_timeline(reader, config.sources)
            on_time = None if progress is None else (lambda time: progress(time - start))
            results = sample_bag(
                reader,
                config.topics,
                config.cache,
                spans,
                config.sampling,
                prompts,
                writer.open_sink,
                on_time,
            )
            for report, result in zip(reports, results, strict=True):
                _decide(result, report, config, writer)
                decided += 1
                on_report(report)
    except BagError as error:
        for report in reports[decided:] or [EpisodeReport(name, 'bag', 0.0, 0.0)]:
            report.dropped = f'unusable bag: {error}'
            on_report(report)


def _decide(
    result: SampledEpisode | EpisodeRefusedError,
    report: EpisodeReport,
    config: ExportConfig,
    writer: _Writer,
) -> None:
    """Write an episode, or say why it is dropped."""
    if isinstance(result, EpisodeRefusedError):
        report.dropped = str(result)
        return
    report.success = result.span.success
    reason = _accept(result, config)
    if reason:
        report.dropped = reason
        if result.sink is not None:
            result.sink.discard()
        return
    writer.write(result, report)


def _bag_progress(
    progress: Callable[[float, float], None],
    offset: float,
    duration: float,
    total: float,
    time: float,
) -> None:
    """Report bag time ``time`` of a bag that starts at ``offset`` of all the bags' ``total``."""
    progress(offset + min(max(time, 0.0), duration), total)


def _durations(bags: Sequence[Sequence[Path]], allow_partial: bool) -> list[float]:
    durations = []
    for bag in bags:
        try:
            with BagGroup(bag, allow_partial) as reader:
                durations.append((reader.end_ns - reader.start_ns) / NS_PER_S)
        except BagError:
            durations.append(0.0)
    return durations


def export(
    bags: Sequence[Sequence[Path]],
    output: Path,
    config: ExportConfig,
    append: bool = False,
    progress: Callable[[float, float], None] | None = None,
    on_report: Callable[[EpisodeReport], None] | None = None,
) -> ExportSummary:
    """Export the episodes of ``bags`` into the dataset ``output`` (new, or ``append``).

    Each entry of ``bags`` is one recording: one bag, or bags read together (:class:`BagGroup`).

    Raises:
        NothingExportedError: every episode was dropped (nothing is written or changed).
        DatasetError: ``output`` exists (without ``append``) or is not a dataset of this layout.

    """
    durations = _durations(bags, config.allow_partial)
    total = sum(durations)
    if append:
        existing = DatasetFolder.open(output, config.layout)
        stage = staged_update(output, lambda path: path.parts[0] in ('data', 'videos'))
    else:
        if output.exists():
            raise DatasetError(f'{output} exists (--append adds episodes to a dataset)')
        existing = None
        stage = staged_folder(output)
    reports: list[EpisodeReport] = []

    def record(report: EpisodeReport) -> None:
        reports.append(report)
        if on_report is not None:
            on_report(report)

    with stage as root:
        root.mkdir(parents=True, exist_ok=True)
        folder = existing or DatasetFolder(root, config.layout)
        folder.root = root
        before_episodes, before_frames = len(folder.episodes), folder.total_frames
        writer = _Writer(folder, config)
        done = 0.0
        for bag, duration in zip(bags, durations, strict=True):
            tick = None
            if progress is not None:
                tick = functools.partial(_bag_progress, progress, done, duration, total)
            _export_bag(bag, config, writer, tick, record)
            done += duration
            if progress is not None:
                progress(done, total)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(root / _STAGING)
        written = len(folder.episodes) - before_episodes
        if written == 0:
            raise NothingExportedError(
                f'no episode exported ({len(reports)} dropped): {output} is '
                + ('unchanged' if append else 'not written')
            )
        folder.write_meta()
    frames = folder.total_frames - before_frames
    return ExportSummary(
        str(output),
        written,
        frames,
        frames / config.layout.fps / 3600.0,
        len(folder.tasks),
        len(folder.episodes),
        folder.total_frames,
        reports,
    )
