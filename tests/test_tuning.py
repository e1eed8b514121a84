"""Pilot tuning: reaches the target acceptance, freezes, serialises, and is used as is."""

import numpy as np
import pytest

from bread_stan.exact.conjugate import simulate_regression
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.ais.betas import sigmoidal
from bread_stan.ais.tuning import TunedKernel, TuningConfig, tune


@pytest.mark.parametrize("kernel, base, metric", [(HMC(), HMCParams(1.0, 8), False),
                                                   (NUTS(), NUTSParams(1.0, max_depth=8), True)])
def test_tuned_step_sizes_hit_the_target_acceptance(kernel, base, metric):
    model, _ = simulate_regression(40, 3, correlation=0.7, noise_sd=0.5, seed=1)
    rng = np.random.default_rng(0)
    config = TuningConfig(pilot_grid=8, pilot_steps=30, adapt_metric=metric, pilot_floor=1e-3,
                          metric="diag")
    tuned = tune(model, kernel, base, model.sample_prior(rng, 32), seed=3, config=config)
    target = 0.65 if isinstance(kernel, HMC) else 0.8
    # the pilot's mean acceptance over the late adaptation steps, 32 chains
    assert np.all(np.abs(tuned.accept - target) < 0.1), tuned.accept
    assert tuned.step_size[-1] < tuned.step_size[0]  # the posterior is narrower than the prior
    ks = tuned.schedule(sigmoidal(50))
    assert ks.kind == tuned.kind and ks.step_size.shape == (50,)
    assert (ks.inv_metric is not None) == metric
    # On exact posterior draws the frozen step size accepts at least about as
    # often as targeted (pilot chains lag behind the annealing, so tuning errs
    # towards smaller steps; HMC's acceptance is not monotone in the step size).
    n = 400
    state = initial_state(model, model.sample_posterior(rng, n))
    _, info = kernel.step(ChainRandom.from_seed(1, n), state, model, np.ones(n), ks.params_at(49))
    assert info.accept_stat.mean() > target - 0.1


def test_tuned_kernel_round_trip_gives_identical_schedules(tmp_path):
    tk = TunedKernel("nuts", np.array([0.0, 0.1, 1.0]), np.array([1.0, 0.5, 0.2]),
                     np.array([[1.0, 2.0], [0.5, 1.0], [0.1, 0.2]]), {"max_depth": 7}, 1e-3,
                     np.array([0.8, 0.8, 0.8]))
    tk.save(tmp_path / "tuning.json")
    back = TunedKernel.load(tmp_path / "tuning.json")
    a, b = tk.schedule(sigmoidal(30)), back.schedule(sigmoidal(30))
    np.testing.assert_array_equal(a.step_size, b.step_size)
    np.testing.assert_array_equal(a.inv_metric, b.inv_metric)
    assert a.params_at(3).max_depth == 7
    # interpolation passes through the grid values
    at_grid = tk.schedule(np.array([0.0, 0.1, 1.0]))
    np.testing.assert_allclose(at_grid.step_size, tk.step_size)
    back2 = KernelSchedule.from_dict(a.to_dict())
    p, q = back2.params_at(10), a.params_at(10)
    assert p.step_size == q.step_size and p.max_depth == q.max_depth
    np.testing.assert_array_equal(p.inv_metric, q.inv_metric)


# A tuning.json written by the code before the pilot's settings were renamed (commit
# 2563dc7: NUTS, depth 5, a dense metric at betas 0, 0.05 and 1), and the step sizes
# and inverse metrics its schedule gave at betas 0, 0.01, 0.5 and 1.
_OLD_TUNING = {
    "kind": "nuts", "grid_betas": [0.0, 0.05, 1.0],
    "step_size": [1.0562774921016103, 0.7021057406885939, 0.3517556816565851],
    "inv_metric": [[[1.1908925881500667, 0.28786909705204905],
                    [0.28786909705204905, 0.7388778418257058]],
                   [[0.8293837921777536, -0.06429593052439357],
                    [-0.06429593052439357, 0.3963736891384098]],
                   [[0.18736790893574926, -0.12934829834030095],
                    [-0.12934829834030095, 0.2591218815418618]]],
    "fixed": {"max_depth": 5, "step_size_jitter": 0.0, "rescue_prob": 0.0, "rescue_depth": 4},
    "beta_floor": 0.001,
    "accept": [0.4857199372207555, 0.09690613070164289, 0.059240428627872856],
    "seconds_per_transition": 0.00019112824776763255,
    "loglik_sd": [199.6100162370562, 18.36820112351807, 2.8211888747463427],
    "max_depth_share": [0.0, 0.0, 0.0], "gradients_per_transition": 2.0357142857142856,
    "pilot_gradients": 912.0, "separated": [False, False, False]}
