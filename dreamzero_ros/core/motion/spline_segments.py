# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The segments joint_trajectory_controller draws between points: values and exact extremes.

JTC joins two points linearly when they carry positions only, with a cubic when they carry
velocities and with a quintic when they carry accelerations too
(``Trajectory::interpolate_between_points``). :func:`segment_polynomials` writes every segment of
a knot sequence as a polynomial of degree 5 in the normalised time ``tau = (t - t_i) / h_i`` on
``[0, 1]`` (the linear and cubic forms have zero higher coefficients), :func:`sample_segments`
evaluates them, and :func:`segment_extremes` gives each segment's exact position range and its
largest speed, acceleration and jerk: every critical point (the real roots of the next
derivative, companion-matrix eigenvalues) is evaluated, with the segment's ends, so that the
whole curve between the knots is checked, not only the knots.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

#: Extra points of every segment evaluated besides its critical points (robustness only).
_PROBES = np.linspace(0.0, 1.0, 5)


def hermite_coefficients(
    h: np.ndarray,
    start: tuple[np.ndarray, np.ndarray | None, np.ndarray | None],
    end: tuple[np.ndarray, np.ndarray | None, np.ndarray | None],
) -> np.ndarray:
    """Coefficients ``(..., 6)`` in tau of JTC's segments between ``start`` and ``end``.

    ``start`` and ``end`` are (positions, velocities or None, accelerations or None), each
    ``(..., N)`` and broadcast with ``h[..., None]`` (the segments' durations); the degree
    follows the fields given, as in JTC. Position at ``tau``: ``sum c_k tau^k``.
    """
    (p0, v0, a0), (p1, v1, a1) = start, end
    hh = np.asarray(h, dtype=np.float64)[..., None]
    delta = np.asarray(p1, dtype=np.float64) - p0
    coefficients = np.zeros(np.broadcast_shapes(delta.shape, hh.shape) + (6,))
    coefficients[..., 0] = p0
    if v0 is None or v1 is None:
        coefficients[..., 1] = delta
        return coefficients
    m0, m1 = v0 * hh, v1 * hh
    coefficients[..., 1] = m0
    if a0 is None or a1 is None:
        coefficients[..., 2] = 3.0 * delta - 2.0 * m0 - m1
        coefficients[..., 3] = -2.0 * delta + m0 + m1
        return coefficients
    c0, c1 = a0 * hh**2, a1 * hh**2
    coefficients[..., 2] = 0.5 * c0
    coefficients[..., 3] = 10.0 * delta - 6.0 * m0 - 4.0 * m1 - 1.5 * c0 + 0.5 * c1
    coefficients[..., 4] = -15.0 * delta + 8.0 * m0 + 7.0 * m1 + 1.5 * c0 - c1
    coefficients[..., 5] = 6.0 * delta - 3.0 * (m0 + m1) - 0.5 * (c0 - c1)
    return coefficients


