"""The README as a landing page, and its links into docs/ (the site itself is built
with warnings as errors by .ci/run, not here: Sphinx is not a test dependency)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# Markdown links and images with a relative target: [text](target) / ![alt](target).
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _setup_commands(text: str) -> list[str]:
    """The indented or fenced command lines that start with the two set-up commands."""
    return [line.strip() for line in text.splitlines()
            if line.strip().startswith("python -m pip install -e ")]


def test_readme_is_a_landing_page_under_120_lines():
    assert len(README.splitlines()) < 120


def test_every_relative_link_in_the_readme_and_docs_resolves_to_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pages = [p for p in pages if "_build" not in p.parts and "_api" not in p.parts]
    missing = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            path = (page.parent / target.split("#")[0]).resolve()
            if path.parent == (ROOT / "docs" / "examples").resolve():
                # docs/conf.py copies notebooks/*.ipynb there at build time
                path = ROOT / "notebooks" / path.name
            if not path.exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def test_the_two_setup_commands_are_the_same_in_the_readme_docs_and_ci():
    readme = _setup_commands(README)
    started = _setup_commands((ROOT / "docs" / "getting_started.md").read_text())
    assert len(readme) >= 2 and readme[:2] == started[:2], (readme, started)
    # CI runs the README's test command: its install (quiet), then its tests, on one
    # line (leg 2 is started between the two).
    ci = (ROOT / ".ci" / "run").read_text()
    line = next(l for l in ci.splitlines() if 'python -m pip install -q -e ".[test]"' in l)
    assert 'python -m pytest -q' in ci.split(line, 1)[1].split("\n}", 1)[0], line
    assert readme[1] == 'python -m pip install -e ".[test]" && python -m pytest -q'


def test_the_cli_page_names_a_parser_function_the_cli_module_has():
    import importlib

    page = (ROOT / "docs" / "cli.md").read_text()
    module = re.search(r":module:\s*(\S+)", page).group(1)
    func = re.search(r":func:\s*(\S+)", page).group(1)
    parser = getattr(importlib.import_module(module), func)()
    assert parser.prog == "bread-stan"
