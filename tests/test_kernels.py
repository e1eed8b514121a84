"""HMC and NUTS kernels: exactness against a transcription of Stan's algorithm,
invariance of known distributions, batch independence, non-finite densities.

Statistical checks use fixed seeds and z-scores of moment estimates over
independent chains; with ~20 statistics per test a |z| < 4.5 tolerance gives a
false-alarm rate below 1e-4 per test.
"""

import warnings

import numpy as np
import pytest

from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.target import Evaluation

Z_TOL = 4.5


class TruncatedGaussian:
    """Correlated Gaussian 'likelihood' times N(0, I) prior, truncated to x[0] < 1.2.

    The truncation makes proposals land where the density is zero, exercising
    divergences and rejections.
    """

    def __init__(self, d=3, rho=0.7, cut=1.2):
        self.d, self.cut = d, cut
        cov = np.full((d, d), rho) + (1 - rho) * np.eye(d)
        self.prec = np.linalg.inv(cov)

    @property
    def dim(self):
        return self.d

    def evaluate(self, x, *, gradient=True):
        x = np.asarray(x, float)
        inside = x[:, 0] < self.cut
        lp = np.where(inside, -0.5 * np.einsum("ij,ij->i", x, x), -np.inf)
        px = np.einsum("ij,jk->ik", x, self.prec)
        ll = -0.5 * np.einsum("ij,ij->i", x, px)
        if not gradient:
            return Evaluation(lp, ll)
        return Evaluation(lp, ll, -x, -px)

    def logp_grad(self, x, beta):
        ev = self.evaluate(x[None, :])
        return ev.log_prior[0] + beta * ev.log_lik[0], ev.grad_prior[0] + beta * ev.grad_lik[0]


# -- a literal, recursive, single-chain transcription of Stan's base_nuts ----------

class _StanNUTSReference:
    """Stan's ``base_nuts::transition``/``build_tree`` for one chain, recursively.

    Random numbers are consumed like the vectorised kernel: the momentum from the
    normal stream; from the look-ahead stream of log-uniforms the first direction,
    one per merge of two valid subtrees, then per completed subtree the jump to
    it and (if the trajectory goes on) the next direction.
    """

    def __init__(self, rng, logp_grad, eps, minv, max_depth):
        self.rng, self.logp_grad = rng, logp_grad
        self.eps, self.minv, self.max_depth = eps, minv, max_depth

    def _log_u(self):
        value = self.rng.peek_log_uniform(1)[0, 0]
        self.rng.advance_log_uniform(1)
        return value

    def _H(self, z):
        return 0.5 * np.dot(self.minv * z["p"], z["p"]) - z["lp"]

    def _evolve(self, z, sign):
        e = sign * self.eps
        p_half = z["p"] + 0.5 * e * z["g"]
        q = z["q"] + e * (self.minv * p_half)
        lp, g = self.logp_grad(q)
        return {"q": q, "p": p_half + 0.5 * e * g, "g": g, "lp": lp}

    def _crit(self, ps_minus, ps_plus, rho):
        return np.dot(ps_plus, rho) > 0 and np.dot(ps_minus, rho) > 0

    def _build_tree(self, depth, z, sign, H0):
        if depth == 0:
            z = self._evolve(z, sign)
            self.n_leapfrog += 1
            h = self._H(z)
            if np.isnan(h):
                h = np.inf
            if h - H0 > 1000:
                self.divergent = True
            self.sum_metro += 1 if H0 - h > 0 else np.exp(H0 - h)
            ps = self.minv * z["p"]
            return (not self.divergent, z, z, ps, ps, z["p"].copy(), z["p"], z["p"], H0 - h)
        ok, z, prop_i, ps_beg, ps_i_end, rho_i, p_beg, p_i_end, lsw_i = self._build_tree(
            depth - 1, z, sign, H0)
        if not ok:
            return (False, z) + (None,) * 7
        ok, z, prop_f, ps_f_beg, ps_end, rho_f, p_f_beg, p_end, lsw_f = self._build_tree(
            depth - 1, z, sign, H0)
        if not ok:
            return (False, z) + (None,) * 7
        lsw = np.logaddexp(lsw_i, lsw_f)
        prop = prop_f if self._log_u() < lsw_f - lsw else prop_i
        rho = rho_i + rho_f
        ok = (self._crit(ps_beg, ps_end, rho) and self._crit(ps_beg, ps_f_beg, rho_i + p_f_beg)
              and self._crit(ps_i_end, ps_end, rho_f + p_i_end))
        return ok, z, prop, ps_beg, ps_end, rho, p_beg, p_end, lsw

    def transition(self, q):
        d = q.size
        p = self.rng.normal(d)[0] / np.sqrt(self.minv)
        lp, g = self.logp_grad(q)
        z0 = {"q": q, "p": p, "g": g, "lp": lp}
        H0 = self._H(z0)
        z_fwd = z_bck = z0
        sample = z0
        ps = self.minv * p
        p_ff = p_fb = p_bf = p_bb = p
        ps_ff = ps_fb = ps_bf = ps_bb = ps
        rho, lsw = p.copy(), 0.0
        self.n_leapfrog, self.sum_metro, self.divergent = 0, 0.0, False
        depth = 0
        forward = self._log_u() < np.log(0.5)
        while depth < self.max_depth:
            if forward:
                rho_b, p_bf, ps_bf = rho, p_ff, ps_ff
                ok, z_fwd, prop, ps_fb, ps_ff, rho_f, p_fb, p_ff, lsw_sub = self._build_tree(
                    depth, z_fwd, 1, H0)
            else:
                rho_f, p_fb, ps_fb = rho, p_bb, ps_bb
                ok, z_bck, prop, ps_bf, ps_bb, rho_b, p_bf, p_bb, lsw_sub = self._build_tree(
                    depth, z_bck, -1, H0)
            if not ok:
                break
            depth += 1
            if self._log_u() < lsw_sub - lsw:
                sample = prop
            lsw = np.logaddexp(lsw, lsw_sub)
            rho = rho_b + rho_f
            ok = (self._crit(ps_bb, ps_ff, rho) and self._crit(ps_bb, ps_fb, rho_b + p_fb)
                  and self._crit(ps_bf, ps_ff, rho_f + p_bf))
            if not ok or depth == self.max_depth:
                break
            forward = self._log_u() < np.log(0.5)
        return sample["q"], self.sum_metro / self.n_leapfrog, depth, self.n_leapfrog, self.divergent