_OLD_STEPS = [1.0562774921016103, 0.8233838690019245, 0.413075961917855, 0.3517556816565851]
_OLD_METRICS = [
    [[1.1908925881500665, 0.28786909705204905], [0.28786909705204905, 0.7388778418257058]],
    [[0.9381692226396141, 0.03826619451714599], [0.03826619451714599, 0.4927888393158234]],
    [[0.25509280025248393, -0.1323960491996926], [-0.1323960491996926, 0.2827684875729436]],
    [[0.18736790893574917, -0.12934829834030093], [-0.12934829834030093, 0.2591218815418619]]]


def test_a_tuning_json_saved_before_the_rename_loads_and_schedules_the_same(tmp_path):
    """A run directory's tuning.json from before the settings were renamed is read as it
    was, and its frozen schedule gives the same step sizes and dense metrics bit for bit
    (interpolated in the matrix logarithm); saving it again writes the same file."""
    from bread_stan.store import save_json
    save_json(tmp_path / "tuning.json", _OLD_TUNING)
    tuned = TunedKernel.load(tmp_path / "tuning.json")
    ks = tuned.schedule(np.array([0.0, 0.01, 0.5, 1.0]))
    np.testing.assert_array_equal(ks.step_size, _OLD_STEPS)
    np.testing.assert_array_equal(ks.inv_metric, _OLD_METRICS)
    assert tuned.beta_floor == 1e-3 and tuned.pilot_gradients == 912.0
    assert tuned.to_dict() == _OLD_TUNING


def _achieved_accept(model, kernel, tuned, n=400, reps=3):
    """Mean acceptance of the frozen kernel at each grid beta, on exact tempered draws."""
    rng = np.random.default_rng(5)
    ks = tuned.schedule(tuned.grid_betas)
    out = []
    for t, beta in enumerate(tuned.grid_betas):
        state = initial_state(model, model.sample_posterior(rng, n, beta=beta))
        chain_rng, acc = ChainRandom.from_seed(t, n), []
        for _ in range(reps):
            state, info = kernel.step(chain_rng, state, model, np.full(n, beta), ks.params_at(t))
            acc.append(info.accept_stat.mean())
        out.append(np.mean(acc))
    return np.array(out)


