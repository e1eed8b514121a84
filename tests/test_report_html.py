"""The HTML report's structure: the first section says the verdict and shows the bound.

A structural check with ``html.parser`` (no browser): the report's first
``<section>`` holds the verdict in words (the status, upper case, in the
``verdict`` banner) followed by the bound figure embedded as PNG data; tables sit
in boxes that scroll sideways and right-align their numeric columns.
``scripts/tools/report_screenshot.py`` renders the same page in headless Chromium.
"""

from html.parser import HTMLParser

import pytest

from bread_stan.ais.results import BreadResult
from synthetic_results import synthetic_step
from bread_stan.reporting import plots
from bread_stan.reporting.html_page import markdown_to_html
from bread_stan.reporting.report import write_comparison, write_report


class _Outline(HTMLParser):
    """Start tags (tag, attrs, index of the enclosing top-level section) and the text
    of each top-level section."""

    def __init__(self):
        super().__init__()
        self.depth, self.section = 0, -1
        self.tags, self.texts = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            if self.depth == 0:
                self.section += 1
                self.texts.append("")
            self.depth += 1
        self.tags.append((tag, dict(attrs), self.section if self.depth else None))

    def handle_endtag(self, tag):
        if tag == "section":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.texts[self.section] += data


def _outline(path) -> _Outline:
    parser = _Outline()
    parser.feed(path.read_text())
    return parser


def _result(final_gap: float) -> BreadResult:
    return BreadResult("toy", {"seed": 0}, [synthetic_step(10, 5.0, 1), synthetic_step(100, final_gap, 2)])


@pytest.mark.parametrize("gap, status", [(0.2, "converged"), (3.0, "not converged")])
def test_first_section_says_the_verdict_then_shows_the_bound_figure(tmp_path, gap, status):
    result = _result(gap)
    assert result.status == status
    page = _outline(write_report(result, tmp_path))
    first = [(tag, attrs) for tag, attrs, section in page.tags if section == 0]
    banner = [i for i, (tag, attrs) in enumerate(first) if "verdict" in attrs.get("class", "")]
    images = [i for i, (tag, attrs) in enumerate(first)
              if tag == "img" and attrs.get("alt") == "bound"]
    assert banner and images and banner[0] < images[0]
    assert first[images[0]][1]["src"].startswith("data:image/png;base64,")
    assert status.upper() in page.texts[0]
    assert not any(tag == "table" for tag, _ in first)  # the table comes after
    # the other two figures and the results table follow, outside the first section
    later = [attrs.get("alt") for tag, attrs, section in page.tags if tag == "img" and section]
    assert sorted(later) == ["estimates", "gap_by_temperature"]


def test_first_section_says_why_when_the_bound_figure_fails(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no figure today")

    monkeypatch.setattr(plots, "plot_bound", broken)
    page = _outline(write_report(_result(0.2), tmp_path))
    assert "CONVERGED" in page.texts[0] and "figure bound could not be drawn" in page.texts[0]
    assert not any(tag == "img" for tag, _, section in page.tags if section == 0)


def test_tables_scroll_in_their_box_and_align_numbers_right():
    text = ("| steps | verdict | interval | log p(y) >= | note |\n|---|---|---|---|---|\n"
            "| 10 | not converged | 0 to 1.79e+04 | -2257.82 +- 1 | n/a |\n"
            "| 100 | converged | n/a | -2246.38 +- 0.49 | fine |")
    parser = _Outline()
    parser.feed(markdown_to_html(text))
    tags = [(tag, attrs) for tag, attrs, _ in parser.tags]
    assert tags[0] == ("div", {"class": "scroll"}) and tags[1][0] == "table"
    header = [attrs.get("class") for tag, attrs in tags if tag == "th"]
    assert header == ["num", None, "num", "num", None]
    cells = [attrs.get("class") for tag, attrs in tags if tag == "td"]
    assert cells[:5] == cells[5:] == ["num", None, "num", "num", None]


def test_comparison_figure_is_drawn(tmp_path):
    """The comparison of two programs draws its figure (a failure would only be noted
    in comparison.md, so check that it is not)."""
    md = write_comparison({"a": _result(0.2), "b": _result(3.0)}, tmp_path).read_text()
    assert "![comparison](comparison.png)" in md and "could not be drawn" not in md
    assert (tmp_path / "comparison.png").stat().st_size > 0


def test_schedule_section_names_the_pilot_betas_where_chains_sat_apart():
    """The report's Schedule section says at how many pilot betas the metric came from
    the spread within each chain (``TunedKernel.separated``), and says nothing when
    there were none."""
    from bread_stan.reporting.report import _schedule_section
    result = _result(0.2)
    result.settings["run"] = {"schedule": {"kind": "adaptive"}}
    tuning = {"grid_betas": [0.0, 0.01, 0.1, 1.0], "inv_metric": [[1.0]] * 4,
              "separated": [False, False, True, True]}
    result.extra["tuning"] = tuning
    assert "At 2 of 4 pilot betas the pilot chains sat apart" in _schedule_section(result)
    tuning["separated"] = [False] * 4
    assert "sat apart" not in _schedule_section(result)