@pytest.mark.parametrize("max_depth", [3, 10])
def test_nuts_matches_recursive_stan_transcription(max_depth):
    target = TruncatedGaussian()
    n, d, beta = 24, target.dim, 0.7
    eps = np.linspace(0.05, 1.6, n)  # from long trees to frequent divergences
    minv = np.array([1.0, 0.5, 2.0])
    x0 = np.random.default_rng(0).normal(size=(n, d)) * 0.5
    x0[:, 0] = np.minimum(x0[:, 0], 1.0)
    rng = ChainRandom.from_seed(11, n)
    state = initial_state(target, x0)
    params = NUTSParams(step_size=eps, inv_metric=minv, max_depth=max_depth)
    kernel, infos = NUTS(), []
    for _ in range(4):
        state, info = kernel.step(rng, state, target, np.full(n, beta), params)
        infos.append(info)
    n_div = 0
    for i in range(n):
        ref = _StanNUTSReference(ChainRandom.from_seed(11, 1, first_chain=i),
                                 lambda q: target.logp_grad(q, beta), eps[i], minv, max_depth)
        q = x0[i]
        for s in range(4):
            q, acc, depth, n_leap, div = ref.transition(q)
            assert infos[s].tree_depth[i] == depth
            assert infos[s].n_grad[i] == n_leap
            assert infos[s].divergent[i] == div
            assert infos[s].accept_stat[i] == pytest.approx(acc, rel=1e-9, abs=1e-12)
            n_div += div
        np.testing.assert_allclose(state.position[i], q, rtol=1e-9, atol=1e-12)
    assert n_div > 0  # the divergence path was exercised


def _moment_z(x, mean, cov):
    """z-scores of the sample means and variances of independent draws x (n, d)."""
    n = x.shape[0]
    var = np.diag(cov)
    z_mean = (x.mean(0) - mean) / np.sqrt(var / n)
    centred = (x - mean) ** 2
    z_var = (centred.mean(0) - var) / np.sqrt(2 * var ** 2 / n)  # Gaussian 4th moment
    return np.concatenate([z_mean, z_var])


