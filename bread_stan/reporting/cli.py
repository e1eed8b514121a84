"""The ``bread-stan`` command line.

    bread-stan run MODEL.stan --simulator SIM.stan --data DATA.json [--steps 10,100,1000]
                   [--chains 100] [--kernel hmc|nuts] [--seed 0] [--out DIR] [--threads N]
    bread-stan compare A.stan B.stan --simulator SIM.stan --data DATA.json [...]
    bread-stan protocol MODEL.stan --simulator SIM.stan --data REAL.json
                   [--sweep 10,100,1000,10000] [--replicates 5] [--fit-chains 4]
                   [--fit-sampler toolkit|cmdstan]
                   [run options]
    bread-stan subjective MODEL.stan --data DATA.json [--reference DRAWS]
                   [--base gaussian|prior] [--simulator SIM.stan]
                   [--approximation laplace|advi-meanfield|advi-fullrank|pathfinder]
                   [--base-fit reference|laplace] [--widen 1.5] [run options]
    bread-stan aide MODEL.stan --data DATA.json [--gold ais:10000|reference]
                   [--target advi-meanfield advi-fullrank laplace pathfinder ais:100 sir:1000]
                   [--n-gold 100] [--n-target 100] [--m-gold 1] [--m-target 1]
                   [--base gaussian|prior] [--simulator SIM.stan] [--out DIR]
    bread-stan check MODEL.stan --simulator SIM.stan --data DATA.json [--kernel hmc|nuts]
                   [--prior-draws 2000] [--datasets 100] [--transitions 10] [--alpha 0.01]
    bread-stan report DIR
    bread-stan info

``run``, ``compare``, ``protocol`` and ``check`` take any Stan program: without
``prior_only`` the model is split into prior and likelihood automatically
(``--likelihood NAME,...`` names the modelled data), and without ``--simulator`` one is
drafted; the generated programs and the split table are saved in ``OUT/programs``.

``run``, ``compare`` and ``protocol`` first check the simulator against the model
(``--no-check`` skips it).  ``check`` exits 0 when the simulator passes, 3 when it
is flagged and 2 for bad input; ``run`` and ``compare`` exit 3 when the bounds are
inconsistent or the simulator was flagged.

``run`` and ``compare`` save every finished step count in ``--out`` and write a
report there; interrupting keeps what finished, and rerunning the same command
continues where it stopped.

``subjective --approximation`` measures a Gaussian approximation with exact weights
instead of running AIS (exit 0, or 2 for bad input).

Exit status of ``run``, ``compare``, ``subjective`` and ``report``: 0 when AIS converged (the bound's
upper limit is within 1 nat) at some number of distributions; 3 when a check failed
(the sign test or the tail-bound test at some T, or the simulator check); 4 when the
run finished and passed its checks but converged at no T; 2 for bad input; 130 when
interrupted.  ``aide`` exits 0 when done (the gold runs are saved once in ``--out`` and
shared by every target; a rerun loads what finished), 2 for bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from pathlib import Path

__all__ = ["main"]

from ..errors import BreadStanError

log = logging.getLogger("bread_stan")


def _steps(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--steps takes comma-separated integers, got {text!r}")
    if not steps or min(steps) < 2:
        raise argparse.ArgumentTypeError("--steps: every number of distributions must be >= 2")
    return steps


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
    """--kernel, --leapfrog and --max-depth (read by :func:`_sampler`)."""
    p.add_argument("--kernel", choices=("hmc", "nuts"), default="nuts",
                   help="Markov kernel at each temperature (default nuts)")
    p.add_argument("--leapfrog", type=_whole(1), default=10, help="HMC leapfrog steps (default 10)")
    p.add_argument("--max-depth", type=_whole(1), default=8,
                   help="NUTS maximum tree depth (default 8)")


def _sampler(args, **extra):
    """The SamplerSettings of the kernel options, with ``extra`` settings."""
    from ..workflows.bread import SamplerSettings

    return SamplerSettings(kernel=args.kernel, n_leapfrog=args.leapfrog,
                           max_depth=args.max_depth, **extra)


def _add_simulator_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulator", type=Path, default=None,
                   help="simulator program: draws all unknowns from the prior, then the "
                   "data (default: drafted from the model, and saved in the output)")
    p.add_argument("--likelihood", default=None, metavar="NAME,...",
                   help="the modelled data, for the automatic prior/likelihood split of a "
                   "model without prior_only (default: every data variable that is the "
                   "outcome of a density)")


def _add_run_options(p: argparse.ArgumentParser, simulator: bool = True) -> None:
    if simulator:
        _add_simulator_options(p)
    p.add_argument("--data", help="the model's data: a JSON file, or the name of a bundled "
                   "data set (nhefs, pima, goog, faithful, movielens, ...)"
                   + ("; the simulator reads it too" if simulator else ""))
    p.add_argument("--steps", type=_steps, default=(10, 100, 1000),
                   help="numbers of AIS distributions, comma-separated (default 10,100,1000)")
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
    p.add_argument("--seed", type=_whole(0), default=0)
    if simulator:
        p.add_argument("--exact-draws", type=_whole(1), default=1,
                       help="simulated problems (x*, y*) to split the chains among: K > 1 gives an "
                       "interval over exact draws and data sets instead of one conditional on a "
                       "single draw (default 1)")
    p.add_argument("--threads", type=_whole(1), default=None,
                   help="threads per model call (default: all cores)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default: bread-<model name>)")
    p.add_argument("--converged-nats", type=float, default=1.0,
                   help="call a step count converged when the bound's upper limit is at most "
                   "this many nats (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    if simulator:
        p.add_argument("--no-check", action="store_true",
                       help="skip the simulator check that runs before the AIS runs")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bread-stan",
        description="Bound how far AIS/HMC output is from the exact posterior of a Stan model.",
        epilog="exit status: 0 converged at some T; 3 a check failed (no bound reported); "
               "4 ran and passed its checks but converged at no T; 2 bad input; "
               "130 interrupted")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="BREAD bounds for one model")
    p.add_argument("model", type=Path, help="model program with the prior_only split")
    _add_run_options(p)
    _add_executor_options(p)
    p.add_argument("--known-upper", type=float, default=None,
                   help="a trusted upper bound on log p(y): adds a KL(q||p) bound")
    p.add_argument("--known-lower", type=float, default=None,
                   help="a trusted lower bound on log p(y): adds a KL(p||q) bound")

    p = sub.add_parser("compare", help="BREAD for several programs of one model, shared data")
    p.add_argument("models", type=Path, nargs="+", help="model programs to compare")
    _add_run_options(p)
    _add_executor_options(p)

    p = sub.add_parser("protocol", help="real-data protocol: fit, simulate, validate, bound")
    p.add_argument("model", type=Path, help="model program with the prior_only split")
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

    p = sub.add_parser("subjective", help="subjective divergence on the real data, against "
                       "a reference sampler; any Stan program (no prior_only, no simulator)")
    p.add_argument("model", type=Path, help="model program (any; prior_only is set to 0 if "
                   "declared)")
    _add_run_options(p, simulator=False)
    _add_executor_options(p)
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
                   "ais:T, sir:P (default advi-meanfield)")
    p.add_argument("--n-gold", type=_whole(2), default=100, help="gold runs (default 100)")
    p.add_argument("--n-target", type=_whole(2), default=100, help="target runs (default 100)")
    p.add_argument("--m-gold", type=_whole(1), default=1,
                   help="meta-inference traces per output for an AIS/SIR gold (default 1)")
    p.add_argument("--m-target", type=_whole(1), default=1,
                   help="meta-inference traces per output for an AIS/SIR target (default 1)")
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
    p.add_argument("--seed", type=_whole(0), default=0)
    p.add_argument("--threads", type=_whole(1), default=None,
                   help="threads per model call (default: all cores)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default: aide-<model name>)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = sub.add_parser("check", help="test that a simulator draws from the model's joint "
                       "distribution (exit 0 pass, 3 flagged, 2 bad input)")
    p.add_argument("model", type=Path, help="model program")
    _add_simulator_options(p)
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="threads per model call")

    p = sub.add_parser("draft-simulator", help="write a simulator program for a model "
                       "program (to stdout, or --out FILE)")
    p.add_argument("model", type=Path, help="model program (split automatically when it "
                   "has no prior_only)")
    p.add_argument("--out", type=Path, help="write the simulator here instead of stdout")
    p.add_argument("--hyper", help="comma-separated hyperparameters ('' for none; default: "
                   "the scalar parameters whose prior uses no other parameter)")

    p = sub.add_parser("report", help="regenerate figures and report from saved results")
    p.add_argument("dir", type=Path)

    sub.add_parser("info", help="toolchain, cache directory and version")
    return parser


def _data(arg: str | None):
    """A JSON path as given, or a bundled data set by name (``bread_stan.stan.datasets``)."""
    if arg is None or Path(arg).is_file():
        return arg
    from ..stan import datasets

    if arg in datasets.names():
        return datasets.load(arg)
    raise FileNotFoundError(f"--data {arg}: no such file, and not a bundled data set "
                            f"(those are {', '.join(datasets.names())})")


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


def _executor(args):
    """The executor the options ask for: local threads, or a Dask cluster."""
    from ..parallel.executor import Executor

    if not args.verbose and (args.scheduler or args.workers):
        # Dask logs every start, stop and lost connection (with tracebacks); a lost
        # scheduler is said here in one line.  Its import sets its loggers' levels.
        with contextlib.suppress(ImportError):
            import distributed  # noqa: F401
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
    return Executor(args.scheduler, workers=args.workers, connect_timeout=args.connect_timeout)


def _settings(args):
    from ..ais.betas import ScheduleSpec
    from ..workflows.bread import RunSettings

    sampler = _sampler(args, step_size_jitter=args.jitter, rescue_prob=args.rescue,
                       metric=args.metric)
    run = RunSettings(steps=args.steps, chains=args.chains, seed=args.seed,
                      exact_draws=getattr(args, "exact_draws", 1),
                      threads=args.threads, schedule=ScheduleSpec(kind=args.schedule),
                      progress=not args.quiet and sys.stderr.isatty(),
                      check_simulator=not getattr(args, "no_check", False))
    return sampler, run


def _verdict(args):
    from ..ais.verdict import VerdictSettings

    return VerdictSettings(converged_nats=args.converged_nats)


def _check_line(check: dict | None) -> str:
    """One line on the simulator check of a run."""
    if not check:
        return ("simulator check: none with this result (a run without a simulator, as "
                "subjective from the Gaussian base, has nothing to check)")
    return f"simulator check: {check['message']}"


def _report(result, out: Path, what: str) -> int:
    """Write ``result``'s report into ``out``, print its summary, return its exit code."""
    from .report import write_report

    path = write_report(result, out)
    _print_summary(result)
    print(f"\n{what}: {path}")
    return result.exit_code


