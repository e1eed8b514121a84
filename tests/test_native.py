"""Native (C++) HMC and NUTS transitions against the Python kernels, bit for bit.

Same seed, same Stan target: the native kernels must consume the same random
numbers and return identical positions, evaluations, decisions (divergences,
gradient counts, tree depths, energy errors) over many transitions, for HMC and
NUTS, diagonal and dense metrics, at betas from 0 to 1 in one batch.  The one
tolerance: NUTS's acceptance statistic, a sum of exp(H0 - H) that numpy
computes with its own SIMD exp and the bridge with the C library's (they differ
in the last bit); it decides nothing.

d = 10 for the regressions, so the pairwise sums of numpy (blocks of 8) are
exercised; ``throws`` rejects and fails inside trajectories.
"""

from dataclasses import replace

import numpy as np
import pytest

from bread_stan.ais.gaussian_base import GaussianBase, GaussianBaseTarget
from bread_stan.ais.waypoint import PriorToBase
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.integrator import is_shared, per_chain_metric
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.stan.tempered import StanTarget

N_CHAINS, STEPS = 16, 12
BETAS = np.concatenate([[0.0, 1.0], np.geomspace(1e-4, 0.9, N_CHAINS - 2)])


def _data(kind: str) -> dict:
    rng = np.random.default_rng(7)
    n, k = 30, 8
    x = rng.normal(size=(n, k))
    eta = 0.2 + x @ rng.normal(size=k) * 0.5
    if kind == "logistic":
        return {"N": n, "K": k, "X": x, "y": (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)}
    return {"N": n, "K": k - 1, "X": x[:, :-1], "y": eta + 0.5 * rng.normal(size=n)}


@pytest.fixture(scope="module")
def targets(compiled):
    return {"linear": StanTarget(compiled["linear_regression"], _data("linear"), threads=2),
            "logistic": StanTarget(compiled["logistic_regression"], _data("logistic"),
                                   threads=2),
            "throws": StanTarget(compiled["throws"], {}, threads=2)}


def _dense_metric(d: int, seed: int) -> np.ndarray:
    """Per-chain symmetric positive-definite inverse metrics, strongly correlated."""
    a = np.random.default_rng(seed).normal(size=(N_CHAINS, d, d))
    m = np.einsum("nij,nkj->nik", a, a) / d + 0.2 * np.eye(d)
    return 0.5 * (m + np.swapaxes(m, 1, 2))


def _run(kernel, target, params, *, seed=3, steps=STEPS):
    d = target.dim
    start = np.random.default_rng(seed).normal(size=(N_CHAINS, d)) * 0.7
    if d == 1:
        start[:, 0] = np.linspace(-0.9, 0.9, N_CHAINS)
    rng = ChainRandom.from_seed(seed, N_CHAINS)
    state = initial_state(target, start)
    trace = []
    for _ in range(steps):
        state, info = kernel.step(rng, state, target, BETAS, params)
        trace.append((state, info))
    after = (rng.normal(3), rng.uniform(), rng.peek_log_uniform(3))
    return trace, after


def _assert_identical(python, native, *, accept_rtol):
    (p_trace, p_after), (n_trace, n_after) = python, native
    for (ps, pi), (ns, ni) in zip(p_trace, n_trace):
        np.testing.assert_array_equal(ns.position, ps.position)
        for name in ("log_prior", "log_lik", "grad_prior", "grad_lik"):
            np.testing.assert_array_equal(getattr(ns.evaluation, name),
                                          getattr(ps.evaluation, name))
        for name in ("divergent", "n_grad", "tree_depth", "energy_error"):
            np.testing.assert_array_equal(getattr(ni, name), getattr(pi, name))
        np.testing.assert_allclose(ni.accept_stat, pi.accept_stat, rtol=accept_rtol, atol=0)
    for a, b in zip(p_after, n_after):  # both consumed the same random numbers
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["linear", "logistic", "throws"])
@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_native_hmc_is_the_python_kernel(targets, name, metric):
    target = targets[name]
    d = target.dim
    inv_metric = (np.linspace(0.5, 2.0, d) if metric == "diag" else _dense_metric(d, 1))
    params = HMCParams(step_size=np.linspace(0.05, 0.6, N_CHAINS), n_leapfrog=6,
                       inv_metric=inv_metric, step_size_jitter=0.3, rescue_prob=0.1)
    python = _run(HMC(native=False), target, params)
    native = _run(HMC(native=True), target, params)
    _assert_identical(python, native, accept_rtol=0)
    infos = [info for _, info in python[0]]
    accepted = np.mean([np.mean(i.accept_stat) for i in infos])
    assert 0.05 < accepted < 1.0  # both decisions were taken
    if name == "throws":
        assert any(i.divergent.any() for i in infos)  # trajectories left the support


