# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Compare two ``engine_benchmark.py --json`` runs: ms per chunk and actions, per variant.

Two runs of the same variants and chunk schedule (e.g. one version of the engine against
another, on the same GPU) see the same observations, so their actions compare chunk by chunk
(warm-up chunks included).  For every variant in both files prints the mean ms per chunk of
each run (all chunks and continuing chunks) with the ratio B / A, and the rms and largest
difference of B's actions from A's (joint units: rad), with the rms over the actions' motion.

    python benchmarks/compare_actions.py main.json branch.json
"""

from __future__ import annotations

import argparse
import json
import sys

from engine_report import action_difference


def compare(a: dict, b: dict) -> list[str]:
    """The lines of the comparison of runs ``a`` and ``b`` (parsed ``--json`` files)."""
    first = {result['label']: result for result in a['results']}
    lines = []
    for result in b['results']:
        label = result['label']
        if label not in first:
            lines.append(f'[{label}] only in B')
            continue
        base = first[label]
        for kind in ('all', 'continuing'):
            if kind in result['summary'] and kind in base['summary']:
                ms_a = base['summary'][kind]['total']
                ms_b = result['summary'][kind]['total']
                lines.append(
                    f'[{label}] {kind:>10}: A {ms_a:.1f} ms/chunk, B {ms_b:.1f} ms/chunk, '
                    f'B/A {ms_b / ms_a:.3f}'
                )
        diff = action_difference(result, base)
        lines.append(
            f'[{label}] actions over {diff["chunks"]} chunks: rms {diff["rms"]:.3e}, '
            f'max {diff["max_abs"]:.3e}, rms / motion {diff["rms_over_motion"]:.3e}'
        )
    lines.extend(
        f'[{label}] only in A' for label in first.keys() - {r['label'] for r in b['results']}
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the comparison of the two files named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('a', help='the baseline run (engine_benchmark.py --json)')
    parser.add_argument('b', help='the run compared with it')
    args = parser.parse_args(argv)
    runs = []
    for path in (args.a, args.b):
        try:
            with open(path) as handle:
                runs.append(json.load(handle))
        except (OSError, json.JSONDecodeError) as error:
            print(f'cannot read {path}: {error}', file=sys.stderr)
            return 2
    print(f'A: {args.a}\nB: {args.b}')
    print('\n'.join(compare(*runs)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