def _print_summary(result) -> None:
    from .report import markdown_table, result_table

    print(f"\n{result.model}: {result.status.upper()}")
    print(_check_line(result.extra.get("simulator_check")))
    print(markdown_table(result_table(result)))
    print(f"\n{result.headline()}")
    for problem in result.problems():
        print(f"\n!! {problem}")


def _cmd_run(args) -> int:
    from ..workflows.bread import bread

    sampler, run = _settings(args)
    out = args.out or Path(f"bread-{args.model.stem}")
    known = {k: v for k, v in (("upper", args.known_upper), ("lower", args.known_lower))
             if v is not None}
    with _executor(args) as executor:
        result = bread(args.model, args.simulator, _data(args.data), sampler=sampler, run=run,
                       known_log_ml_bounds=known or None, out_dir=out, verdict=_verdict(args),
                       executor=executor)
    return _report(result, out, "results and report")


def _cmd_compare(args) -> int:
    from .report import write_comparison, write_report
    from ..workflows.bread import compare

    sampler, run = _settings(args)
    out = args.out or Path("bread-compare")
    try:
        with _executor(args) as executor:
            results = compare(args.models, args.simulator, _data(args.data), sampler=sampler,
                              run=run, out_dir=out, verdict=_verdict(args), executor=executor)
    except (BreadStanError, ValueError, OSError):
        _compare_finished(out)
        raise
    for label, result in results.items():
        write_report(result, out / label)
        _print_summary(result)
    path = write_comparison(results, out)
    print(f"\ncomparison: {path}")
    codes = {r.exit_code for r in results.values()}
    return 3 if 3 in codes else max(codes)