@pytest.mark.parametrize("name", ["linear", "logistic", "throws"])
@pytest.mark.parametrize("metric", ["diag", "dense"])
@pytest.mark.parametrize("rescue", [0.0, 0.3])
def test_native_nuts_is_the_python_kernel(targets, name, metric, rescue):
    target = targets[name]
    d = target.dim
    inv_metric = (np.linspace(0.5, 2.0, d) if metric == "diag" else _dense_metric(d, 2))
    # rescue > 0: rescued chains build shallower trees in a second call of their own
    params = NUTSParams(step_size=np.geomspace(0.02, 1.5, N_CHAINS), inv_metric=inv_metric,
                        max_depth=7, step_size_jitter=0.2 if rescue else 0.0,
                        rescue_prob=rescue, rescue_depth=3)
    python = _run(NUTS(native=False), target, params)
    native = _run(NUTS(native=True), target, params)
    _assert_identical(python, native, accept_rtol=1e-13)
    infos = [info for _, info in python[0]]
    depths = np.concatenate([i.tree_depth for i in infos])
    assert depths.min() <= 2 and depths.max() == 7  # short trees, U-turns and the cap
    if name == "throws":
        assert any(i.divergent.any() for i in infos)


@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_a_shared_metric_gives_what_the_same_metric_per_chain_gives(targets, metric):
    # One metric for all chains goes to the native kernels once (stride 0, flagged
    # shared), not copied per chain: every kernel gives the same bits as with n copies.
    target = targets["linear"]
    d = target.dim
    shared = np.linspace(0.5, 2.0, d) if metric == "diag" else _dense_metric(d, 3)[:1]
    copies = np.repeat(shared[None] if metric == "diag" else shared, N_CHAINS, axis=0)
    assert is_shared(per_chain_metric(shared, N_CHAINS, d))
    assert not is_shared(per_chain_metric(copies, N_CHAINS, d))
    for kernel, params in (
            (HMC, HMCParams(step_size=np.linspace(0.05, 0.6, N_CHAINS), n_leapfrog=6,
                            step_size_jitter=0.3, rescue_prob=0.1)),
            (NUTS, NUTSParams(step_size=np.geomspace(0.02, 1.5, N_CHAINS), max_depth=7,
                              step_size_jitter=0.2, rescue_prob=0.3, rescue_depth=3))):
        runs = [_run(kernel(native=native), target, replace(params, inv_metric=m), steps=6)
                for native in (True, False) for m in (shared, copies)]
        for other in runs[1:]:
            _assert_identical(runs[0], other, accept_rtol=1e-13)


def test_native_nuts_short_look_ahead_is_rerun(targets):
    """Trees that need more log-uniforms than the native kernel was shown are run again
    with all they can use: the result does not depend on the look-ahead."""
    target = targets["linear"]
    params = NUTSParams(step_size=0.05, max_depth=6)
    reference = _run(NUTS(native=False), target, params, steps=4)
    native = _run(_StarvedNUTS(), target, params, steps=4)
    _assert_identical(reference, native, accept_rtol=1e-13)


class _StarvedNUTS(NUTS):
    """NUTS whose native kernel is shown two log-uniforms per chain at every step."""

    def __init__(self):
        super().__init__(native=True)

    def step(self, *args, **kwargs):
        self._lookahead = 2
        return super().step(*args, **kwargs)


def test_native_results_do_not_depend_on_threads(compiled):
    data = _data("linear")
    params = NUTSParams(step_size=0.2, max_depth=5)
    runs = [_run(NUTS(), StanTarget(compiled["linear_regression"], data, threads=t), params,
                 steps=4) for t in (1, 2)]
    _assert_identical(runs[0], runs[1], accept_rtol=0)


def test_joint_target_native_nuts_is_the_python_kernel(targets):
    joint = targets["linear"].joint()
    params = NUTSParams(step_size=0.15, max_depth=6)
    _assert_identical(_run(NUTS(native=False), joint, params, steps=6),
                      _run(NUTS(native=True), joint, params, steps=6), accept_rtol=1e-13)
    ev = joint.evaluate(np.zeros((2, joint.dim)))
    assert np.all(ev.log_lik == 0) and np.all(ev.grad_lik == 0)


def _gaussian_base(target, kind: str) -> GaussianBase:
    """A base N(m, S) in the model's unconstrained space: diagonal S, or dense and
    strongly correlated."""
    d = target.dim
    mean = np.linspace(-0.3, 0.4, d)
    if kind == "diag":
        return GaussianBase(mean, np.diag(np.linspace(0.3, 1.5, d)))
    return GaussianBase(mean, _dense_metric(d, 4)[0])


