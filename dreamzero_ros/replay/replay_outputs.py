# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What ``dreamzero-replay`` writes once its last chunk is scored, saying what it is doing.

The video, the imagination figures, the plots, ``metrics.json`` and the report take tens of
seconds on a CPU after the progress bar of the chunks has ended: each step is announced, and
the long ones (video frames, figures) have their own progress bar. A new output folder appears
only once everything is written (:func:`.staged_folder.staged_folder`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from dreamzero_ros.replay.progress import ProgressBar
from dreamzero_ros.replay.staged_folder import staged_folder

if TYPE_CHECKING:
    from dreamzero_ros.replay.evaluation import Evaluation
    from dreamzero_ros.replay.video import ImaginationStrips, VideoComparison

__all__ = ['served_description', 'summary', 'write_replay_outputs']

T = TypeVar('T')


def write_replay_outputs(
    evaluation: Evaluation,
    out: Path,
    video: VideoComparison | None,
    strips: ImaginationStrips | None,
    note: Callable[[str], None],
    quiet: bool = False,
) -> dict[str, Path]:
    """Write the outputs of ``evaluation`` into ``out``; name -> path (under ``out``).

    ``video`` and ``strips`` (with ``--video``) hold the predicted frames; ``note`` prints a
    line; ``quiet``: no progress bars.
    """
    from dreamzero_ros.replay.report import write_outputs

    bag, topics = evaluation.bag, evaluation.config.topics
    allow_partial = evaluation.config.allow_partial
    with _output_folder(out) as folder:
        note(f'writing {out}: {_outputs_named(video, strips)}')
        video_path = None
        if video is not None:
            video_path = _with_bar(
                quiet,
                'video',
                'frames',
                lambda bar: video.write(bag, topics, folder / 'prediction.mp4', allow_partial, bar),
            )
        figures = {}
        if strips is not None:
            figures = _with_bar(
                quiet,
                'imagination',
                'figures',
                lambda bar: strips.render(bag, topics, allow_partial, bar),
            )
            note('drawing the plots and writing the report')
        written = write_outputs(
            evaluation, folder, video_path.name if video_path else None, figures
        )
        if video_path is not None:
            written['video'] = video_path
    return {name: out / path.name for name, path in written.items()}


def _outputs_named(video: VideoComparison | None, strips: ImaginationStrips | None) -> str:
    parts = []
    if video is not None:
        parts.append(f'the video ({video.frame_count} frames)')
    if strips is not None and strips.chunks:
        parts.append(f'{len(strips.chunks)} imagination figures')
    parts.append('the plots, metrics and report')
    return ', '.join(parts)


def _with_bar(quiet: bool, label: str, unit: str, work: Callable[[ProgressBar | None], T]) -> T:
    """``work(bar)`` with a progress bar ``label`` counting ``unit`` (None when ``quiet``)."""
    bar = None if quiet else ProgressBar(label, unit=unit)
    try:
        return work(bar)
    finally:
        if bar is not None:
            bar.close()


@contextlib.contextmanager
def _output_folder(out: Path) -> Iterator[Path]:
    """Where to write the outputs: an existing folder itself; a new one staged.

    A new folder appears only once every output is written: an interrupt or an error while
    writing the video or the report leaves none (:func:`.staged_folder.staged_folder`).
    """
    if out.is_dir():
        yield out
        return
    with staged_folder(out) as folder:
        folder.mkdir()
        yield folder


def served_description(description: dict[str, object], metadata: Mapping) -> dict[str, object]:
    """``description`` with what the policy's metadata says of itself: random weights.

    A remote server of random weights (``dreamzero-openpi-server --preset``) says so in the
    metadata it sends DreamZero's clients (:data:`.openpi.protocol.RANDOM_WEIGHTS_KEY`).
    """
    from dreamzero_ros.openpi.protocol import RANDOM_WEIGHTS_KEY

    if metadata.get(RANDOM_WEIGHTS_KEY) is True:
        return {**description, 'random_weights': True}
    return description


def summary(metrics: dict, written: dict[str, Path]) -> dict[str, object]:
    """The JSON summary the replay prints: policy, counts, errors, latency, outputs."""
    result: dict[str, object] = {'policy': metrics['policy'].get('source')}
    result.update(
        {key: metrics[key] for key in ('chunks', 'queries', 'refusals', 'reference_topic')}
    )
    if metrics['chunks']:
        result['arm_mae_rad'] = metrics['errors']['arm']['mae']
        result['hold_baseline_arm_mae_rad'] = metrics['hold_baseline_errors']['arm']['mae']
        result['latency_p50_s'] = metrics['latency_s']['p50']
        result['latency_p95_s'] = metrics['latency_s']['p95']
    if not metrics['integrity']['complete']:
        result['skipped_messages'] = metrics['integrity']['skipped_messages']
    result['outputs'] = {name: str(path) for name, path in written.items()}
    return result
