"""The command line's exit policy, decided in one place: the toolkit's own errors and OS
errors are bad input (exit 2, one line); any other exception is a bug (exit 1, one
line saying so; the traceback only under --verbose).  Exact: no Stan program runs."""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.errors import InputError, StanDataError
from bread_stan.cli import main as cli
from bread_stan.cli.arguments import build_parser


def _fails_with(monkeypatch, error):
    def command(args):
        raise error
    monkeypatch.setattr(cli, "_cmd_info", command)


@pytest.mark.parametrize("error", [InputError("steps must be whole numbers"),
                                   StanDataError("missing variable N"),
                                   FileNotFoundError(2, "No such file or directory", "d.json")])
def test_the_toolkits_errors_and_os_errors_are_bad_input(monkeypatch, capsys, error):
    _fails_with(monkeypatch, error)
    assert cli.main(["info"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bread-stan info: error: ") and err.count("\n") == 1
    assert "internal error" not in err


def test_any_other_exception_is_a_bug_in_one_line(monkeypatch, capsys):
    """A ValueError from deep in numpy is not the user's bad input."""
    def broken(args):
        np.linalg.cholesky(-np.eye(2))  # LinAlgError, a ValueError: once reported as exit 2
    monkeypatch.setattr(cli, "_cmd_info", broken)
    assert cli.main(["info"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error (a bug in bread-stan" in err
    assert "LinAlgError" in err and "--verbose" in err and "Traceback" not in err


def test_verbose_adds_the_traceback(monkeypatch, capsys):
    _fails_with(monkeypatch, ValueError("operands could not be broadcast together"))
    assert cli.main(["--verbose", "info"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: operands could not be broadcast" in err


def test_interrupt_exits_130(monkeypatch, capsys):
    _fails_with(monkeypatch, KeyboardInterrupt())
    assert cli.main(["info"]) == 130


def test_a_finished_commands_status_comes_from_one_policy():
    """run/subjective: by the result's status (converged 0, inconsistent 3, not converged
    or empty 4); compare: 3 if any program failed a check, else the worst; protocol: ok
    or 3; check: passed or 3; AIDE: 0."""
    from types import SimpleNamespace as Outcome
    code = cli._exit_code
    assert code(Outcome(status="converged")) == 0
    assert code(Outcome(status="inconsistent")) == 3
    assert code(Outcome(status="not converged")) == 4 and code(Outcome(status="empty")) == 4
    assert code({"a": Outcome(status="converged"), "b": Outcome(status="not converged")}) == 4
    assert code({"a": Outcome(status="not converged"), "b": Outcome(status="inconsistent"),
                 "c": Outcome(status="converged")}) == 3
    assert code(Outcome(ok=False)) == 3 and code(Outcome(ok=True)) == 0
    assert code(Outcome(passed=False)) == 3 and code(Outcome(passed=True)) == 0
    assert code([Outcome(estimate=0.1)]) == 0


def test_protocol_refuses_exact_draws_which_it_would_ignore(capsys):
    """The protocol's reverse chains start from the S-sweep's snapshots, never from exact
    draws: --exact-draws, accepted and silently ignored before, is an unknown option."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(["protocol", "m.stan", "--data", "d.json", "--exact-draws", "3"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --exact-draws 3" in capsys.readouterr().err
    assert build_parser().parse_args(["run", "m.stan", "--exact-draws", "3"]).exact_draws == 3
    from bread_stan.workflows.protocol import protocol
    from bread_stan.workflows.settings import RunSettings
    with pytest.raises(InputError, match="exact_draws=...\\) applies to bread and compare"):
        protocol("m.stan", real_data={}, run=RunSettings(exact_draws=3))