@pytest.mark.parametrize("kernel, params", [
    (HMC(), HMCParams(step_size=0.25, n_leapfrog=7)),
    (HMC(), HMCParams(step_size=0.4, n_leapfrog=7, step_size_jitter=0.9, rescue_prob=0.3)),
    (NUTS(), NUTSParams(step_size=0.3)),
    # the two NUTS variants below in the slow tier (the fast tier's minute)
    pytest.param(NUTS(), NUTSParams(step_size=0.3, inv_metric=np.array([0.3, 1.0, 3.0]),
                                    max_depth=4), marks=pytest.mark.slow),
    pytest.param(NUTS(), NUTSParams(step_size=0.4, step_size_jitter=0.5, rescue_prob=0.3,
                                    rescue_depth=2, max_depth=6), marks=pytest.mark.slow),
])
@pytest.mark.parametrize("beta", [1.0, 0.05])
def test_kernels_leave_tempered_conjugate_posterior_invariant(kernel, params, beta):
    model, _ = simulate_regression(25, 3, correlation=0.8, seed=2)
    mean, cov = model.tempered_posterior(beta)
    n = 2000
    rng = np.random.default_rng(1)
    state = initial_state(model, model.sample_posterior(rng, n, beta))
    crng = ChainRandom.from_seed(5, n)
    for _ in range(10):
        state, info = kernel.step(crng, state, model, np.full(n, beta), params)
    z = _moment_z(state.position, mean, cov)
    assert np.all(np.abs(z) < Z_TOL), z
    ev = model.evaluate(state.position)  # the state's cached evaluation is right
    np.testing.assert_allclose(state.evaluation.log_lik, ev.log_lik)
    np.testing.assert_allclose(state.evaluation.grad_lik, ev.grad_lik)


def test_nuts_reproduces_analytic_posterior_moments_from_one_start():
    """Many NUTS transitions from a bad start reach the analytic posterior."""
    model, _ = simulate_regression(40, 4, correlation=0.9, seed=3)
    mean, cov = model.tempered_posterior(1.0)
    n = 500
    state = initial_state(model, np.full((n, 4), 3.0))
    crng = ChainRandom.from_seed(7, n)
    for _ in range(40):
        state, _ = NUTS().step(crng, state, model, np.ones(n), NUTSParams(step_size=0.1))
    z = _moment_z(state.position, mean, cov)
    assert np.all(np.abs(z) < Z_TOL), z


def test_uncorrected_hmc_is_caught_by_the_moment_test():
    """Negative control: dropping the Metropolis step at a big step size must fail."""
    model, _ = simulate_regression(25, 3, correlation=0.8, seed=2)
    mean, cov = model.tempered_posterior(1.0)
    n = 3000
    state = initial_state(model, model.sample_posterior(np.random.default_rng(1), n))
    step = 0.9 * np.sqrt(np.linalg.eigvalsh(cov).min()) * 2  # near the stability limit
    from bread_stan.kernels.integrator import leapfrog, tempered_grad
    crng = ChainRandom.from_seed(5, n)
    q = state.position
    ev = state.evaluation
    for _ in range(15):
        p = crng.normal(3)
        g = tempered_grad(ev, np.ones(n))
        for _ in range(5):
            q, p, g, ev = leapfrog(model, q, p, g, np.full(n, step), np.ones((n, 3)), np.ones(n))
    z = _moment_z(q, mean, cov)
    assert np.max(np.abs(z)) > 10


@pytest.mark.parametrize("kernel, params", [(HMC(), HMCParams(0.3, 5)), (NUTS(), NUTSParams(0.3))])
def test_results_do_not_depend_on_batch_composition(kernel, params):
    model, _ = simulate_regression(20, 3, seed=4)
    x = model.sample_prior(np.random.default_rng(0), 20)
    beta = np.linspace(0, 1, 20)

    def run(chains):
        rng = ChainRandom.from_seed(3, 20)
        state = initial_state(model, x[chains])
        for _ in range(5):
            state, info = kernel.step(rng, state, model, beta[chains], params, chains=chains)
        return state.position, info

    alone, info_alone = run(np.arange(10))
    batch, info_batch = run(np.arange(20))
    shuffled, _ = run(np.arange(20)[::-1])
    np.testing.assert_array_equal(alone, batch[:10])
    np.testing.assert_array_equal(batch, shuffled[::-1])
    np.testing.assert_array_equal(info_alone.n_grad, info_batch.n_grad[:10])