def _compare_finished(out: Path) -> None:
    """After a failed ``compare``, write the comparison of the programs that finished."""
    from ..ais.results import BreadResult
    from .report import write_comparison

    finished = {}
    for run_file in sorted(Path(out).glob("*/run.json")):
        try:
            result = BreadResult.load(run_file.parent)
        except BreadStanError:
            continue
        if result.steps:
            finished[run_file.parent.name] = result
    if finished:
        path = write_comparison(finished, out)
        print(f"comparison of the programs that finished ({', '.join(finished)}): {path}",
              file=sys.stderr)


def _sweep(text: str) -> tuple[int, ...]:
    try:
        sweep = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sweep takes comma-separated integers, got {text!r}")
    if not sweep or min(sweep) < 0:
        raise argparse.ArgumentTypeError("--sweep: numbers of transitions must be >= 0")
    return sweep


def _print_protocol(result) -> None:
    from .protocol_report import protocol_verdict
    from .report import markdown_table

    print(f"\n{result.model} (real-data protocol)")
    print(_check_line(result.extra.get("simulator_check")))
    for line in protocol_verdict(result):
        print(f"- {line}")
    table = result.summary()
    cols = [c for c in ("steps", "bound", "consistent", "real_forward_shifted",
                        "sim_forward_shifted", "sim_reverse_shifted") if c in table.columns]
    if cols:
        print(markdown_table(table[cols]))
    for problem in result.problems():
        print(f"\n!! {problem}")


