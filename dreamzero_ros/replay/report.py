# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Write an evaluation's outputs: metrics JSON, PNG figures and a self-contained HTML report."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from dreamzero_ros.replay.evaluation import Evaluation
from dreamzero_ros.replay.plots import all_plots

CAPTIONS = {
    'joints': 'Predicted chunks (colours; at most a dozen, evenly spread, where there are more) '
    'against the recorded reference (black), per joint.',
    'error_by_step': 'Mean absolute error by horizon step, per arm joint, with the error of '
    'simply holding the observed position as a baseline.',
    'error_heatmap': 'Mean absolute error by horizon step and joint.',
    'latency': 'Distribution of inference latency per chunk (wall clock around the policy call).',
}


def _fmt(value: object) -> str:
    if value is None:
        return 'n/a'
    return f'{value:.4g}' if isinstance(value, float) else str(value)


def _worst(figures: dict[str, list[float]]) -> str:
    """``p50 / p95 / max`` of the joint with the largest max."""
    if not figures['max']:
        return 'n/a'
    joint = int(max(range(len(figures['max'])), key=figures['max'].__getitem__))
    values = ' / '.join(_fmt(float(figures[key][joint])) for key in ('p50', 'p95', 'max'))
    return f'{values} (joint {joint})'


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return 'n/a'
    return f'{seconds:.3g} s' if seconds >= 1.0 else f'{seconds * 1e3:.3g} ms'


RANDOM_WEIGHTS_WARNING = (
    'These chunks come from random weights (a preset architecture), not a trained model: the '
    'errors below measure nothing about DreamZero; the report shows that the pipeline runs. '
    'Evaluate a checkpoint (--checkpoint) or a server (--server) for meaningful scores.'
)

#: What the report's terms mean, shown under its summary.
GLOSSARY = (
    ('hold-position baseline', 'the error of a policy that keeps the arm where it was when '
     'queried; a useful policy beats it'),
    ('late', 'a chunk whose inference took longer than its whole horizon: every one of its '
     'steps was already in the past when it arrived (late fraction 1: every chunk)'),
    ('n/a', 'not computed: no chunk, or no hand-over to measure (fewer than two chunks)'),
)  # fmt: skip


def _policy(metrics: dict) -> str:
    policy = metrics.get('policy') or {}
    if not policy:
        return 'n/a'
    text = f'{policy.get("source")} (dreamzero_ros {policy.get("dreamzero_ros_version")})'
    options = policy.get('options')
    return f'{text}; options {json.dumps(options, sort_keys=True)}' if options else text


def summary_rows(metrics: dict) -> list[tuple[str, str]]:
    """(label, value) rows of the report's summary table."""
    rows = [
        ('policy', _policy(metrics)),
        ('bag', metrics['bag']),
        ('reference', metrics['reference_topic']),
        ('prompt', metrics['prompt']),
        ('queries / chunks', f'{metrics["queries"]} / {metrics["chunks"]}'),
        ('refused observations', json.dumps(metrics['refusals']) if metrics['refusals'] else '0'),
        ('policy errors', str(len(metrics['policy_errors']))),
    ]
    if metrics['chunks']:
        errors, hold = metrics['errors'], metrics['hold_baseline_errors']
        latency, timing = metrics['latency_s'], metrics['timing']
        arm_mae, arm_rmse = _fmt(errors['arm']['mae']), _fmt(errors['arm']['rmse'])
        p50, p95 = _duration(latency['p50']), _duration(latency['p95'])
        step = _duration(timing['step_duration_s'])
        rows += [
            ('arm MAE / RMSE (rad)', f'{arm_mae} / {arm_rmse}'),
            ('hold-position baseline arm MAE (rad)', _fmt(hold['arm']['mae'])),
            ('gripper MAE (0 open .. 1 closed)', _fmt(errors['gripper']['mae'])),
            ('latency p50 / p95', f'{p50} / {p95}'),
            ('horizon', f'{timing["horizon"]} steps x {step}'),
            ('query period', _duration(timing['query_period_s'])),
            ('late fraction: chunks arriving after their last step', _fmt(timing['late_fraction'])),
        ]
        hand_over = metrics.get('hand_over')
        if hand_over:
            rows += hand_over_rows(hand_over)
    return rows


