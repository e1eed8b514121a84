"""The verdict on a BREAD run, one number of distributions T at a time, in words.

At each T the per-chain estimates face two questions.

1. **Are they consistent?**  Reverse (upper) estimates must not sit below forward
   (lower) ones: E[U] - E[L] >= J >= 0.  Two tests ask this; either one firing
   makes the step *inconsistent*, and its bound is never reported as a divergence:

   - the tail-bound test (:func:`~.estimators.consistency_check`): exact under the
     AIS tail bounds with no assumption on the estimates' distribution, but it
     needs a gap of tens of nats (about 17 with 100 + 100 chains) to fire;
   - the sign test (:func:`~.estimators.sign_test`): one-sided, H0 E[U] - E[L] >= 0,
     Welch's t from the spread of the chains (or Student's t from the spread of the
     simulated problems in multi-draw mode), at ``sign_alpha`` divided by the number
     of step counts (Bonferroni, so a correct run is flagged at some T with
     probability at most ``sign_alpha``).  It sees a bound of -3 nats with a few
     dozen chains.  With one exact draw it is conditional on x*: close to
     convergence an unlucky x* can make E[U | x*] - E[L] slightly negative.
     Near convergence it works at its boundary, where a correct run is flagged at
     close to its level by chance alone; a step flagged by it alone is told to
     rerun with another seed (a bug fires again).  On eight schools (posteriordb's,
     ``scripts/studies/sign_test_eight_schools.py``) correct runs of 30 + 30 chains at
     T = 100, 1000 were flagged at 0.19% on average over 10 simulated problems and
     at most 0.59% (the normal quantile used before: 0.24% and 0.75%); about one
     forward chain in 550 strands in the half-Cauchy prior's tail there, and such
     chains never cause a false alarm.

   Calibration (``scripts/studies/verdict_calibration.py``: conjugate regression, fixed
   HMC(step 0.15, L = 10) and the default kernel NUTS(step 0.15, 10% rescue steps)):
   in 300 correct single-draw runs of 30 + 30 chains at each T from 10 to 1000
   (bounds 25 down to 0.13 nats) neither test fired once with either kernel, so
   conditioning on x* cost no false alarms at ``sign_alpha`` = 0.01. With the reverse
   estimates shifted down so that the bound is -1.3 (HMC) or -1.6 (NUTS) nats, the
   sign test fired in every run; at -0.55 nats (NUTS) in 78.5% of runs with 30 + 30
   chains and 99.5% with 100 + 100, at -0.27 (HMC) in 17% and 38.5% (the normal
   quantile it used before Welch's t: 80.5%, 99.5%, 17.5%, 40% on the same runs). The tail-bound
   test fired at none of the shifts up to 8 nats, as its threshold says. How much a
   single draw narrows the interval depends on the kernel: the 90% single-draw
   interval covered 74% of runs with HMC but 88% with NUTS, whose reverse chains
   forget x* faster; the multi-draw interval covered 88% and 96%.

2. **How close is AIS?**  A consistent step is *converged* when the upper end of
   the bound's interval is at most ``converged_nats`` (default 1 nat; for two
   Gaussians with one covariance, J = 1 nat means the means are one standard
   deviation apart along some direction), and *not converged* otherwise.  The
   evidence says whether a few forward chains carry the bound (stranded in the
   prior's tails) while the others agree with the reverse chains, or whether the
   forward chains as a whole are far from the reverse ones.

What no verdict here can see: a simulator that is wrong in a way the reverse
kernel repairs (a too-wide prior, a wrong noise scale: the bound stays positive);
that is the simulator check's job, and a report of a run without a passed check
says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .estimators import ConsistencyCheck, JeffreysBound, SignTest, sign_test
from ..errors import InputError

__all__ = ["VerdictSettings", "StepVerdict", "judge_step"]

STEPS_REMEDY = " Next: the same command with"


@dataclass(frozen=True)
class VerdictSettings:
    """Levels and scales of the verdict (see the module docstring)."""

    level: float = 0.95
    tail_alpha: float = 1e-3
    sign_alpha: float = 0.01
    converged_nats: float = 1.0
    stranded_spread: float = 10.0
    one_reverse_start: bool = True  # False: reverse chains start from distinct draws

    def __post_init__(self):
        for name in ("level", "tail_alpha", "sign_alpha"):
            if not 0 < getattr(self, name) < 1:
                raise InputError(f"{name} must lie in (0, 1)")
        if not self.converged_nats > 0:
            raise InputError("converged_nats must be positive")


@dataclass(frozen=True)
class StepVerdict:
    """The verdict at one number of distributions, with its evidence."""

    n_steps: int
    status: str  # "inconsistent", "not converged" or "converged"
    bound: JeffreysBound
    sign: SignTest
    tail: ConsistencyCheck
    exact_draws: int
    forward_median: float
    forward_iqr: float
    reverse_median: float
    reverse_iqr: float
    carriers: int  # fewest forward chains whose deficits make up half of the bound
    stranded: int
    rest_bound: float  # the bound without the stranded forward chains
    message: str
    remedy: str = ""   # the end of ``message`` that says what to run next (if any)

    @property
    def consistent(self) -> bool:
        return self.status != "inconsistent"

    def message_before_steps(self) -> str:
        """The message without its advice to run ten times the step count (kept where it
        advises more chains), for a caller that names the step count to run."""
        return (self.message.removesuffix(self.remedy) if self.remedy.startswith(STEPS_REMEDY)
                else self.message)

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    @property
    def conditional(self) -> bool:
        """True when the interval is conditional on a single exact draw x*."""
        return self.exact_draws == 1

    def as_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("bound", "sign", "tail")}
        out.update(bound=self.bound.as_dict(), sign_test=self.sign.as_dict(),
                   tail_test=self.tail.as_dict(), consistent=self.consistent,
                   converged=self.converged, conditional=self.conditional)
        return out


def _carriers(L: np.ndarray, mean_u: float) -> int:
    """The fewest forward chains whose deficits mean(U) - L_i add up to half the bound."""
    deficits = np.sort(mean_u - L)[::-1]
    total = deficits.sum()
    if not np.isfinite(total):  # chains with zero weight carry all of an infinite bound
        return int(np.count_nonzero(~np.isfinite(deficits)))
    if total <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(deficits), 0.5 * total) + 1)


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if np.isfinite(x) else ("infinite" if x > 0 else "-infinite")


def judge_step(step, settings: VerdictSettings = VerdictSettings(), *,
               n_step_counts: int = 1) -> StepVerdict:
    """The verdict on one :class:`~.results.StepResult`.

    ``n_step_counts`` is the number of step counts judged together (the sign
    test's Bonferroni divisor).
    """
    bound = step.bound(level=settings.level)
    draws = step.exact_draws
    sign = sign_test(bound, alpha=settings.sign_alpha / max(n_step_counts, 1),
                     df=draws - 1 if draws > 1 else None)
    tail = step.consistency(settings.tail_alpha)
    L = np.asarray(step.forward.log_estimates, dtype=float)
    U = np.asarray(step.reverse.log_estimates, dtype=float)
    fq = np.nanpercentile(L, [25, 50, 75])
    rq = np.nanpercentile(U, [25, 50, 75])
    stranded = step.stranded_forward_chains(settings.stranded_spread)
    mean_u = float(np.mean(U))
    rest = np.delete(L, stranded)
    rest_bound = float(mean_u - np.mean(rest)) if rest.size else float("nan")
    carriers = _carriers(L, mean_u)
    evidence = (f"Median forward estimate {_fmt(fq[1], 7)} (IQR {_fmt(fq[2] - fq[0])}), median "
                f"reverse {_fmt(rq[1], 7)} (IQR {_fmt(rq[2] - rq[0])}), over {L.size} + {U.size} "
                "chains")

    if sign.negative or not tail.passed:
        status, message = "inconsistent", _likely_bug(bound, sign, tail, settings, draws,
                                                      evidence)
    else:
        status, message = _convergence(bound, settings, L.size, fq, rq, stranded, rest_bound,
                                       carriers)
        message += " " + evidence + "."
        if draws == 1 and settings.one_reverse_start:
            message += (" The interval is conditional on the one exact draw x* (reverse chains "
                        "all start there); --exact-draws K gives an interval over draws.")
    remedy = (_next_command(bound, settings, int(step.n_steps), L.size)
              if status == "not converged" else "")
    return StepVerdict(int(step.n_steps), status, bound, sign, tail, draws, float(fq[1]),
                       float(fq[2] - fq[0]), float(rq[1]), float(rq[2] - rq[0]), carriers,
                       int(stranded.size), rest_bound, message + remedy, remedy)


def _next_command(bound, settings: VerdictSettings, T: int, chains: int) -> str:
    """What to run after a not-converged step: more distributions when the bound itself
    is above the line, more chains when only its interval crosses it."""
    if bound.estimate > settings.converged_nats:
        return (f"{STEPS_REMEDY} --steps ...,{10 * T} and the same --out "
                "resumes, running only the new step counts (from Python: "
                "RunSettings(steps=...) and the same out_dir); the other remedies and their "
                "cost are on the docs page 'Not converged?'.")
    return (f" Next: --chains {4 * chains} halves the interval (a new --out: the chains "
            "change every number); the other remedies and their cost are on the docs page "
            "'Not converged?'.")


def _likely_bug(bound, sign, tail, settings: VerdictSettings, draws: int, evidence: str) -> str:
    """The message of a step whose sign test or tail-bound test fired."""
    fired = [name for name, hit in (("sign test", sign.negative),
                                    ("tail-bound test", not tail.passed)) if hit]
    message = (f"LIKELY BUG ({' and '.join(fired)} fired): the bound came out {_fmt(bound.estimate)} "
               f"nats, and its one-sided {100 * (1 - sign.alpha):.4g}% upper limit is "
               f"{_fmt(sign.upper_limit)} (sign test p = {sign.p_value:.2g}; tail-bound "
               f"test p = {tail.p_value:.2g}); a divergence cannot be negative, so this is "
               "not reported as one. Likely causes: the simulator does not match the model "
               "(priors, likelihood, names), a kernel that does not leave its temperature's "
               "distribution invariant, or too few chains for a heavy-tailed estimate. "
               + evidence + ".")
    if tail.passed:
        message += (f" The sign test alone fired: a correct run is flagged at some step "
                    f"count with probability up to {settings.sign_alpha:g}, most often "
                    "near convergence, where the expected bound is close to 0 (rare "
                    "forward chains stranded in a heavy-tailed prior's tails make it "
                    "larger, but a run of a few dozen chains seldom holds one). Rerun "
                    "with another --seed: a bug fires again, while a correct run is "
                    f"flagged again with probability at most {settings.sign_alpha:g}.")
        if draws == 1:
            message += (" With one exact draw x* the test is also conditional on x*: "
                        "an unlucky x* can do this too (--exact-draws 10 averages "
                        "over draws).")
    return message


def _convergence(bound, settings: VerdictSettings, n_forward: int, fq, rq, stranded,
                 rest_bound: float, carriers: int) -> tuple[str, str]:
    """The status ("converged" or "not converged") and message of a step whose tests
    passed; past the scale it says whether a few stranded forward chains carry the
    bound or the forward chains as a whole lag."""
    scale = settings.converged_nats
    if np.isfinite(bound.ci_high) and bound.ci_high <= scale:
        return "converged", (
            f"converged: the Jeffreys divergence between AIS's output and the "
            f"posterior is at most {_fmt(max(bound.ci_high, 0.0))} nats "
            f"({100 * bound.level:.0f}% upper limit; estimate {_fmt(bound.estimate)}).")
    where = (f"above the {scale:g}-nat scale" if bound.estimate > scale else
             f"its upper limit above the {scale:g}-nat scale (more chains narrow it)")
    message = (f"not converged: the bound is {_fmt(bound.estimate)} nats "
               f"({100 * bound.level:.0f}% interval {_fmt(max(bound.ci_low, 0.0))} to "
               f"{_fmt(bound.ci_high)}), {where}.")
    few = stranded.size and stranded.size <= max(1, 0.1 * n_forward)
    others_agree = np.isfinite(rest_bound) and rest_bound <= max(scale, 0.1 * bound.estimate)
    if few and others_agree:
        share = 1 - rest_bound / bound.estimate if bound.estimate > 0 else float("nan")
        message += (f" {stranded.size} of {n_forward} forward chains are stranded far below "
                    f"the others and carry {100 * share:.0f}% of it; without them the "
                    f"bound would be {_fmt(rest_bound)} nats. Such chains usually start "
                    "in the prior's tails where the tuned step size is far too large: "
                    "more leapfrog steps, NUTS, or a reparameterised model may free them.")
    elif np.isfinite(fq[1]) and rq[1] - fq[1] > scale:
        message += (f" The forward chains as a whole lag the reverse ones: the median "
                    f"forward estimate is {_fmt(rq[1] - fq[1])} nats below the median "
                    f"reverse estimate, and half of the bound comes from {carriers} of "
                    f"{n_forward} forward chains.")
    return "not converged", message
