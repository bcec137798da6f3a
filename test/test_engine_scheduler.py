# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Flow UniPC scheduler: schedule values, exactness, Euler equivalence, accuracy, reference."""

import math

import numpy as np
import pytest
import torch

from dreamzero_ros.engine.pipeline.scheduler import FlowUniPCScheduler, sample_noise, shifted_sigmas


def test_sigma_schedule_matches_shift_formula():
    sigmas = shifted_sigmas(16, shift=5.0)
    assert sigmas.dtype == np.float32 and sigmas.shape == (17,)
    base = np.linspace(0.999, 0.0, 17)[:-1]
    expected = 5.0 * base / (1.0 + 4.0 * base)
    np.testing.assert_allclose(sigmas[:-1], expected, rtol=1e-6)
    assert sigmas[-1] == 0.0
    assert np.all(np.diff(sigmas) < 0)
    # Shift keeps 0.999 near 1; the last nonzero sigma is 5 s / (1 + 4 s) with s = 0.999 / 16.
    assert sigmas[0] == pytest.approx(0.9998, abs=1e-4)
    assert sigmas[15] == pytest.approx(5 * 0.0624375 / (1 + 4 * 0.0624375), rel=1e-6)


def test_timesteps_are_truncated_sigmas_times_1000():
    scheduler = FlowUniPCScheduler(shift=5.0)
    scheduler.set_timesteps(16, 'cpu')
    assert scheduler.timesteps.dtype == torch.int64
    assert scheduler.sigmas.dtype == torch.float32
    expected = [int(float(s) * 1000) for s in shifted_sigmas(16, 5.0)[:-1].astype(np.float64)]
    assert scheduler.timesteps.tolist() == expected
    assert scheduler.timesteps[0].item() == 999
    assert len(scheduler.timesteps) == 16 and len(scheduler.sigmas) == 17


def _run(scheduler, velocity, sample):
    for t in scheduler.timesteps.tolist():
        sigma = float(scheduler.sigmas[scheduler.step_index])
        sample = scheduler.step(velocity(sample, sigma), t, sample)
    return sample


def test_straight_flow_is_integrated_exactly():
    generator = torch.Generator().manual_seed(0)
    x0 = torch.randn(2, 3, 5, generator=generator, dtype=torch.float64)
    noise = torch.randn(2, 3, 5, generator=generator, dtype=torch.float64)
    scheduler = FlowUniPCScheduler(shift=5.0)
    scheduler.set_timesteps(16)
    sigma0 = float(scheduler.sigmas[0])
    sample = (1 - sigma0) * x0 + sigma0 * noise
    trajectory = []

    def velocity(x, sigma):
        trajectory.append((x.clone(), sigma))
        return noise - x0

    result = _run(scheduler, velocity, sample)
    torch.testing.assert_close(result, x0, rtol=0, atol=1e-9)
    # Every intermediate sample lies on the straight path at its own sigma.
    for x, sigma in trajectory:
        torch.testing.assert_close(x, (1 - sigma) * x0 + sigma * noise, rtol=0, atol=1e-9)


def test_order_one_without_corrector_is_euler():
    generator = torch.Generator().manual_seed(1)
    sample = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    matrix = torch.randn(6, 6, generator=generator, dtype=torch.float64) * 0.3

    def velocity(x, sigma):
        return torch.tanh(x @ matrix) * (1 + sigma)

    scheduler = FlowUniPCScheduler(shift=3.0, solver_order=1, corrector=False)
    scheduler.set_timesteps(10)
    sigmas = scheduler.sigmas.double().tolist()
    euler = sample.clone()
    for i in range(10):
        euler = euler + (sigmas[i + 1] - sigmas[i]) * velocity(euler, sigmas[i])
    torch.testing.assert_close(_run(scheduler, velocity, sample), euler, rtol=1e-6, atol=1e-9)


def test_first_step_of_default_solver_is_euler():
    scheduler = FlowUniPCScheduler()
    scheduler.set_timesteps(16)
    sample = torch.linspace(-1, 1, 12, dtype=torch.float64)
    velocity = torch.cos(sample * 3)
    sigmas = scheduler.sigmas.double()
    expected = sample + (sigmas[1] - sigmas[0]) * velocity
    result = scheduler.step(velocity, scheduler.timesteps[0], sample)
    torch.testing.assert_close(result, expected, rtol=1e-6, atol=1e-9)


def _gaussian_flow(mean, std):
    """Exact velocity and flow map when x0 ~ N(mean, std^2) and noise ~ N(0, 1)."""

    def marginal_std(s):
        return math.sqrt((1 - s) ** 2 * std**2 + s**2)

    def velocity(x, s):
        dstd = (-(1 - s) * std**2 + s) / marginal_std(s)
        return -mean + dstd / marginal_std(s) * (x - (1 - s) * mean)

    def solution(x, s):
        return mean + std * (x - (1 - s) * mean) / marginal_std(s)

    return velocity, solution


def test_unipc_converges_faster_than_euler_on_a_gaussian_flow():
    # shift 1: with shift 5 the final jump from sigma 0.25 to 0 (x0 of a Gaussian posterior)
    # dominates the error of every solver.
    velocity, solution = _gaussian_flow(mean=0.7, std=0.8)
    start = torch.linspace(-2, 2, 9, dtype=torch.float64)
    errors = {}
    for name, kwargs in {
        'unipc': {},
        'euler': {'solver_order': 1, 'corrector': False},
    }.items():
        for steps in (16, 32):
            scheduler = FlowUniPCScheduler(shift=1.0, **kwargs)
            scheduler.set_timesteps(steps)
            exact = solution(start, float(scheduler.sigmas[0]))
            error = (_run(scheduler, velocity, start) - exact).abs().max().item()
            errors[name, steps] = error
    assert errors['unipc', 16] < 0.02
    assert errors['unipc', 16] * 5 < errors['euler', 16]
    # Halving the step: Euler's error halves (order 1), UniPC's drops by more than 3x.
    assert 1.7 < errors['euler', 16] / errors['euler', 32] < 2.3
    assert errors['unipc', 16] / errors['unipc', 32] > 3


