"""The ``bread-stan`` command line.

Usage::

    bread-stan run MODEL.stan --simulator SIM.stan --data DATA.json [--steps 10,100,1000]
                   [--chains 100] [--kernel hmc|nuts] [--seed 0] [--out DIR] [--threads N]
    bread-stan compare A.stan B.stan --simulator SIM.stan --data DATA.json [...]
    bread-stan protocol MODEL.stan [--simulator SIM.stan | --hyper NAME,...] --data REAL.json
                   [--sweep 10,100,1000,10000] [--replicates 5] [--fit-chains 4]
                   [--fit-sampler toolkit|cmdstan]
                   [run options]
    bread-stan subjective MODEL.stan --data DATA.json [--reference DRAWS]
                   [--base gaussian|prior] [--simulator SIM.stan]
                   [--approximation laplace|advi-meanfield|advi-fullrank|pathfinder]
                   [--base-fit reference|laplace] [--widen 1.5] [run options]
    bread-stan aide MODEL.stan --data DATA.json [--gold ais:10000|reference]
                   [--target advi-meanfield advi-fullrank laplace pathfinder ais:100 sir:1000
                    nuts:100 hmc:100 mh:1000]
                   [--n-gold 100] [--n-target 100] [--m-gold 1] [--m-target 1]
                   [--mcmc-start uniform|prior|q0]
                   [--base gaussian|prior] [--simulator SIM.stan] [--out DIR]
    bread-stan check MODEL.stan --simulator SIM.stan --data DATA.json [--kernel hmc|nuts]
                   [--prior-draws 2000] [--datasets 100] [--transitions 10] [--alpha 0.01]
    bread-stan report DIR
    bread-stan info

``run``, ``compare``, ``protocol`` and ``check`` take any Stan program: without
``prior_only`` the model is split into prior and likelihood automatically
(``--likelihood NAME,...`` names the modelled data), and without ``--simulator`` one is
drafted; the generated programs and the split table are saved in ``OUT/programs``.
``protocol`` without ``--simulator`` on a program whose prior cannot be simulated (a
parameter with no proper prior, or prior draws that break the simulation), or with
``--hyper NAME,...``, fixes those parameters at values fitted on the real data and
anneals on the Gaussian path (:mod:`bread_stan.workflows.protocol_fitted`); its bound is
the paper's heuristic, and the report says so.
Each command is a thin layer over the Python call of the same name
(:func:`bread_stan.bread`, ``compare``, ``protocol``, ``check_simulator``), which
prepares the programs itself (:mod:`bread_stan.workflows.programs`).

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
Every command exits 1 on an internal error (a bug in bread-stan: one line, the
traceback under ``--verbose``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from pathlib import Path

__all__ = ["main"]

from ..deadline import OverBudget
from ..errors import BreadStanError, ImproperPriorError, PriorDrawError
from .arguments import build_parser

log = logging.getLogger("bread_stan")


def _sampler(args, **extra):
    """The SamplerSettings of the kernel options, with ``extra`` settings."""
    from ..workflows.bread import SamplerSettings

    return SamplerSettings(kernel=args.kernel, n_leapfrog=args.leapfrog,
                           max_depth=args.max_depth, pilot_chains=args.pilot_chains,
                           pilot_grid=args.pilot_grid, pilot_steps=args.pilot_steps, **extra)


def _data(arg: str | None):
    """A JSON path as given, or a bundled data set by name (``bread_stan.stan.datasets``)."""
    if arg is None or Path(arg).is_file():
        return arg
    from ..stan import datasets

    if arg in datasets.names():
        return datasets.load(arg)
    raise FileNotFoundError(f"--data {arg}: no such file, and not a bundled data set "
                            f"(those are {', '.join(datasets.names())})")


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
                       metric=args.metric,
                       metric_ridge=getattr(args, "metric_ridge", "auto"))
    run = RunSettings(steps=args.steps, chains=args.chains, seed=args.seed,
                      exact_draws=getattr(args, "exact_draws", 1),
                      threads=args.threads, schedule=ScheduleSpec(kind=args.schedule),
                      progress=not args.quiet,
                      check_simulator=not getattr(args, "no_check", False),
                      algorithm=getattr(args, "algorithm", "ais"),
                      particles=getattr(args, "particles", None),
                      path=getattr(args, "path", "auto"),
                      budget_minutes=getattr(args, "budget", None),
                      budget_gradients=getattr(args, "budget_gradients", None))
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
    from ..reporting.report import write_report

    path = write_report(result, out)
    _print_summary(result)
    print(f"\n{what}: {path}")
    return _exit_code(result)


def _path_line(choice: dict) -> str:
    """One line on the annealing path a run took and the number behind it."""
    how = "chosen automatically" if choice.get("requested") == "auto" else "as requested"
    return f"path: {choice.get('path')} ({how}): {choice.get('reason')}"


def _print_summary(result) -> None:
    from ..reporting.report import markdown_table, result_table

    print(f"\n{result.model}: {result.status.upper()}")
    print(_check_line(result.extra.get("simulator_check")))
    if result.extra.get("path_choice"):
        print(_path_line(result.extra["path_choice"]))
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
                       executor=executor, likelihood=args.likelihood)
    return _report(result, out, "results and report")


def _cmd_compare(args) -> int:
    from ..reporting.report import write_comparison, write_report
    from ..workflows.bread import compare

    sampler, run = _settings(args)
    out = args.out or Path("bread-compare")
    try:
        with _executor(args) as executor:
            results = compare(args.models, args.simulator, _data(args.data), sampler=sampler,
                              run=run, out_dir=out, verdict=_verdict(args), executor=executor,
                              likelihood=args.likelihood)
    except (BreadStanError, ValueError, OSError):
        _compare_finished(out)
        raise
    for label, result in results.items():
        write_report(result, out / label)
        _print_summary(result)
    path = write_comparison(results, out)
    print(f"\ncomparison: {path}")
    return _exit_code(results)


def _compare_finished(out: Path) -> None:
    """After a failed ``compare``, write the comparison of the programs that finished."""
    from ..ais.results import BreadResult
    from ..reporting.report import write_comparison

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


def _print_protocol(result) -> None:
    from ..reporting.protocol_report import protocol_verdict
    from ..reporting.report import markdown_table

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


def _hyper(text: str | None) -> list[str] | None:
    from ..workflows.protocol_fitted import parse_hyper

    return parse_hyper(text)


def _cmd_protocol(args) -> int:
    from ..workflows.fit import FitSettings
    from ..workflows.protocol import ProtocolSettings, protocol
    from ..reporting.protocol_report import write_protocol_report

    sampler, run = _settings(args)
    settings = ProtocolSettings(
        s_sweep=args.sweep, replicates=args.replicates,
        replicate_max_steps=args.replicate_max_steps, budget_minutes=args.protocol_budget,
        fit=FitSettings(chains=args.fit_chains, warmup=args.fit_warmup, draws=args.fit_draws,
                        sampler=args.fit_sampler, hyper_summary=args.hyper_summary))
    out = args.out or Path(f"protocol-{args.model.stem}")
    with _executor(args) as executor:
        result = protocol(args.model, args.simulator, _data(args.data), sampler=sampler,
                          run=run, settings=settings, out_dir=out, executor=executor,
                          likelihood=args.likelihood, hyper=_hyper(args.hyper),
                          verdict=_verdict(args))
    report = write_protocol_report(result, out)
    _print_protocol(result)
    print(f"\nresults and report: {report}")
    if result.unjudged:   # the budget left too few step counts to judge: as a set-up stop
        return EXIT_NOT_CONVERGED
    return _exit_code(result)


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
    from ..workflows.aide import AIDESettings, aide
    from ..workflows.settings import RunSettings
    from ..workflows.subjective import BaseSettings
    from ..reporting.aide_report import aide_table, write_aide_report
    from ..reporting.report import markdown_table

    out = args.out or Path(f"aide-{args.model.stem}")
    reference = args.reference
    if reference is not None and len(reference) == 1:
        reference = reference[0]
    sampler = _sampler(args)
    settings = AIDESettings(n_gold=args.n_gold, n_target=args.n_target, m_gold=args.m_gold,
                            m_target=args.m_target, mcmc_start=args.mcmc_start)
    run = RunSettings(seed=args.seed, schedule=ScheduleSpec(kind=args.schedule),
                      threads=args.threads, progress=not args.quiet)
    common = dict(gold=args.gold, settings=settings, sampler=sampler, run=run,
                  base=BaseSettings(kind=args.base, fit=args.base_fit, widen=args.widen),
                  simulator=args.simulator, reference=reference, out_dir=out)
    with _executor(args) as executor:
        results = [aide(args.model, _data(args.data), target=t, executor=executor, **common)
                   for t in args.target]
    report = write_aide_report(results, out, model=args.model.stem)
    print(f"\n{args.model.stem}: AIDE against {results[0].gold}")
    print(markdown_table(aide_table(results)))
    print(f"\nresults and report: {report}")
    return _exit_code(results)


def _cmd_check(args) -> int:
    from ..workflows.simulator_check import CheckSettings, check_simulator

    sampler = _sampler(args)
    settings = CheckSettings(prior_draws=args.prior_draws, datasets=args.datasets,
                             transitions=args.transitions, alpha=args.alpha, seed=args.seed)
    result = check_simulator(args.model, args.simulator, _data(args.data), sampler=sampler,
                             settings=settings, threads=args.threads,
                             likelihood=args.likelihood)
    simulator = args.simulator or "the drafted simulator"
    print(f"{simulator} against {args.model}: {result.message}")
    return _exit_code(result)


def _cmd_draft_simulator(args) -> int:
    from ..stan.compile import Program, stanc_info
    from ..stan.draft import draft_program, split_model
    from ..store import write_atomic

    hyper = (None if args.hyper is None
             else [h.strip() for h in args.hyper.split(",") if h.strip()])
    model = args.model
    if "prior_only" not in stanc_info(model).get("inputs", {}):   # split it first
        model = Program(split_model(model).program, model.stem)
    drafted = draft_program(model, hyper=hyper)
    text = drafted.text
    for name, why in drafted.relaxed_bounds.items():
        print(f"note: {why}: the simulator declares {name} without it; a model reading "
              f"its draws must too (bread-stan run does this itself)", file=sys.stderr)
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
        from ..reporting.protocol_report import write_protocol_report

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
    from ..stan.features import stan_version_line
    from ..stan.toolchain import find_toolchain

    tc = find_toolchain()
    print(f"bread-stan {__version__}")
    print(f"toolchain: {tc.version} (stanc {tc.stanc})")
    print(f"stan: {stan_version_line(tc)}")
    print(f"cache: {cache_dir()}")
    return 0


def _os_message(error: OSError) -> str:
    """One line for an OS error: what failed on which file, without a traceback."""
    if error.strerror is None:
        return str(error)
    where = f": {error.filename}" if error.filename else ""
    return f"{error.strerror}{where}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bread-stan`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    commands = {"run": _cmd_run, "compare": _cmd_compare, "protocol": _cmd_protocol,
                "subjective": _cmd_subjective, "aide": _cmd_aide, "check": _cmd_check,
                "draft-simulator": _cmd_draft_simulator, "report": _cmd_report,
                "info": _cmd_info}
    try:
        return commands[args.command](args)
    except BaseException as error:  # the one exit policy of the command line
        return _exit_status(args, error)


EXIT_BAD_INPUT, EXIT_BUG, EXIT_INTERRUPTED, EXIT_CHECK_FAILED = 2, 1, 130, 3
EXIT_NOT_CONVERGED = 4

# The exit status of a BREAD or subjective result, by its ``status``.
EXIT_CODES = {"converged": 0, "not converged": EXIT_NOT_CONVERGED,
              "inconsistent": EXIT_CHECK_FAILED}


def _exit_code(outcome) -> int:
    """The exit status of a finished command, from what it produced (the one policy):
    a BREAD or subjective result by its ``status`` (0 converged, 3 a check failed, 4
    converged at no T or nothing finished); several (``compare``) 3 if any failed a
    check, else the worst; a protocol result 0 if ``ok`` else 3; a simulator check 0 if
    it passed else 3; anything else (AIDE estimates, an approximation's divergence) 0."""
    if isinstance(outcome, dict):
        codes = {_exit_code(value) for value in outcome.values()}
        return EXIT_CHECK_FAILED if EXIT_CHECK_FAILED in codes else max(codes, default=0)
    if hasattr(outcome, "status"):
        return EXIT_CODES.get(outcome.status, EXIT_NOT_CONVERGED)
    if hasattr(outcome, "ok"):
        return 0 if outcome.ok else EXIT_CHECK_FAILED
    if hasattr(outcome, "passed"):
        return 0 if outcome.passed else EXIT_CHECK_FAILED
    return 0


def _protocol_hint(args, error: BaseException) -> str:
    """For ``run`` and ``compare`` refusing a prior nothing can be simulated from (flat,
    or so vague that its draws break the simulation), the command that serves such a
    program on real data; else empty."""
    if args.command not in ("run", "compare") or not isinstance(
            error, (ImproperPriorError, PriorDrawError)):
        return ""
    model = args.model if isinstance(getattr(args, "model", None), Path) else "MODEL.stan"
    return (f"; on real data, `bread-stan protocol {model} --data REAL.json` runs the "
            "BREAD paper's real-data protocol, which fixes such parameters at values "
            "fitted on the data (its bound is then a heuristic, not a guarantee)")


def _exit_status(args, error: BaseException) -> int:
    """The exit policy, in one place: the toolkit's own errors (BreadStanError) and OS
    errors are bad input (exit 2, one line naming the problem), except a set-up that
    would overrun --budget (exit 4, not converged within it); Ctrl-C exits 130;
    anything else is a bug in bread-stan (exit 1, one line saying so, the traceback
    under ``--verbose``)."""
    if isinstance(error, OverBudget):   # a pilot or check would overrun --budget
        print(f"bread-stan {args.command}: {error}", file=sys.stderr)
        return EXIT_NOT_CONVERGED
    if isinstance(error, BreadStanError):
        # Problems with the user's input: the message names the problem and the fix.
        print(f"bread-stan {args.command}: error: {error}{_protocol_hint(args, error)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(error, OSError):
        # File-system problems (missing file, permissions, full disk): one line.
        print(f"bread-stan {args.command}: error: {_os_message(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(error, KeyboardInterrupt):
        print("\ninterrupted: finished step counts are saved; rerun the same command to "
              "continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not isinstance(error, Exception):  # SystemExit and the like pass through
        raise error
    if args.verbose:
        traceback.print_exception(error, file=sys.stderr)
    print(f"bread-stan {args.command}: internal error (a bug in bread-stan, please report "
          f"it): {type(error).__name__}: {error}"
          + ("" if args.verbose else "; rerun with --verbose for the traceback"),
          file=sys.stderr)
    return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