def _cmd_protocol(args) -> int:
    from ..workflows.fit import FitSettings
    from ..workflows.protocol import ProtocolSettings, protocol
    from .protocol_report import write_protocol_report

    sampler, run = _settings(args)
    settings = ProtocolSettings(
        s_sweep=args.sweep, replicates=args.replicates,
        replicate_max_steps=args.replicate_max_steps,
        fit=FitSettings(chains=args.fit_chains, warmup=args.fit_warmup, draws=args.fit_draws,
                        sampler=args.fit_sampler, hyper_summary=args.hyper_summary))
    out = args.out or Path(f"protocol-{args.model.stem}")
    with _executor(args) as executor:
        result = protocol(args.model, args.simulator, _data(args.data), sampler=sampler,
                          run=run, settings=settings, out_dir=out, executor=executor)
    report = write_protocol_report(result, out)
    _print_protocol(result)
    print(f"\nresults and report: {report}")
    return 0 if result.ok else 3


def _subjective_approximation(args, reference, out: Path) -> int:
    from ..workflows.fit import FitSettings
    from ..workflows.subjective_tractable import RESULT_FILE, subjective_approximation

    result, fitted = subjective_approximation(
        args.model, _data(args.data), approximation=args.approximation, reference=reference,
        n=args.approximation_draws, seed=args.seed, out_dir=out, threads=args.threads,
        fit_settings=FitSettings(chains=args.fit_chains, warmup=args.fit_warmup,
                                 draws=args.fit_draws, sampler=args.fit_sampler))
    info = fitted.diagnostics
    print(f"\n{args.model.stem}: {result.line()}")
    print(f"{fitted.method}: {info['iterations']} iterations, converged: {info['converged']}, "
          f"{info['gradient_evaluations']} gradient evaluations, {info['seconds']:.2f} s")
    print(f"\nresult: {out / RESULT_FILE}")
    return 0


def _cmd_subjective(args) -> int:
    from ..workflows.fit import FitSettings
    from ..workflows.subjective import BaseSettings, subjective

    sampler, run = _settings(args)
    out = args.out or Path(f"subjective-{args.model.stem}")
    reference = args.reference
    if reference is not None and len(reference) == 1:
        reference = reference[0]
    if args.approximation is not None:
        return _subjective_approximation(args, reference, out)
    with _executor(args) as executor:
        result = subjective(args.model, _data(args.data), reference=reference,
                            simulator=args.simulator,
                            base=BaseSettings(kind=args.base, fit=args.base_fit,
                                              widen=args.widen),
                            sampler=sampler, run=run, verdict=_verdict(args), out_dir=out,
                            fit_settings=FitSettings(chains=args.fit_chains,
                                                     warmup=args.fit_warmup,
                                                     draws=args.fit_draws,
                                                     sampler=args.fit_sampler),
                            executor=executor)
    return _report(result, out, "results and report")


def _cmd_aide(args) -> int:
    from ..ais.betas import ScheduleSpec
    from ..workflows.aide import aide
    from ..workflows.subjective import BaseSettings
    from .aide_report import aide_table, write_aide_report
    from .report import markdown_table

    out = args.out or Path(f"aide-{args.model.stem}")
    reference = args.reference
    if reference is not None and len(reference) == 1:
        reference = reference[0]
    sampler = _sampler(args)
    common = dict(gold=args.gold, n_gold=args.n_gold, n_target=args.n_target,
                  m_gold=args.m_gold, m_target=args.m_target, seed=args.seed,
                  base=BaseSettings(kind=args.base, fit=args.base_fit, widen=args.widen),
                  simulator=args.simulator, reference=reference, sampler=sampler,
                  schedule=ScheduleSpec(kind=args.schedule), threads=args.threads,
                  out_dir=out, progress=not args.quiet and sys.stderr.isatty())
    with _executor(args) as executor:
        results = [aide(args.model, _data(args.data), target=t, executor=executor, **common)
                   for t in args.target]
    report = write_aide_report(results, out, model=args.model.stem)
    print(f"\n{args.model.stem}: AIDE against {results[0].gold}")
    print(markdown_table(aide_table(results)))
    print(f"\nresults and report: {report}")
    return 0