def _assert_native_hmc_and_nuts_match(target, *, expect_divergent: bool) -> None:
    """8 HMC and 8 NUTS transitions (jittered, rescued, dense and diagonal metrics):
    native and Python kernels identical, bit for bit (NUTS's acceptance to 1e-13)."""
    d = target.dim
    for kernel, params, rtol in (
            (HMC, HMCParams(step_size=np.linspace(0.05, 0.6, N_CHAINS), n_leapfrog=6,
                            inv_metric=_dense_metric(d, 1), step_size_jitter=0.3,
                            rescue_prob=0.1), 0),
            (NUTS, NUTSParams(step_size=np.geomspace(0.02, 1.5, N_CHAINS),
                              inv_metric=np.linspace(0.5, 2.0, d), max_depth=7,
                              step_size_jitter=0.2, rescue_prob=0.3, rescue_depth=3), 1e-13)):
        python = _run(kernel(native=False), target, params, steps=8)
        _assert_identical(python, _run(kernel(native=True), target, params, steps=8),
                          accept_rtol=rtol)
        if expect_divergent:
            assert any(i.divergent.any() for _, i in python[0])


@pytest.mark.parametrize("name", ["logistic", "throws"])
@pytest.mark.parametrize("base", ["diag", "dense"])
def test_gaussian_base_target_native_kernels_are_the_python_kernels(targets, name, base):
    # The path from a Gaussian base q0 to the joint (subjective, AIDE): log q0 is
    # evaluated in C++ too, and every transition must be the Python kernel's, bit for bit.
    target = GaussianBaseTarget(targets[name].full_model, _gaussian_base(targets[name], base))
    assert target.native is not None
    _assert_native_hmc_and_nuts_match(target, expect_divergent=name == "throws")


@pytest.mark.parametrize("name", ["logistic", "throws"])
@pytest.mark.parametrize("base", ["diag", "dense"])
def test_waypoint_first_leg_native_kernels_are_the_python_kernels(targets, name, base):
    # Leg 1 of the waypoint path, prior -> q0 (PriorToBase): the prior instance and log q0
    # in C++ (prior_base_point), every transition the Python kernel's, bit for bit.  For
    # ``throws`` q0 sits at x = 3.5, where the prior rejects, so trajectories fail there.
    q0 = _gaussian_base(targets[name], base)
    if name == "throws":
        q0 = GaussianBase(q0.mean + 3.5, q0.cov)
    target = PriorToBase(targets[name], q0)
    assert target.native is not None
    _assert_native_hmc_and_nuts_match(target, expect_divergent=name == "throws")


def test_native_setting(monkeypatch, targets):
    assert targets["linear"].native is not None
    monkeypatch.setenv("BREAD_STAN_NATIVE", "0")
    assert not HMC().native and not NUTS().native and NUTS(native=True).native
    monkeypatch.delenv("BREAD_STAN_NATIVE")
    assert HMC().native


def test_look_ahead_stream_values_do_not_depend_on_how_far_one_looks():
    chains = np.array([0, 2])
    a = ChainRandom.from_seed(9, 3)
    b = ChainRandom.from_seed(9, 3)
    far = a.peek_log_uniform(9000, chains)  # wider than a buffer block
    a.advance_log_uniform([5, 4100], chains)
    for count in (2, 3):  # the same positions, reached in small steps
        b.peek_log_uniform(1, chains)
        b.advance_log_uniform(count, chains)
    b.peek_log_uniform(4095, chains)
    b.advance_log_uniform([0, 4095], chains)
    np.testing.assert_array_equal(a.peek_log_uniform(7, chains), b.peek_log_uniform(7, chains))
    np.testing.assert_array_equal(a.peek_log_uniform(7, chains)[0], far[0, 5:12])
    np.testing.assert_array_equal(a.peek_log_uniform(7, chains)[1], far[1, 4100:4107])
    assert np.all(far <= 0) and np.isfinite(far).all()
    # the look-ahead stream is separate: normals and uniforms are unchanged by it
    c = ChainRandom.from_seed(9, 3)
    np.testing.assert_array_equal(a.normal(2), c.normal(2))
    with pytest.raises(ValueError, match="negative"):
        a.advance_log_uniform(-1)
    with pytest.raises(ValueError, match="more draws than were looked at"):
        a.advance_log_uniform(10 ** 6)


def test_native_kernel_without_gradients_says_so(targets):
    target = targets["linear"]
    state = initial_state(target, np.zeros((2, target.dim)), gradient=False)
    with pytest.raises(ValueError, match="needs gradients"):
        NUTS().step(ChainRandom.from_seed(0, 2), state, target, np.ones(2), NUTSParams(0.1))