def hand_over_rows(hand_over: dict) -> list[tuple[str, str]]:
    """(label, value) rows of the hand-over quality (replay/handover.py)."""
    command, recorded = hand_over['command'], hand_over['recorded']
    rows = [
        (
            f'hand-over steps over {hand_over["hand_overs"]} hand-overs: max |dv| (rad/s), '
            'command / recorded motion',
            f'{_fmt(command["velocity_step_max"])} / {_fmt(recorded["velocity_step_max"])}',
        ),
        (
            'hand-over steps: max |da| (rad/s^2), command / recorded motion',
            f'{_fmt(command["acceleration_step_max"])} / {_fmt(recorded["acceleration_step_max"])}',
        ),
    ]
    figures = hand_over.get('accelerations')
    if figures and figures['segment'].get('count'):
        segment = figures['segment']
        rows.append(
            (
                'command acceleration per segment p50 / p95 / max (rad/s^2); '
                'largest |a| at 1 kHz / limit',
                f'{_fmt(segment["p50"])} / {_fmt(segment["p95"])} / '
                f'{_fmt(segment["max"])}; {_fmt(figures["ratio_max"])}',
            )
        )
    if figures and figures['jerk']['max']:
        rows += [
            (
                'hand-over acceleration jump p50 / p95 / max (rad/s^2), largest joint',
                _worst(figures['jump']),
            ),
            (
                '1 kHz command jerk p50 / p95 / max (rad/s^3), largest joint; '
                'largest |jerk| / limit',
                f'{_worst(figures["jerk"])}; {_fmt(figures["jerk_ratio_max"])}',
            ),
            (
                'Franka checks of the 1 kHz command: samples over a limit',
                ', '.join(f'{k}: {v}' for k, v in figures['violations'].items()) or 'none',
            ),
        ]
    return rows


def joint_rows(metrics: dict) -> list[tuple[str, str, str, str]]:
    """(joint, MAE, RMSE, hold-baseline MAE) per joint."""
    if not metrics['chunks']:
        return []
    by_joint = metrics['errors']['by_joint']
    hold = metrics['hold_baseline_errors']['by_joint']
    return [
        (name, _fmt(v['mae']), _fmt(v['rmse']), _fmt(hold[name]['mae']))
        for name, v in by_joint.items()
    ]


#: Caption of the per-chunk figures of predicted against recorded frames (``imagination_<k>``).
IMAGINATION_CAPTION = (
    "The chunk's predicted frames (upper row of each camera) above the recorded frames at the "
    'times they stand for (lower row).'
)


def _caption(name: str) -> str:
    return IMAGINATION_CAPTION if name.startswith('imagination_') else CAPTIONS.get(name, name)


def render_html(metrics: dict, plots: dict[str, bytes], video_name: str | None = None) -> str:
    """The report page: summary, per-joint table, embedded PNG plots, optional video, raw JSON."""
    escape = html.escape
    parts = [
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>DreamZero replay report</title>',
        '<style>body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}'
        'table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;'
        'text-align:left}img{max-width:100%}figcaption{color:#555;font-size:90%}</style>',
        '</head><body><h1>DreamZero replay report</h1>',
    ]
    if (metrics.get('policy') or {}).get('random_weights'):
        parts.append(f'<p style="color:#a00"><b>{escape(RANDOM_WEIGHTS_WARNING)}</b></p>')
    parts.append('<table>')
    parts += [
        f'<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>' for k, v in summary_rows(metrics)
    ]
    parts.append('</table><dl>')
    parts += [f'<dt>{escape(t)}</dt><dd>{escape(d)}</dd>' for t, d in GLOSSARY]
    parts.append('</dl>')
    rows = joint_rows(metrics)
    if rows:
        parts.append('<h2>Error by joint</h2><table><tr><th>joint</th><th>MAE</th><th>RMSE</th>'
                     '<th>hold-baseline MAE</th></tr>')  # fmt: skip
        parts += ['<tr>' + ''.join(f'<td>{escape(c)}</td>' for c in row) + '</tr>' for row in rows]
        parts.append('</table>')
    for name, png in plots.items():
        data = base64.b64encode(png).decode('ascii')
        parts.append(
            f'<figure><img alt="{name}" src="data:image/png;base64,{data}">'
            f'<figcaption>{escape(_caption(name))}</figcaption></figure>'
        )
    if video_name:
        parts.append(
            '<h2>Predicted future frames (left) beside the recorded ones (right)</h2>'
            f'<video controls width="100%" src="{escape(video_name)}"></video>'
        )
    parts.append(
        '<details><summary>metrics JSON</summary><pre>'
        + escape(json.dumps(metrics, indent=1))
        + '</pre></details></body></html>'
    )
    return '\n'.join(parts)


def write_outputs(
    evaluation: Evaluation,
    out_dir: str | Path,
    video_name: str | None = None,
    figures: dict[str, bytes] | None = None,
) -> dict[str, Path]:
    """Write ``metrics.json``, one PNG per plot and ``report.html`` into ``out_dir``.

    ``figures``: more PNGs for the report, e.g. :meth:`.video.ImaginationStrips.render`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = evaluation.metrics()
    written = {'metrics': out / 'metrics.json', 'report': out / 'report.html'}
    written['metrics'].write_text(json.dumps(metrics, indent=1))
    plots = {**all_plots(evaluation, metrics), **(figures or {})}
    for name, png in plots.items():
        written[name] = out / f'{name}.png'
        written[name].write_bytes(png)
    written['report'].write_text(render_html(metrics, plots, video_name))
    return written