@pytest.mark.parametrize("kernel, params", [(HMC(), HMCParams(0.8, 20)), (NUTS(), NUTSParams(0.8))])
def test_non_finite_density_is_a_rejection_not_a_crash(kernel, params):
    target = TruncatedGaussian(cut=0.0)
    n = 200
    x = -np.abs(np.random.default_rng(0).normal(size=(n, 3)))
    state = initial_state(target, x)
    rng = ChainRandom.from_seed(0, n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarnings
        for _ in range(5):
            state, info = kernel.step(rng, state, target, np.ones(n), params)
    assert np.all(state.position[:, 0] < 0.0)
    assert np.all(np.isfinite(state.evaluation.log_prior))
    assert info.divergent.any()
    assert np.all((info.accept_stat >= 0) & (info.accept_stat <= 1))


def test_hmc_energy_error_shrinks_with_step_size():
    """Leapfrog is second order: the energy error falls ~ step^2."""
    model, _ = simulate_regression(20, 3, seed=5)
    n = 200
    x = model.sample_posterior(np.random.default_rng(2), n)
    errs = []
    for eps in (0.02, 0.01):
        state = initial_state(model, x)
        _, info = HMC().step(ChainRandom.from_seed(1, n), state, model, np.ones(n),
                             HMCParams(eps, int(0.4 / eps)))
        errs.append(np.sqrt(np.mean(info.energy_error ** 2)))
    assert 3.0 < errs[0] / errs[1] < 5.0


class _SteepGaussian:
    """Prior N(0, 1), likelihood exp(-c x^2 / 2): at beta = 1 the target has sd 0.01."""

    dim = 1
    c = 1e4 - 1.0

    def evaluate(self, points, gradient=True):
        x = points[:, 0]
        return Evaluation(-0.5 * x ** 2, -0.5 * self.c * x ** 2,
                          -points.copy(), -self.c * points)


@pytest.mark.parametrize("kernel, make", [
    (HMC(), lambda rescue: HMCParams(step_size=0.5, n_leapfrog=10, rescue_prob=rescue)),
    pytest.param(NUTS(), lambda rescue: NUTSParams(step_size=0.5, max_depth=6, rescue_prob=rescue),
                 marks=pytest.mark.slow),  # in the slow tier (the fast tier's minute)
])
def test_rescue_steps_free_chains_stranded_far_from_a_narrow_mode(kernel, make):
    # A step size of 0.5 suits sd 1, not sd 0.01: from x = 3 every leapfrog
    # trajectory blows up, so plain HMC rejects every proposal and NUTS diverges
    # at its first step.  Rescue steps (step size times 10^-U(0, 3)) are stable
    # below 0.02, about half of them.
    target, n = _SteepGaussian(), 50
    start = np.full((n, 1), 3.0)
    ends = {}
    for rescue in (0.0, 0.2):
        state = initial_state(target, start, gradient=True)
        rng = ChainRandom.from_seed(3, n)
        for _ in range(300):
            state, info = kernel.step(rng, state, target, np.ones(n), make(rescue))
        ends[rescue] = state.position[:, 0]
    assert np.all(ends[0.0] == 3.0)
    assert np.all(np.abs(ends[0.2]) < 0.05)


def test_nuts_rescue_transitions_build_shallow_trees():
    """Exactly the rescued transitions (read from the chains' uniform streams, as
    the kernel draws them) stop at ``rescue_depth``; the others reach deeper."""
    model, _ = simulate_regression(25, 3, correlation=0.8, seed=2)
    n, seed = 400, 8
    state = initial_state(model, model.sample_posterior(np.random.default_rng(1), n))
    params = NUTSParams(step_size=0.02, max_depth=7, rescue_prob=0.5, rescue_depth=2)
    _, info = NUTS().step(ChainRandom.from_seed(seed, n), state, model, np.ones(n), params)
    rescued = ChainRandom.from_seed(seed, n).uniform(np.arange(n)) < params.rescue_prob
    assert 100 < rescued.sum() < 300
    assert np.all(info.tree_depth[rescued] <= 2) and np.all(info.n_grad[rescued] <= 3)
    assert np.all(info.tree_depth[~rescued] > 2)


def test_step_size_randomisation_is_validated():
    for params in (HMCParams, NUTSParams):
        with pytest.raises(ValueError, match="rescue_prob"):
            params(rescue_prob=1.0)
        with pytest.raises(ValueError, match="step_size_jitter"):
            params(step_size_jitter=-0.1)
    with pytest.raises(ValueError, match="rescue_depth"):
        NUTSParams(rescue_depth=0)


def test_more_coordinates_than_a_random_block_draw_the_same_in_any_batch():
    """A model with more coordinates than the streams' block (4096; posteriordb's
    nn_rbm1bJ10 has 7,951) draws its momenta in one call: the block widens before the
    first draw, and chains 2-3 of a batch of 4 get the numbers a batch of their own gets."""
    d = 5000
    whole = ChainRandom.from_seed(3, 4)
    part = ChainRandom.from_seed(3, 2, first_chain=2)
    for _ in range(3):
        np.testing.assert_array_equal(whole.normal(d)[2:], part.normal(d))
        np.testing.assert_array_equal(whole.uniform()[2:], part.uniform())
    assert np.all(np.isfinite(whole.normal(d))) and whole.normal(d).std() > 0.9