@pytest.mark.parametrize("metric", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_nuts_achieves_the_target_acceptance_at_every_grid_beta(metric):
    """The frozen step sizes, applied to exact draws of each grid beta's tempered
    posterior, accept about as often as targeted.

    Monte Carlo error of each figure (400 chains, 3 transitions) is about 0.01;
    the rest of the allowance is the pilot's own noise (32 chains, 30 adaptation
    steps).  Measured over pilot seeds 4-7: without metric adaptation every grid
    beta within 0.045 of 0.8; with it, dual averaging runs in two 15-step
    windows and errs towards smaller steps (0.81-0.87).  Hence: never more than
    0.05 below the target (too large a step), at most 0.1 above it.
    """
    model, _ = simulate_regression(200, 7, correlation=0.5, noise_sd=1.0, seed=1)
    prior = model.sample_prior(np.random.default_rng(4), 32)
    config = TuningConfig(pilot_grid=8, pilot_steps=30, adapt_metric=metric, pilot_floor=1e-3,
                          metric="diag")
    tuned = tune(model, NUTS(), NUTSParams(1.0, max_depth=8), prior, seed=4, config=config)
    achieved = _achieved_accept(model, NUTS(), tuned)
    assert np.all((achieved > 0.75) & (achieved < 0.9)), achieved
    if not metric:
        assert np.all(np.abs(achieved - 0.8) < 0.06), achieved
    assert np.all(np.abs(tuned.accept - 0.8) < 0.05), tuned.accept


def test_burn_in_runs_unadapted_transitions_and_keeps_the_format():
    model, _ = simulate_regression(40, 3, seed=2)
    prior = model.sample_prior(np.random.default_rng(0), 8)
    calls = []

    class Counting(HMC):
        def step(self, rng, state, target, beta, params, chains=None):
            calls.append(float(params.step_size))
            return super().step(rng, state, target, beta, params, chains)

    for burn_in in (0, 3):
        calls.clear()
        tuned = tune(model, Counting(), HMCParams(0.5, 4), prior, seed=1,
                     config=TuningConfig(pilot_grid=4, pilot_steps=6, burn_in=burn_in,
                                         adapt_metric=False, pilot_floor=1e-3, metric="diag"))
        assert len(calls) == 4 * 6 + 3 * burn_in  # no burn-in at beta = 0 (exact draws)
        if burn_in:  # burn-in at grid beta 2 uses the step size frozen at beta 1
            assert calls[6:9] == [tuned.step_size[0]] * 3
        assert set(tuned.to_dict()) == {"kind", "grid_betas", "step_size", "inv_metric",
                                        "fixed", "beta_floor", "accept", "seconds_per_transition",
                                        "loglik_sd", "max_depth_share",
                                        "gradients_per_transition", "pilot_gradients",
                                        "separated"}
        assert tuned.gradients_per_transition == 4.0  # HMC: its leapfrog steps, exactly
        assert TunedKernel.from_dict(tuned.to_dict()).gradients_per_transition == 4.0
        assert tuned.pilot_gradients == 4.0 * 8 * len(calls)  # 8 chains, every transition
        assert TunedKernel.from_dict(tuned.to_dict()).pilot_gradients == tuned.pilot_gradients
    calls.clear()  # one beta only (the simulator check's prior end)
    tuned = tune(model, Counting(), HMCParams(0.5, 4), prior, seed=1, at=np.zeros(1),
                 config=TuningConfig(pilot_steps=6, burn_in=3, adapt_metric=False,
                                     pilot_floor=1e-3, metric="diag"))
    assert len(calls) == 6 and tuned.grid_betas.tolist() == [0.0]
    with pytest.raises(ValueError, match="burn_in"):
        tune(model, HMC(), HMCParams(0.5, 4), prior, seed=1, config=TuningConfig(burn_in=-1))


def test_pilot_records_the_share_of_trees_at_the_maximum_depth():
    """Depth 1 is reached by every tree (one doubling is always built), so the share is
    exactly 1 at every grid beta and the note names it; depth 10 on a well-scaled 3-d
    posterior with an adapted metric is never reached (U-turns come after a few
    steps).  The share survives a save and load."""
    model, _ = simulate_regression(40, 3, correlation=0.3, noise_sd=0.5, seed=1)
    draws = model.sample_prior(np.random.default_rng(0), 16)
    config = TuningConfig(pilot_grid=4, pilot_steps=10, pilot_floor=1e-3, metric="diag")
    capped = tune(model, NUTS(), NUTSParams(0.5, max_depth=1), draws, seed=3, config=config)
    np.testing.assert_array_equal(capped.max_depth_share, np.ones(4))
    assert "maximum depth 1 (1 leapfrog steps a transition) in 100%" in capped.depth_note()
    back = TunedKernel.from_dict(capped.to_dict())
    np.testing.assert_array_equal(back.max_depth_share, capped.max_depth_share)
    free = tune(model, NUTS(), NUTSParams(0.5, max_depth=10), draws, seed=3, config=config)
    np.testing.assert_array_equal(free.max_depth_share, np.zeros(4))
    assert free.depth_note() is None
    hmc = tune(model, HMC(), HMCParams(0.5, 4), draws, seed=3, config=config)
    assert hmc.max_depth_share is None and hmc.depth_note() is None


def test_log_likelihoods_whose_sd_overflows_give_the_lowest_floor_without_a_warning():
    """Prior draws of heavy-tailed hyperparameters (cauchy scales) can give log
    likelihoods beyond 1e154, whose square overflows: the sd is then infinite, the floor
    the lowest allowed, and numpy's overflow warning does not reach the user."""
    import warnings
    from bread_stan.ais.pilot_grid import auto_floor
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        floor, n_grid = auto_floor(np.array([1e200, -1e200, 3.0]), 16, 1e-12)
    assert floor == 1e-12 and n_grid == 64  # 16 points over 3 decades -> 12 decades


def test_the_floor_from_a_saved_sd_is_the_floor_from_the_draws():
    """floor_for_sd (what scripts/studies/prior_dominated_betas.py rebuilds a run's
    pilot grid from) gives auto_floor's floor and grid size: 1/sd = 1e-5 spreads 16
    points over 3 decades into 27 over 5; sd 10 keeps the default floor."""
    from bread_stan.ais.pilot_grid import auto_floor, floor_for_sd, loglik_sd
    draws = np.random.default_rng(0).normal(0.0, 1e5, 64)
    sd = loglik_sd(draws)
    assert floor_for_sd(sd, 16) == auto_floor(draws, 16)
    floor, size = floor_for_sd(1e5, 16)
    assert floor == pytest.approx(1e-5) and size == 27   # 16 x 5.0 / 3.0004 decades
    assert floor_for_sd(10.0, 16) == (1e-3, 16) and floor_for_sd(0.0, 16) == (1e-3, 16)


class _SeparatedModes:
    """Prior N(0, 10^2) on each of 3 coordinates; the likelihood puts each coordinate
    near +5 or -5 with sd 0.1, so the posterior has 8 modes of variance 0.01 each,
    whose pooled spread (about 25 per coordinate) is the distance between them."""

    dim = 3

    def evaluate(self, x, gradient=True):
        from bread_stan.target import Evaluation
        up, down = -0.5 * ((x - 5) / 0.1) ** 2, -0.5 * ((x + 5) / 0.1) ** 2
        log_lik = np.logaddexp(up, down)
        w_up = np.exp(up - log_lik)
        grad_lik = (w_up * -(x - 5) + (1 - w_up) * -(x + 5)) / 0.01
        return Evaluation(-0.5 * np.sum((x / 10) ** 2, axis=1), log_lik.sum(axis=1),
                          -x / 100, grad_lik)


@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_chains_in_separate_modes_get_the_metric_of_one_mode(metric):
    """Pooled over chains in different modes, the metric would be about 25 (the
    distance between modes) and the step size about 0.02; from the spread within each
    chain it is the mode's variance 0.01.  Its estimate pools 32 chains x 12 draws
    (relative sd about sqrt(2 / 384) = 7%, more with autocorrelation): a factor 2 is
    wide.  Once the chains separate, the rest of the grid stays separated."""
    model = _SeparatedModes()
    draws = np.random.default_rng(0).normal(0, 10, (32, 3))
    tuned = tune(model, NUTS(), NUTSParams(1.0, max_depth=10), draws, seed=1,
                 config=TuningConfig(pilot_grid=8, pilot_floor=1e-3, metric=metric))
    final = tuned.inv_metric[-1]
    variances = np.diag(final) if final.ndim == 2 else final
    assert np.all((variances > 0.005) & (variances < 0.02)), variances
    assert tuned.step_size[-1] > 0.5
    assert tuned.separated[-1] and not tuned.separated[0]
    first = int(np.argmax(tuned.separated))
    assert np.all(tuned.separated[first:])
    assert "sat apart at" in tuned.separated_note()
    back = TunedKernel.from_dict(tuned.to_dict())
    np.testing.assert_array_equal(back.separated, tuned.separated)


def test_a_beta_after_separated_chains_starts_from_the_metric_within_chains():
    """Where the chains sat apart at a grid beta, the next grid beta's first window keeps
    the metric measured within chains there (exactly), instead of estimating one from the
    chains' pooled positions, which would be the distance between the modes again
    (about 25 per coordinate; a mode tempered at beta has variance 0.01 / beta)."""
    model = _SeparatedModes()
    draws = np.random.default_rng(0).normal(0, 10, (32, 3))
    first = {}  # the inverse metric of the first transition at each beta

    class Recording(NUTS):
        def step(self, rng, state, target, beta, params, chains=None):
            first.setdefault(float(beta[0]), np.array(params.inv_metric))
            return super().step(rng, state, target, beta, params, chains)

    tuned = tune(model, Recording(), NUTSParams(1.0, max_depth=10), draws, seed=1,
                 config=TuningConfig(pilot_grid=8, pilot_floor=1e-3, metric="diag",
                                     burn_in=0))
    after = np.flatnonzero(tuned.separated[:-1]) + 1
    assert after.size >= 2
    for i in after:
        np.testing.assert_array_equal(first[tuned.grid_betas[i]], tuned.inv_metric[i - 1])
        assert np.all(tuned.inv_metric[i - 1] < 1.0)  # pooled over the modes: about 25


def test_one_mode_keeps_the_pooled_metric():
    """A unimodal posterior is never flagged, so its metric is the pooled one."""
    model, _ = simulate_regression(40, 3, correlation=0.7, noise_sd=0.5, seed=1)
    draws = model.sample_prior(np.random.default_rng(0), 32)
    for metric in ("diag", "dense"):
        tuned = tune(model, NUTS(), NUTSParams(1.0, max_depth=8), draws, seed=3,
                     config=TuningConfig(pilot_grid=8, pilot_floor=1e-3, metric=metric))
        assert not tuned.separated.any() and tuned.separated_note() is None


def test_separated_chains_are_told_from_one_mode_exactly():
    """Two chains at -5 and +5 moving by +-1 over 4 transitions: within-chain variance
    4/3 (ddof 1), pooled variance 26 (ratio 19.5 < 100); at -50 and +50 the pooled
    variance is 2,501 (ratio 1,876 > 100).  A coordinate in which no chain moved has
    no width to measure, so nothing is flagged."""
    from bread_stan.ais.metric_estimates import chains_separated, within_chain_deviations
    wiggle = np.array([-1.0, 1.0, -1.0, 1.0])[:, None, None]
    near = wiggle + np.array([-5.0, 5.0])[None, :, None]
    far = wiggle + np.array([-50.0, 50.0])[None, :, None]
    np.testing.assert_allclose(np.var(within_chain_deviations(far), axis=0, ddof=0),
                               [4 / 3])  # each chain's variance with ddof 1
    assert not chains_separated(near) and chains_separated(far)
    frozen = far.copy()
    frozen[:, :, 0] = np.array([-50.0, 50.0])
    assert not chains_separated(frozen)
    assert not chains_separated(far[:1])
