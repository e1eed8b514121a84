"""The ``bread-stan`` command line's arguments: every subcommand and its options.

:func:`build_parser` builds the parser; :mod:`bread_stan.cli.main` runs what it
parses.  Kept apart so the command line's module holds the commands and the exit policy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..kernels.registry import KERNELS

__all__ = ["build_parser", "add_simulator_options"]


def _int_list(option: str, least: int, what: str):
    """An argparse type: comma-separated integers, each at least ``least``."""
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(s) for s in text.split(",") if s.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} takes comma-separated integers, got {text!r}")
        if not values or min(values) < least:
            raise argparse.ArgumentTypeError(f"{option}: {what} must be >= {least}")
        return values
    return parse


_step_counts = _int_list("--steps", 2, "every number of distributions")


def _steps(text: str):
    """--steps: comma-separated numbers of distributions, or "auto" (with --budget)."""
    return "auto" if text.strip().lower() == "auto" else _step_counts(text)


def _positive(expected: str, unit: str):
    """An argparse type: a positive finite number (``expected``, ``unit``: its messages)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a positive number of {unit}, got {text}")
        return value
    return parse


_gradients = _positive("a number of gradients", "gradients")   # --budget-gradients (1e6)
_minutes = _positive("minutes", "minutes")                      # --budget

_sweep = _int_list("--sweep", 0, "numbers of transitions")