def _cmd_check(args) -> int:
    from ..workflows.simulator_check import CheckSettings, check_simulator

    sampler = _sampler(args)
    settings = CheckSettings(prior_draws=args.prior_draws, datasets=args.datasets,
                             transitions=args.transitions, alpha=args.alpha, seed=args.seed)
    result = check_simulator(args.model, args.simulator, _data(args.data), sampler=sampler,
                             settings=settings, threads=args.threads)
    print(f"{args.simulator} against {args.model}: {result.message}")
    return 0 if result.passed else 3


def _cmd_draft_simulator(args) -> int:
    from ..stan.compile import Program, stanc_info
    from ..stan.draft import draft_simulator, split_model
    from ..store import write_atomic

    hyper = (None if args.hyper is None
             else [h.strip() for h in args.hyper.split(",") if h.strip()])
    model = args.model
    if "prior_only" not in stanc_info(model).get("inputs", {}):   # split it first
        model = Program(split_model(model).program, model.stem)
    text = draft_simulator(model, hyper=hyper)
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_atomic(args.out, text)
        print(f"wrote {args.out}; check it with `bread-stan check {args.model} --simulator "
              f"{args.out} --data DATA`", file=sys.stderr)
    return 0


def _cmd_report(args) -> int:
    if (Path(args.dir) / "protocol.json").exists():
        from ..workflows.protocol_result import ProtocolResult
        from .protocol_report import write_protocol_report

        result = ProtocolResult.load(args.dir)
        path = write_protocol_report(result, args.dir)
        _print_protocol(result)
        print(f"\nreport: {path}")
        return 0
    from ..ais.results import BreadResult

    result = BreadResult.load(args.dir)
    return _report(result, args.dir, "report")


def _cmd_info(args) -> int:
    from .. import __version__
    from ..stan.compile import cache_dir
    from ..stan.toolchain import find_toolchain

    tc = find_toolchain()
    print(f"bread-stan {__version__}")
    print(f"toolchain: {tc.version} (stanc {tc.stanc})")
    print(f"cache: {cache_dir()}")
    return 0


def _os_message(error: OSError) -> str:
    """One line for an OS error: what failed on which file, without a traceback."""
    if error.strerror is None:
        return str(error)
    where = f": {error.filename}" if error.filename else ""
    return f"{error.strerror}{where}"


def _prepare(args) -> None:
    """Split the model(s) without prior_only and draft the simulator when none is
    given, saving the generated programs under the output directory (in place in
    ``args``)."""
    from ..stan.prepare import parse_likelihood, prepare_programs

    likelihood = parse_likelihood(args.likelihood)
    models = args.models if args.command == "compare" else [args.model]
    default = {"run": f"bread-{models[0].stem}", "compare": "bread-compare",
               "protocol": f"protocol-{models[0].stem}"}.get(args.command)
    if default is None:       # check: no output directory of its own
        import tempfile
        base = Path(tempfile.mkdtemp(prefix="bread-check-"))
    else:
        base = (args.out or Path(default)) / "programs"
    simulator, prepared = args.simulator, []
    for model in models:
        directory = base / model.stem if len(models) > 1 else base
        p = prepare_programs(model, simulator, directory, likelihood)
        simulator = p.simulator     # compare: the simulator drafted from the first model
        prepared.append(p)
        if p.split is not None or p.drafted:
            logging.getLogger("bread_stan").info("%s: %s", model, p.describe())
    if args.command == "compare":
        args.models = [p.model for p in prepared]
    else:
        args.model = prepared[0].model
    args.simulator = simulator


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bread-stan`` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    commands = {"run": _cmd_run, "compare": _cmd_compare, "protocol": _cmd_protocol,
                "subjective": _cmd_subjective, "aide": _cmd_aide, "check": _cmd_check,
                "draft-simulator": _cmd_draft_simulator, "report": _cmd_report,
                "info": _cmd_info}
    try:
        if args.command in ("run", "compare", "check", "protocol"):
            _prepare(args)
        return commands[args.command](args)
    except (BreadStanError, ValueError) as error:
        # Problems with the user's input: the message names the problem and the fix.
        print(f"bread-stan {args.command}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        # File-system problems (missing file, permissions, full disk): one line.
        print(f"bread-stan {args.command}: error: {_os_message(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished step counts are saved; rerun the same command to "
              "continue", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