def segment_polynomials(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray | None = None,
    accelerations: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Durations ``(K - 1,)`` and coefficients ``(K - 1, N, 6)`` of a knot sequence's segments.

    ``positions`` (and ``velocities``, ``accelerations`` when given) are ``(K, N)`` at ``times``.
    """
    h = np.diff(np.asarray(times, dtype=np.float64))
    fields = [
        None if x is None else np.asarray(x, dtype=np.float64)
        for x in (positions, velocities, accelerations)
    ]
    start = tuple(None if x is None else x[:-1] for x in fields)
    end = tuple(None if x is None else x[1:] for x in fields)
    return h, hermite_coefficients(h, start, end)


def derivative(coefficients: np.ndarray) -> np.ndarray:
    """Coefficients of the derivative in tau (one fewer on the last axis)."""
    return coefficients[..., 1:] * np.arange(1, coefficients.shape[-1])


def evaluate(coefficients: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Polynomials ``(..., D)`` at ``tau`` ``(..., M)`` (Horner), broadcast: ``(..., M)``."""
    out = np.zeros(np.broadcast_shapes(coefficients.shape[:-1], tau.shape[:-1]) + tau.shape[-1:])
    for k in range(coefficients.shape[-1] - 1, -1, -1):
        out = out * tau + coefficients[..., k, None]
    return out


def sample_segments(
    times: np.ndarray, coefficients: np.ndarray, at: np.ndarray, order: int = 2
) -> list[np.ndarray]:
    """Position and its derivatives up to ``order`` (seconds) at ``at``: each ``(len(at), N)``.

    Before the first knot and after the last the curve holds its end position at rest, as JTC
    holds the last point.
    """
    times = np.asarray(times, dtype=np.float64)
    at = np.atleast_1d(np.asarray(at, dtype=np.float64))
    count, joints = len(at), coefficients.shape[1] if coefficients.ndim == 3 else 0
    h = np.diff(times)
    index = np.clip(np.searchsorted(times, at, side='right') - 1, 0, len(h) - 1)
    tau = np.clip((at - times[index]) / h[index], 0.0, 1.0)
    # a knot sequence's last point, reached exactly, is its position (segment's end)
    selected = coefficients[index]  # (M, N, 6)
    out = []
    scale = np.ones(count)
    for k in range(order + 1):
        values = evaluate(selected, tau[:, None, None])[..., 0] / scale[:, None]
        if k:
            values[(at < times[0]) | (at > times[-1])] = 0.0
        out.append(values.reshape(count, joints))
        selected = derivative(selected)
        scale = scale * h[index]
    return out


def _bernstein(degree: int) -> np.ndarray:
    """Matrix taking power coefficients in tau to Bernstein ones, degree ``degree``."""
    matrix = np.zeros((degree + 1, degree + 1))
    for j in range(degree + 1):
        for k in range(j + 1):
            matrix[j, k] = math.comb(j, k) / math.comb(degree, k)
    return matrix


def speed_bounds(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray | None = None,
    accelerations: np.ndarray | None = None,
) -> np.ndarray:
    """An upper bound ``(K - 1, N)`` of each segment's speed, cheaper than the exact one.

    The velocity's Bernstein coefficients bound it (a Bezier curve lies in the hull of its
    control points): no more than a few per cent above the peak on smooth segments.
    """
    h, coefficients = segment_polynomials(times, positions, velocities, accelerations)
    slope = derivative(coefficients)
    control = slope @ _bernstein(slope.shape[-1] - 1).T
    return np.abs(control).max(axis=-1) / h[:, None]


def critical_points(coefficients: np.ndarray) -> np.ndarray:
    """Real parts of the roots of each polynomial's derivative, clipped into ``[0, 1]``.

    ``(..., D)`` coefficients give ``(..., D - 2)`` points (none for a line). A vanishing
    leading coefficient only sends a root far outside ``[0, 1]``, where it is clipped.
    """
    slope = derivative(coefficients)
    degree = slope.shape[-1] - 1
    shape = slope.shape[:-1]
    if degree < 1:
        return np.zeros(shape + (0,))
    scale = np.max(np.abs(slope), axis=-1, keepdims=True)
    slope = slope / np.where(scale > 0, scale, 1.0)
    lead = slope[..., -1]
    lead = np.where(np.abs(lead) < 1e-12, 1e-12, lead)
    if degree == 1:
        return np.clip(-slope[..., :1] / lead[..., None], 0.0, 1.0)
    if degree == 2:  # the real parts of a quadratic's roots, in closed form
        half = -0.5 * slope[..., 1] / lead
        spread = np.sqrt(np.maximum(half**2 - slope[..., 0] / lead, 0.0))
        return np.clip(np.stack([half - spread, half + spread], axis=-1), 0.0, 1.0)
    companion = np.zeros(shape + (degree, degree))
    if degree > 1:
        companion[..., np.arange(1, degree), np.arange(degree - 1)] = 1.0
    companion[..., :, -1] = -slope[..., :-1] / lead[..., None]
    roots = np.linalg.eigvals(companion.reshape(-1, degree, degree)).reshape(shape + (degree,))
    return np.clip(roots.real, 0.0, 1.0)


def polynomial_range(coefficients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least and largest value of each polynomial ``(..., D)`` on ``[0, 1]``: two ``(...)``."""
    candidates = np.concatenate(
        [
            critical_points(coefficients),
            np.broadcast_to(_PROBES, coefficients.shape[:-1] + _PROBES.shape),
        ],
        axis=-1,
    )
    values = evaluate(coefficients, candidates)
    return values.min(axis=-1), values.max(axis=-1)


@dataclass(frozen=True)
class SegmentExtremes:
    """Exact extremes of each segment of each joint, ``(K - 1, N)`` each."""

    lowest: np.ndarray
    highest: np.ndarray
    speed: np.ndarray
    acceleration: np.ndarray
    jerk: np.ndarray


def segment_extremes(
    times: np.ndarray,
    positions: np.ndarray,
    velocities: np.ndarray | None = None,
    accelerations: np.ndarray | None = None,
) -> SegmentExtremes:
    """Position range and largest ``|velocity|``, ``|acceleration|``, ``|jerk|`` of each segment."""
    h, coefficients = segment_polynomials(times, positions, velocities, accelerations)
    degree = 5 if accelerations is not None else 3 if velocities is not None else 1
    return polynomial_extremes(h, coefficients[..., : degree + 1])


def polynomial_extremes(h: np.ndarray, coefficients: np.ndarray) -> SegmentExtremes:
    """:class:`SegmentExtremes` of segments ``(..., N, D)`` lasting ``h`` ``(...)`` seconds."""
    lowest, highest = polynomial_range(coefficients)
    figures = []
    hh = np.asarray(h, dtype=np.float64)[..., None]
    for power in (1, 2, 3):
        coefficients = derivative(coefficients)
        if coefficients.shape[-1] == 0:
            figures.append(np.zeros_like(lowest))
            continue
        low, high = polynomial_range(coefficients)
        figures.append(np.maximum(np.abs(low), np.abs(high)) / hh**power)
    return SegmentExtremes(lowest, highest, *figures)