def _reference_unipc(sigmas, velocities_fn, sample):
    """Literal UniPC-bh2 (x0 form) with the R/b systems solved numerically, as in the paper."""
    sig = [float(s) for s in sigmas]
    n = len(sig) - 1

    def lam(s):
        return math.log(1 - s) - math.log(s) if s > 0 else math.inf

    def b_vector(hh, order):
        h_phi_k = math.expm1(hh) / hh - 1
        factorial, b = 1, []
        for i in range(1, order + 1):
            b.append(h_phi_k * factorial / math.expm1(hh))
            factorial *= i + 1
            h_phi_k = h_phi_k / hh - 1 / factorial
        return b

    history, last_sample, prev_order = [], None, None
    for i in range(n):
        x0 = sample - sig[i] * velocities_fn(sample, sig[i])
        if last_sample is not None:
            t, s0 = sig[i], sig[i - 1]
            h = lam(t) - lam(s0)
            hh = -h
            base = t / s0 * last_sample - (1 - t) * math.expm1(hh) * history[-1]
            rks, d1s = [], []
            for k in range(1, prev_order):
                rk = (lam(sig[i - k - 1]) - lam(s0)) / h
                rks.append(rk)
                d1s.append((history[-k - 1] - history[-1]) / rk)
            rks.append(1.0)
            if prev_order == 1:
                rhos = [0.5]
            else:
                matrix = torch.tensor(
                    [[r ** (p - 1) for r in rks] for p in range(1, prev_order + 1)]
                )
                rhos = torch.linalg.solve(
                    matrix.double(), torch.tensor(b_vector(hh, prev_order)).double()
                ).tolist()
            corr = sum(r * d for r, d in zip(rhos[:-1], d1s, strict=True))
            sample = base - (1 - t) * math.expm1(hh) * (corr + rhos[-1] * (x0 - history[-1]))
        history.append(x0)
        last_sample = sample
        order = min(2, n - i, i + 1)
        t, s0 = sig[i + 1], sig[i]
        if t == 0:
            sample = x0
        else:
            h = lam(t) - lam(s0)
            hh = -h
            nxt = t / s0 * sample - (1 - t) * math.expm1(hh) * x0
            if order == 2:
                rk = (lam(sig[i - 1]) - lam(s0)) / h
                nxt = nxt - (1 - t) * math.expm1(hh) * 0.5 * (history[-2] - x0) / rk
            sample = nxt
        prev_order = order
    return sample


@pytest.mark.parametrize('steps', [1, 2, 3, 16])
def test_matches_literal_reference(steps):
    generator = torch.Generator().manual_seed(2)
    sample = torch.randn(3, 7, generator=generator, dtype=torch.float64)
    matrix = torch.randn(7, 7, generator=generator, dtype=torch.float64) * 0.5

    def velocity(x, sigma):
        return torch.sin(x @ matrix) + sigma * x

    scheduler = FlowUniPCScheduler(shift=5.0)
    scheduler.set_timesteps(steps)
    expected = _reference_unipc(scheduler.sigmas.tolist(), velocity, sample)
    torch.testing.assert_close(_run(scheduler, velocity, sample), expected, rtol=1e-9, atol=1e-9)


def test_reset_and_set_timesteps_replay_identically():
    scheduler = FlowUniPCScheduler()
    scheduler.set_timesteps(16)
    sample = torch.randn(5, generator=torch.Generator().manual_seed(3))

    def velocity(x, sigma):
        return x * sigma - 0.3

    first = _run(scheduler, velocity, sample)
    with pytest.raises(RuntimeError, match='past the end'):
        scheduler.step(sample, 0, sample)
    scheduler.reset()
    torch.testing.assert_close(_run(scheduler, velocity, sample), first, rtol=0, atol=0)
    scheduler.set_timesteps(16)
    torch.testing.assert_close(_run(scheduler, velocity, sample), first, rtol=0, atol=0)


def test_dtype_is_preserved_and_errors_are_clear():
    scheduler = FlowUniPCScheduler()
    scheduler.set_timesteps(4)
    sample = torch.randn(2, 3).to(torch.bfloat16)
    out = scheduler.step(torch.zeros_like(sample), scheduler.timesteps[0], sample)
    assert out.dtype == torch.bfloat16
    with pytest.raises(ValueError, match='expects timestep'):
        scheduler.step(torch.zeros_like(sample), 12345, sample)
    with pytest.raises(ValueError, match='shape'):
        scheduler.step(torch.zeros(5), int(scheduler.timesteps[1]), sample)
    with pytest.raises(ValueError, match='solver_order'):
        FlowUniPCScheduler(solver_order=3)
    with pytest.raises(ValueError, match='num_steps'):
        scheduler.set_timesteps(0)


def test_noise_is_reproducible_from_a_seeded_generator():
    a = sample_noise((2, 3), torch.Generator().manual_seed(1140))
    b = sample_noise((2, 3), torch.Generator().manual_seed(1140))
    c = sample_noise((2, 3), torch.Generator().manual_seed(1141))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert sample_noise((4,), torch.Generator(), torch.bfloat16).dtype == torch.bfloat16
