"""Python as the command line: the calls take a program as it is, and a result shows
itself in a notebook as the report's first screen.

- ``bread_stan.bread("model.stan", data=...)`` on a program with no ``prior_only`` and no
  simulator (eight schools, non-centred, as in posteriordb) splits and drafts through the
  same code as ``bread-stan run``, and gives the command line's numbers bit for bit at the
  same seed and settings (per-chain forward and reverse estimates of every step count);
  the generated programs and the split table are in ``extra["programs"]``.
- ``BreadResult._repr_html_`` of a small saved result holds the verdict banner, the bound
  figure as an embedded ``<img`` and the results table.
"""

from __future__ import annotations

import warnings
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from bread_stan.ais.results import BreadResult
from synthetic_results import synthetic_step

TEST_STAN = Path(__file__).parent / "stan"
EIGHT, EIGHT_DATA = TEST_STAN / "eight_schools.stan", TEST_STAN / "eight_schools.json"


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


@pytest.mark.parametrize("gap, status", [(0.2, "converged"), (3.0, "not converged")])
def test_a_result_shows_the_reports_first_screen_in_a_notebook(tmp_path, gap, status):
    """Banner (the status in words) first, then the bound figure embedded as PNG data,
    then the results table with one row per step count; nothing styles the page around
    the cell.  Break tried: the old _repr_html_ (headline and a pandas table, no banner,
    no figure) fails the banner and image assertions."""
    saved = BreadResult("toy", {"seed": 0}, [synthetic_step(10, 5.0, 1), synthetic_step(100, gap, 2)])
    saved.save(tmp_path)
    result = BreadResult.load(tmp_path)
    assert result.status == status
    page = result._repr_html_()
    parsed = _Tags()
    parsed.feed(page)
    tags = [tag for tag, _ in parsed.tags]
    banner = [i for i, (tag, attrs) in enumerate(parsed.tags)
              if "verdict" in attrs.get("class", "")]
    images = [i for i, (tag, attrs) in enumerate(parsed.tags)
              if tag == "img" and attrs.get("src", "").startswith("data:image/png;base64,")]
    assert banner and images and banner[0] < images[0] < tags.index("table")
    assert status.upper() in parsed.text and result.headline() in parsed.text
    assert tags.count("tr") == 1 + len(result.steps)      # header and one row per T
    assert "body{" not in page and "main{" not in page    # rules scoped to the cell



@pytest.mark.stan
def test_python_bread_on_a_program_as_it_is_gives_the_command_lines_numbers(tmp_path):
    """The same split, the same drafted simulator, the same seed: bit for bit.  Break
    tried: drafting the simulator of the Python route (no output directory) with
    ``hyper=[]`` (mu and tau drawn rather than given) fails the test (the fingerprint,
    which hashes the simulator, first)."""
    import bread_stan
    from bread_stan.cli.main import main

    settings = ["--steps", "3,10", "--chains", "8", "--pilot-chains", "8", "--seed", "3",
                "--kernel", "hmc", "--leapfrog", "4", "--path", "prior", "--no-check"]
    out = tmp_path / "cli"
    code = main(["run", str(EIGHT), "--data", str(EIGHT_DATA), "--out", str(out), "--quiet",
                 *settings])
    assert code in (0, 4)
    cli = BreadResult.load(out)

    result = bread_stan.bread(
        str(EIGHT), data=str(EIGHT_DATA),
        sampler=bread_stan.SamplerSettings(kernel="hmc", n_leapfrog=4, pilot_chains=8),
        run=bread_stan.RunSettings(steps=(3, 10), chains=8, seed=3, path="prior",
                                   check_simulator=False, progress=False))
    assert [s.n_steps for s in result.steps] == [s.n_steps for s in cli.steps] == [3, 10]
    assert result.settings["fingerprint"] == cli.settings["fingerprint"]
    for mine, theirs in zip(result.steps, cli.steps):
        assert np.array_equal(mine.forward.log_estimates, theirs.forward.log_estimates)
        assert np.array_equal(mine.reverse.log_estimates, theirs.reverse.log_estimates)

    programs = result.extra["programs"]
    assert programs == {**cli.extra["programs"], "directory": None}
    assert programs["split"] == "automatic" and programs["drafted"]
    assert programs["modelled_data"] == ["y"]
    assert [r["role"] for r in programs["rows"] if "y ~" in r["statement"]] == ["likelihood"]
    assert set(programs["files"]) == {"eight_schools.stan", "eight_schools_prior_part.stan",
                                      "eight_schools_sim.stan"}
    assert (out / "programs" / "eight_schools_sim.stan").read_text() \
        == programs["files"]["eight_schools_sim.stan"]
    assert "| likelihood | `y ~ normal(theta, sigma);` |" in programs["table"]


@pytest.mark.stan
def test_a_program_is_taken_as_text_or_as_a_cmdstanpy_model(tmp_path):
    """No compile (stanc only): program text and a ``cmdstanpy.CmdStanModel`` are split and
    given a drafted simulator as a path is, the files named after the result (the text's
    default name, the model's Stan file), and a program with its own ``prior_only`` and a
    simulator runs as it is, nothing written."""
    from bread_stan.workflows.common import check_program, default_name
    from bread_stan.workflows.programs import prepared

    text = EIGHT.read_text()
    name = default_name(text)
    with prepared([text], None, None, [name]) as programs:
        assert programs.models[0].name == f"{name}.stan"
        assert programs.simulator.name == f"{name}_sim.stan"
        assert programs.records[name]["split"] == "automatic" and programs.records[name]["drafted"]
    cmdstanpy = pytest.importorskip("cmdstanpy")
    with warnings.catch_warnings():  # compile=False is deprecated, and needs no CmdStan
        warnings.simplefilter("ignore")
        model = cmdstanpy.CmdStanModel(stan_file=str(EIGHT), compile=False)
    check_program("model", model)
    assert default_name(model) == "eight_schools"
    with prepared([model], None, tmp_path, ["eight_schools"]) as programs:
        assert programs.models == [tmp_path / "programs" / "eight_schools.stan"]
        assert programs.records["eight_schools"]["directory"] == str(tmp_path / "programs")
    own, sim = TEST_STAN / "normal_mean.stan", TEST_STAN / "normal_mean_sim.stan"
    with prepared([own], sim, None, ["normal_mean"]) as programs:
        assert programs.models == [own] and programs.simulator == sim
        assert programs.records["normal_mean"]["split"] == "own"
        assert "declares `prior_only`" in programs.records["normal_mean"]["table"]



@pytest.mark.stan
def test_a_wrong_likelihood_is_bad_input_in_one_line(tmp_path, capsys):
    """``--likelihood`` naming nothing, or given to a program with its own ``prior_only``,
    is bad input (exit 2, one line), from the command line as from Python (an
    ``InputError``, still a ``ValueError``).  Break tried: raising ``ValueError`` as
    before exits 1, "internal error"."""
    from bread_stan.cli.main import main
    from bread_stan.errors import InputError
    from bread_stan.workflows.programs import prepared

    with pytest.raises(InputError, match="at least one data variable"):
        with prepared([EIGHT], None, None, ["eight_schools"], likelihood=" , "):
            pass
    own = TEST_STAN / "normal_mean.stan"
    code = main(["check", str(own), "--data", str(EIGHT_DATA), "--likelihood", "y"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "declares prior_only (its own split)" in err[0]