def _whole(least: int):
    """An argparse type: a whole number >= ``least``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value
    parse.__name__ = "whole number"
    return parse


def _add_kernel_options(p) -> None:
    """--kernel, --pilot-chains, --pilot-grid, --pilot-steps, --leapfrog and --max-depth
    (read by the CLI into SamplerSettings)."""
    smc = "--algorithm smc and " if p.prog.split()[-1] in ("run", "compare", "subjective") else ""
    p.add_argument("--kernel", choices=sorted(KERNELS), default="nuts",
                   help="Markov kernel at each temperature: nuts, hmc, or imh (independent "
                   "Metropolis-Hastings with proposals frozen from an SMC pilot; no "
                   "gradients; for near-Gaussian posteriors of low dimension, with "
                   f"{smc}--pilot-chains 256 or more) (default nuts)")
    p.add_argument("--pilot-chains", type=_whole(2), default=32,
                   help="pilot chains that tune the kernel (imh: the pilot SMC's "
                   "particles) (default 32)")
    lean = ("; a run with --budget that took fewer says so, and its reproducing command "
            "names them" if p.prog.split()[-1] in ("run", "compare") else "")
    p.add_argument("--pilot-grid", type=_whole(2), default=16,
                   help=f"the pilot's grid betas per three decades of beta (default 16{lean})")
    p.add_argument("--pilot-steps", type=_whole(1), default=20,
                   help="the pilot's adapting transitions at each grid beta, after 5 "
                   "unadapted ones (default 20)")
    p.add_argument("--leapfrog", type=_whole(1), default=10, help="HMC leapfrog steps (default 10)")
    p.add_argument("--max-depth", type=_whole(1), default=8,
                   help="NUTS maximum tree depth (default 8)")


def add_simulator_options(p: argparse.ArgumentParser) -> None:
    """``--simulator`` (optional: drafted when missing) and ``--likelihood``."""
    saved = ("in a temporary folder, whose path the log names; draft one to keep with "
             "draft-simulator --out FILE" if p.prog.split()[-1] == "check" else
             "in OUT/programs")
    p.add_argument("--simulator", type=Path, default=None,
                   help="simulator program: draws all unknowns from the prior, then the "
                   f"data (default: drafted from the model and checked, saved {saved})")
    p.add_argument("--likelihood", default=None, metavar="NAME,...",
                   help="the modelled data, for the automatic prior/likelihood split of a "
                   "model without prior_only (default: every data variable that is the "
                   "outcome of a density)")


def _add_run_options(p: argparse.ArgumentParser, simulator: bool = True) -> None:
    if simulator:
        add_simulator_options(p)
    p.add_argument("--data", help="the model's data: a JSON file, or the name of a bundled "
                   "data set (nhefs, pima, goog, faithful, movielens, ...)"
                   + ("; the simulator reads it too" if simulator else ""))
    budgeted = p.prog.split()[-1] in ("run", "compare")
    p.add_argument("--steps", type=_steps if budgeted else _step_counts,
                   default=(10, 100, 1000),
                   help="numbers of AIS distributions, comma-separated (default 10,100,1000)"
                   + ("; 'auto' with --budget or --budget-gradients chooses them"
                      if budgeted else ""))
    if budgeted:
        p.add_argument("--budget", type=_minutes, default=None, metavar="MINUTES",
                       help="with --steps auto: minutes of wall time (compiles excluded, "
                       "pilots and the simulator check included); T starts where the "
                       "pilot predicts a gap of --converged-nats and grows 3 to 4 times "
                       "until converged or the next T would not fit (then the predicted "
                       "T, where it fits)")
        p.add_argument("--budget-gradients", type=_gradients, default=None, metavar="N",
                       help="with --steps auto: a budget in gradient evaluations instead "
                       "of (or beside) --budget, the pilots' and the simulator check's "
                       "counted; the same decision in gradients, so the same step counts "
                       "on any machine")
    p.add_argument("--chains", type=_whole(2), default=100,
                   help="chains per direction (default 100)")
    _add_kernel_options(p)
    p.add_argument("--jitter", type=float, default=0.0,
                   help="HMC step-size jitter j in [0, 1): step sizes uniform in "
                   "[(1-j) e, (1+j) e] (default 0)")
    p.add_argument("--rescue", type=float, default=0.1,
                   help="share of transitions with a step size 1 to 1000 times "
                   "smaller, to free chains stranded in the prior's tails (default 0.1)")
    p.add_argument("--schedule", choices=("sigmoid", "linear", "geometric", "adaptive"),
                   default="adaptive",
                   help="annealing schedule; 'adaptive' places the betas at equal "
                   "thermodynamic length measured by the pilot chains (default adaptive)")
    p.add_argument("--metric", choices=("diag", "dense", "auto"), default="auto",
                   help="inverse metric tuned along beta: diagonal, dense (Stan's dense_e), "
                   "or auto (default: dense where the pilot draws are strongly correlated, "
                   "for at most 20 parameters)")
    p.add_argument("--seed", type=_whole(0), default=0,
                   help="seed of every random stream (the same seed and settings give the "
                   "same numbers on any number of threads) (default 0)")
    if simulator and p.prog.split()[-1] != "protocol":   # its reverse starts: the S-sweep's
        p.add_argument("--exact-draws", type=_whole(1), default=1,
                       help="simulated problems (x*, y*) to split the chains among: K > 1 gives an "
                       "interval over exact draws and data sets instead of one conditional on a "
                       "single draw (default 1)")
    p.add_argument("--threads", type=_whole(1), default=None,
                   help="threads per model call (default: all cores)")
    default_out = {"run": "bread-<model name>", "compare": "bread-compare",
                   "protocol": "protocol-<model name>",
                   "subjective": "subjective-<model name>"}[p.prog.split()[-1]]
    p.add_argument("--out", type=Path, default=None,
                   help=f"output directory (default: {default_out}); the same command "
                   "run again there resumes: what it saved (finished step counts, the "
                   "pilots' tuning and path choice, the simulator check) is read back, "
                   "not rerun, so a larger --steps runs only the new step counts")
    p.add_argument("--converged-nats", type=float, default=1.0,
                   help="call a step count converged when the bound's upper limit is at most "
                   "this many nats (default 1)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (on a terminal) or progress lines (in a log)")
    if simulator:
        p.add_argument("--no-check", action="store_true",
                       help="skip the simulator check that runs before the AIS runs")


def _add_algorithm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algorithm", choices=("ais", "smc"), default="ais",
                   help="ais, or smc: sequential Monte Carlo with --particles per run, "
                   "resampled where the pilot expects the effective sample size to halve "
                   "(default ais)")
    p.add_argument("--particles", type=_whole(1), default=None,
                   help="particles per SMC run (with --algorithm smc; default 16)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``bread-stan`` subcommand and its options."""
    parser = argparse.ArgumentParser(
        prog="bread-stan",
        description="Bound how far AIS/HMC output is from the exact posterior of a Stan model.",
        epilog="exit status: 0 converged at some T (check: passed; aide, draft-simulator, "
               "info: done); 3 a check failed (no bound reported); 4 ran and passed its "
               "checks but converged at no T; 2 bad input; 1 an internal error (a bug); "
               "130 interrupted")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="BREAD bounds for one model")
    p.add_argument("model", type=Path, help="model program (split into prior and "
                   "likelihood automatically when it declares no prior_only)")
    _add_run_options(p)
    _add_executor_options(p)
    p.add_argument("--known-upper", type=float, default=None,
                   help="a trusted upper bound on log p(y): adds a KL(q||p) bound")
    p.add_argument("--known-lower", type=float, default=None,
                   help="a trusted lower bound on log p(y): adds a KL(p||q) bound")
    _add_algorithm_options(p)
    _add_path_options(p)

    p = sub.add_parser("compare", help="BREAD for several programs of one model, shared data")
    p.add_argument("models", type=Path, nargs="+", help="model programs to compare")
    _add_run_options(p)
    _add_executor_options(p)
    _add_algorithm_options(p)
    _add_path_options(p)

    p = sub.add_parser("protocol", help="real-data protocol: fit, simulate, validate, bound")
    p.add_argument("model", type=Path, help="model program (split into prior and "
                   "likelihood automatically when it declares no prior_only)")
    _add_run_options(p)
    _add_executor_options(p)
    p.add_argument("--sweep", type=_sweep, default=(10, 100, 1000, 10000),
                   help="reverse-start transitions S, comma-separated (default 10,100,1000,10000)")
    p.add_argument("--fit-chains", type=_whole(1), default=4,
                   help="NUTS chains of the fit (default 4)")
    p.add_argument("--fit-warmup", type=_whole(0), default=500,
                   help="fit warmup iterations (default 500)")
    p.add_argument("--fit-draws", type=_whole(1), default=500,
                   help="fit draws per chain (default 500)")
    p.add_argument("--fit-sampler", choices=("toolkit", "cmdstan"), default="toolkit",
                   help="whose NUTS fits the real data: the toolkit's (default) or CmdStan's "
                        "(needs cmdstanpy and CMDSTAN)")
    p.add_argument("--hyper-summary", choices=("median", "mean"), default="median",
                   help="posterior summary giving the fitted hyperparameters (default median)")
    p.add_argument("--replicates", type=_whole(0), default=5,
                   help="further simulated data sets for the agreement band (default 5; "
                        "0 turns the agreement score off)")
    p.add_argument("--replicate-max-steps", type=_whole(2), default=None,
                   help="run the replicates only up to this many distributions (default all)")
    p.add_argument("--budget", type=_minutes, default=None, metavar="MINUTES",
                   dest="protocol_budget",
                   help="minutes of wall time (compiles excluded): a set-up stage that would "
                   "end past them stops (exit 4, naming the budget it needs), and a step "
                   "count of --steps starts only where the pilot's pace says it ends within "
                   "them; the same command with a larger budget resumes (default: none)")
    p.add_argument("--hyper", default=None, metavar="NAME,...",
                   help="parameters to fix at values fitted on the real data, besides those "
                   "fixed by default (with no proper prior, or whose prior draws break the "
                   "simulation); the forward AIS then runs on the Gaussian path and the "
                   "bound is the paper's heuristic (not with --simulator)")

    p = sub.add_parser("subjective", help="subjective divergence on the real data, against "
                       "a reference sampler; any Stan program (no prior_only, no simulator)")
    p.add_argument("model", type=Path, help="model program (any; prior_only is set to 0 if "
                   "declared)")
    _add_run_options(p, simulator=False)
    _add_executor_options(p)
    _add_algorithm_options(p)
    p.add_argument("--reference", type=Path, nargs="+", default=None,
                   help="reference draws: CmdStan CSV files (one per chain) or an ArviZ "
                   "NetCDF file (posterior group); default: a NUTS fit on the data")
    p.add_argument("--base", choices=("gaussian", "prior"), default="gaussian",
                   help="initial distribution of AIS: a Gaussian in the unconstrained space "
                   "(any program; default), or the prior (needs prior_only and --simulator)")
    p.add_argument("--simulator", type=Path, default=None,
                   help="simulator program giving exact prior draws (only for --base prior)")
    p.add_argument("--base-fit", choices=("reference", "laplace"), default="reference",
                   help="fit the Gaussian base to the reference draws or to a Laplace "
                   "approximation (default reference)")
    p.add_argument("--widen", type=float, default=1.5,
                   help="multiply the base's standard deviations by this (default 1.5)")
    p.add_argument("--approximation", default=None,
                   choices=("laplace", "advi-meanfield", "advi-fullrank", "pathfinder"),
                   help="measure this Gaussian approximation instead of AIS: D_SBJ with exact "
                   "weights, E_r[log p - log q] - E_q[log p - log q] (no AIS runs)")
    p.add_argument("--approximation-draws", type=_whole(2), default=4000,
                   help="draws of the approximation for its term (default 4000)")
    p.add_argument("--fit-chains", type=_whole(2), default=4, help="NUTS chains of the reference (default 4)")
    p.add_argument("--fit-warmup", type=_whole(0), default=500, help="reference warmup (default 500)")
    p.add_argument("--fit-draws", type=_whole(4), default=500, help="reference draws per chain (default 500)")
    p.add_argument("--fit-sampler", choices=("toolkit", "cmdstan"), default="toolkit",
                   help="NUTS of the reference: the toolkit's or CmdStan's (default toolkit)")

    p = sub.add_parser("aide", help="AIDE: symmetrised KL of an approximation (ADVI, "
                       "Laplace, Pathfinder, short AIS, SIR) from a gold standard, on the data")
    p.add_argument("model", type=Path, help="model program (any; prior_only is set to 0 if "
                   "declared)")
    p.add_argument("--data", help="the model's data: a JSON file or a bundled data set")
    _add_executor_options(p)
    p.add_argument("--gold", default="ais:10000",
                   help="gold standard: ais:T or reference (default ais:10000)")
    p.add_argument("--target", nargs="+", default=["advi-meanfield"],
                   help="one or more of advi-meanfield, advi-fullrank, laplace, pathfinder, "
                   "ais:T, smc:P:T (P particles, T distributions), sir:P, nuts:T, hmc:T, "
                   "mh:T (T transitions of MCMC at the posterior; give them --m-target 10 "
                   "or more) (default advi-meanfield)")
    p.add_argument("--n-gold", type=_whole(2), default=100, help="gold runs (default 100)")
    p.add_argument("--n-target", type=_whole(2), default=100, help="target runs (default 100)")
    p.add_argument("--m-gold", type=_whole(1), default=1,
                   help="meta-inference traces per output for an AIS/SIR gold (default 1)")
    p.add_argument("--m-target", type=_whole(1), default=1,
                   help="meta-inference traces per output for an AIS/SIR target (default 1)")
    p.add_argument("--mcmc-start", choices=("uniform", "prior", "q0"), default="uniform",
                   help="where nuts:T, hmc:T, mh:T chains start: uniform(-2, 2) on the "
                   "unconstrained scale as Stan does (default), the prior (--base prior) or "
                   "the Gaussian q0")
    p.add_argument("--base", choices=("gaussian", "prior"), default="gaussian",
                   help="initial distribution of AIS (and SIR's proposal is the Gaussian): a "
                   "widened Gaussian in the unconstrained space (default), or the prior "
                   "(needs prior_only and --simulator)")
    p.add_argument("--base-fit", choices=("laplace", "reference"), default="laplace",
                   help="fit the Gaussian by Laplace (default) or to the reference draws")
    p.add_argument("--widen", type=float, default=1.5,
                   help="multiply the Gaussian's standard deviations by this (default 1.5)")
    p.add_argument("--simulator", type=Path, default=None,
                   help="simulator program giving exact prior draws (only for --base prior)")
    p.add_argument("--reference", type=Path, nargs="+", default=None,
                   help="reference draws (CmdStan CSV files or ArviZ NetCDF) for --gold "
                   "reference or --base-fit reference; default a NUTS fit on the data")
    _add_kernel_options(p)
    p.add_argument("--schedule", choices=("sigmoid", "linear", "geometric", "adaptive"),
                   default="adaptive", help="annealing schedule (default adaptive)")
    p.add_argument("--seed", type=_whole(0), default=0,
                   help="seed of every random stream (default 0)")
    p.add_argument("--threads", type=_whole(1), default=None,
                   help="threads per model call (default: all cores)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default: aide-<model name>); a rerun there "
                   "loads the runs that finished")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (on a terminal) or progress lines (in a log)")

    p = sub.add_parser("check", help="test that a simulator draws from the model's joint "
                       "distribution (exit 0 pass, 3 flagged, 2 bad input, 1 a bug)")
    p.add_argument("model", type=Path, help="model program (split into prior and "
                   "likelihood automatically when it declares no prior_only)")
    add_simulator_options(p)
    p.add_argument("--data", help="the model's data: a JSON file or a bundled data set")
    _add_kernel_options(p)
    p.add_argument("--prior-draws", type=int, default=2000,
                   help="simulator draws moved by the frozen prior kernel (default 2000)")
    p.add_argument("--datasets", type=int, default=100,
                   help="simulated data sets, one posterior chain each (default 100)")
    p.add_argument("--transitions", type=int, default=10,
                   help="frozen kernel transitions per chain (default 10)")
    p.add_argument("--alpha", type=float, default=0.01,
                   help="family-wise significance level (default 0.01)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the simulator's draws and the kernels (default 0)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per model call (default: all cores)")

    p = sub.add_parser("draft-simulator", help="write a simulator program for a model "
                       "program (to stdout, or --out FILE)")
    p.add_argument("model", type=Path, help="model program (split into prior and "
                   "likelihood automatically when it declares no prior_only)")
    p.add_argument("--out", type=Path, help="write the simulator here instead of stdout")
    p.add_argument("--hyper", help="comma-separated hyperparameters ('' for none; default: "
                   "the scalar parameters whose prior uses no other parameter)")

    p = sub.add_parser("report", help="regenerate figures and report from saved results")
    p.add_argument("dir", type=Path, help="the output directory of a run, compare "
                   "program, protocol or subjective run (its --out)")

    sub.add_parser("info", help="toolchain, cache directory and version")
    return parser


def _add_executor_options(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--scheduler", default=None, metavar="tcp://HOST:8786",
                       help="run the AIS chains (protocol: the replicates; compare: whole "
                       "programs; aide: blocks of AIS runs) in shards on this Dask "
                       "scheduler's cluster (same numbers as a local run)")
    group.add_argument("--workers", type=_whole(1), default=None,
                       help="run the AIS chains in shards on a Dask LocalCluster of this many "
                       "single-threaded worker processes")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to try reaching the Dask scheduler (default 10)")


def _add_path_options(p) -> None:
    """The annealing path and the metric ridge (run, compare)."""
    p.add_argument("--path", choices=("auto", "prior", "waypoint", "gaussian"), default="auto",
                   help="annealing path: temper the likelihood from the prior; or go "
                   "from the prior to a Gaussian fitted to the posterior (Laplace) and on "
                   "to the posterior, for funnels that tempering creates (waypoint, AIS "
                   "only); or start from that Gaussian itself (gaussian: a different "
                   "sampler, Laplace then AIS, with the prior's normaliser computed by a "
                   "drafted simulator or estimated by importance sampling, and "
                   "subtracted); auto (default): where the Gaussian "
                   "path can run, the cheaper of it and the prior path by their pilots "
                   "(gradients a transition x thermodynamic length squared), else the "
                   "waypoint when the log likelihood's sd over the pilot's prior draws "
                   "exceeds 1e12 nats, else the prior path")
    p.add_argument("--metric-ridge", choices=("auto", "stan", "relative"), default="auto",
                   help="regularisation of the pilot's metric: Stan's 1e-3 added to each "
                   "variance, or 1e-3 of each variance (for parameters with posterior sds "
                   "far below 0.03); auto (default): stan on the prior path, relative on "
                   "the waypoint and gaussian paths")
