"""The documentation says only what the code does: every docs page and the README are
read, and each test below fails, naming the page and line, when

- a command line ``bread-stan SUBCOMMAND ... --opt`` names an option (or a choice of
  one, such as ``--path gaussian``) that SUBCOMMAND's parser does not have, or an
  option alone in backticks (`` `--steps` ``) is in no subcommand's parser;
- a ``bread_stan.x.y`` name in backticks, or a name a Python block imports or reads
  from ``bread_stan``, does not import or resolve;
- a relative link (or its ``#anchor`` on a Markdown page) or a repository path in
  backticks or on a command line (``scripts/...``, ``tests/stan/...``) does not exist;
- a ```` ```python ```` block does not compile, reads a name that no earlier line of its
  page binds (a snippet must run as written), or, when it is fast, fails when run.

A Python block is *fast* (and is run, in one namespace per page, from the repository
root) unless it calls into Stan (a workflow, an approximation, a ``StanModel``, a
``.stan`` path) or carries the comment ``# docs: compile only``; once a page has a slow
block, its later blocks only compile.  The unit tests at the end break each kind of
check on purpose, on small pages held in memory.  Fast: nothing here compiles Stan.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib
import io
import os
import re
import symtable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------
# Reading pages


@dataclass(frozen=True)
class Snippet:
    """A piece of a page: its text, the line it starts on, and what it is ("inline",
    "indented", or a fenced block's language, "" for none)."""

    text: str
    line: int
    kind: str


@dataclass(frozen=True)
class Page:
    """A Markdown page: where it lives (links resolve from there) and its text."""

    path: Path
    text: str

    @property
    def name(self) -> str:
        with contextlib.suppress(ValueError):
            return str(self.path.relative_to(ROOT))
        return str(self.path)


def docs_pages() -> list[Page]:
    """README.md and every Markdown page under docs/ (not the built site, not the
    generated API pages)."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    skip = {"_build", "_api", "examples"}
    return [Page(p, p.read_text()) for p in paths if not skip & set(p.relative_to(ROOT).parts)]


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?([\w-]*)\}?")
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")


def snippets(page: Page) -> list[Snippet]:
    """The page's fenced blocks, its indented code lines and its inline code spans."""
    out: list[Snippet] = []
    lines = page.text.splitlines()
    fence = None               # (indent, marker, language, first line, lines)
    prose: list[tuple[int, str]] = []
    previous_blank = True
    for number, line in enumerate(lines, 1):
        if fence is not None:
            if line.strip().startswith(fence[1]) and not line.strip().strip(fence[1][0]):
                out.append(Snippet("\n".join(fence[4]), fence[3], fence[2]))
                fence = None
            else:
                fence[4].append(line[len(fence[0]):] if line.startswith(fence[0]) else line)
            continue
        match = FENCE.match(line)
        if match:
            fence = (match.group(1), match.group(2), match.group(3).lower(), number + 1, [])
            continue
        if line.startswith("    ") and line.strip() and (previous_blank or (
                out and out[-1].kind == "indented" and out[-1].line + out[-1].text.count("\n") == number - 1)):
            if out and out[-1].kind == "indented" and \
                    out[-1].line + out[-1].text.count("\n") == number - 1:
                last = out.pop()
                out.append(Snippet(last.text + "\n" + line[4:], last.line, "indented"))
            else:
                out.append(Snippet(line[4:], number, "indented"))
        else:
            prose.append((number, line))
        previous_blank = not line.strip()
    # Inline code spans, which may wrap onto the next line of a paragraph.
    text = "\n".join(line for _, line in prose)
    numbers = [number for number, _ in prose]
    for match in INLINE.finditer(text):
        out.append(Snippet(" ".join(match.group(1).split()),
                           numbers[text.count("\n", 0, match.start())], "inline"))
    return out


# ---------------------------------------------------------------------------------------
# Command lines


def build_parser() -> argparse.ArgumentParser:
    """The parser the ``bread-stan`` command uses, wherever the CLI module lives."""
    for name in ("bread_stan.cli.arguments", "bread_stan.reporting.arguments"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name and name.startswith(error.name):
                continue
            raise
        return module.build_parser()
    raise ImportError("no bread_stan.cli.arguments or bread_stan.reporting.arguments")


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SHELL_KINDS = {"", "bash", "sh", "shell", "console", "text", "indented", "inline"}
# A command where a shell reads one: at the start of a line, or after &&, ; or a prompt.
COMMAND = re.compile(r"(?:^|&&\s*|;\s*|\$\s+)(?:bread-stan|python -m bread_stan(?:\.\w+)*\.cli)"
                     r"(?:\s+-[\w-]+)*\s+([\w-]+)(.*)")   # global options (-v) skipped
# A paragraph about another tool: its options are not bread-stan's.
OTHER_TOOL = re.compile(r"scripts/|python |stanc|sphinx|pip ")
OPTION = re.compile(r"^\[?(--?[A-Za-z][\w-]*)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_.,:]*$|\.\.\.")


def command_lines(snippet: Snippet) -> list[str]:
    """The shell lines of a snippet, continuation lines joined (a trailing backslash, or
    an indented line that goes on with ``[`` or ``--``)."""
    if snippet.kind not in SHELL_KINDS:
        return []
    joined: list[str] = []
    carry = False
    for raw in snippet.text.splitlines():
        line = raw.strip()
        goes_on = raw[:1].isspace() and line[:1] in ("[", "-") and joined
        if (carry or goes_on) and joined:
            joined[-1] += " " + line.rstrip("\\").strip()
        else:
            joined.append(line.rstrip("\\").strip())
        carry = raw.rstrip().endswith("\\")
    return joined


def paragraph(page: Page, line: int) -> str:
    """The paragraph (lines between blank lines) around ``line`` (1-based)."""
    lines = page.text.splitlines()
    first = last = line - 1
    while first > 0 and lines[first - 1].strip():
        first -= 1
    while last + 1 < len(lines) and lines[last + 1].strip():
        last += 1
    return "\n".join(lines[first:last + 1])


def _command_text(rest: str) -> str:
    """The arguments of one command: up to a comment, a pipe, a redirect or the next
    command."""
    for stop in (" #", " | ", " > ", " 2>", "&&", ";", " || "):
        rest = rest.split(stop, 1)[0]
    return rest


def check_options(pages: list[Page], parser: argparse.ArgumentParser | None = None) -> list[str]:
    """Options (and their choices) on ``bread-stan`` command lines that the named
    subcommand's parser does not have; options alone in backticks that no subcommand
    has."""
    parser = parser or build_parser()
    subs = subparsers(parser)
    known = {opt for sub in [parser, *subs.values()] for opt in sub._option_string_actions}
    problems = []
    for page in pages:
        for snip in snippets(page):
            where = f"{page.name}:{snip.line}"
            if snip.kind == "inline" and OPTION.match(snip.text) and \
                    "bread-stan" not in snip.text and \
                    not OTHER_TOOL.search(paragraph(page, snip.line)):
                for token in snip.text.split():
                    opt = OPTION.match(token)
                    if opt and opt.group(1).startswith("--") and opt.group(1) not in known:
                        problems.append(f"{where}: {opt.group(1)} is an option of no "
                                        "bread-stan subcommand")
            for line in command_lines(snip):
                for match in COMMAND.finditer(line):
                    name, rest = match.group(1), _command_text(match.group(2))
                    if name not in subs:
                        if name.islower():
                            problems.append(f"{where}: bread-stan has no subcommand {name!r}")
                        continue
                    problems += _check_command(where, name, subs[name], rest.split())
    return problems


def _check_command(where: str, name: str, sub, tokens: list[str]) -> list[str]:
    problems = []
    actions = sub._option_string_actions
    for i, token in enumerate(tokens):
        opt = OPTION.match(token)
        if not opt or not token.lstrip("[").startswith("-") or token.lstrip("[") == "-":
            continue
        option = opt.group(1).split("=")[0]
        if option not in actions:
            problems.append(f"{where}: bread-stan {name} has no option {option}")
            continue
        choices = actions[option].choices
        value = token.split("=", 1)[1] if "=" in token else (
            tokens[i + 1] if i + 1 < len(tokens) else "")
        value = value.strip("[]")
        if choices is None or not value or value.startswith("-"):
            continue
        for choice in value.split("|"):
            if choice and not PLACEHOLDER.search(choice) and choice not in choices:
                problems.append(f"{where}: bread-stan {name} {option} has no choice "
                                f"{choice!r} (it takes {', '.join(map(str, choices))})")
    return problems


# ---------------------------------------------------------------------------------------
# Python names


DOTTED = re.compile(r"\bbread_stan(?:\.[A-Za-z_]\w*)+")
# A name inside the package written from its subpackage (`ais.results.BreadResult`).
RELATIVE = re.compile(r"^(?:ais|stan|kernels|workflows|reporting|approx|parallel|meta|exact|"
                      r"cli)\.[A-Za-z_][\w.]*\w$")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``bread_stan.x.y``) is a module or an attribute of one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for part in parts[i:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def check_names(pages: list[Page]) -> list[str]:
    """``bread_stan.x.y`` names in backticks (or on a ``{eval-rst}`` directive's
    ``:module:``), and names written from a subpackage (`` `ais.results.BreadResult` ``,
    the whole span), that do not resolve."""
    problems = []
    for page in pages:
        for snip in snippets(page):
            if snip.kind not in ("inline", "eval-rst"):
                continue
            relative = snip.text.split("(")[0] if snip.kind == "inline" else ""
            found = DOTTED.findall(snip.text) + (
                [f"bread_stan.{relative}"] if RELATIVE.match(relative) else [])
            for dotted in found:
                if not resolves(dotted):
                    problems.append(f"{page.name}:{snip.line}: {dotted} does not resolve")
    return problems


# ---------------------------------------------------------------------------------------
# Links and repository paths


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REPO_PATH = re.compile(r"^(?:\./)?((?:scripts|tests|stan_models|data|notebooks|docs|bread_stan|"
                       r"\.ci)/[\w./*-]*)")


def _slug(heading: str) -> str:
    """The anchor GitHub and MyST give a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings (outside code blocks)."""
    found, fenced = set(), False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.add(_slug(line.lstrip("#")))
    return found


def _docs_examples(path: Path) -> Path:
    # docs/conf.py copies notebooks/*.ipynb into docs/examples/ for the site.
    if path.parent == (ROOT / "docs" / "examples").resolve():
        return ROOT / "notebooks" / path.name
    return path


def check_links(pages: list[Page]) -> list[str]:
    """Relative links (and images) whose file, or whose anchor on a Markdown page, does
    not exist."""
    problems = []
    for page in pages:
        for number, line in enumerate(page.text.splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue  # a URL
                file, _, anchor = target.partition("#")
                path = _docs_examples((page.path.parent / file).resolve()) if file else page.path
                if file and not path.exists():
                    problems.append(f"{page.name}:{number}: link {target} -> no such file")
                elif anchor and path.suffix == ".md":
                    text = page.text if not file else path.read_text()
                    if anchor not in anchors(text):
                        problems.append(f"{page.name}:{number}: link {target} -> no heading "
                                        f"with anchor #{anchor}")
    return problems


def _is_placeholder(path: str) -> bool:
    words = re.split(r"[/._-]", path)
    return any(re.fullmatch(r"[A-Z]{1,}\d*", w) and w not in ("README", "LICENSE") for w in words)


def repository_paths(snip: Snippet) -> list[str]:
    """Repository paths named in a snippet: the whole of an inline span, or any
    argument of a shell line."""
    if snip.kind == "inline":
        tokens = [snip.text.split()[0]] if snip.text.split() else []
    elif snip.kind in SHELL_KINDS:
        tokens = [t for line in command_lines(snip) for t in line.split()]
    else:
        return []
    out = []
    for token in tokens:
        match = REPO_PATH.match(token.strip("\"'(),"))
        if match:
            path = re.sub(r":\d+(-\d+)?$", "", match.group(1).split("#")[0]).rstrip(".,:")
            # docs/_build and docs/examples are made by the site's build
            if not re.match(r"docs/(_build|examples)\b", path) and not _is_placeholder(path):
                out.append(path)
    return out


def check_paths(pages: list[Page], root: Path = ROOT) -> list[str]:
    """Repository paths in backticks or on command lines that do not exist."""
    problems = []
    for page in pages:
        for snip in snippets(page):
            for path in repository_paths(snip):
                exists = any(root.glob(path.rstrip("/"))) if "*" in path else \
                    (root / path).exists()
                if not exists:
                    problems.append(f"{page.name}:{snip.line}: {path} does not exist")
    return problems


# ---------------------------------------------------------------------------------------
# Python blocks


SLOW = re.compile(r"#\s*docs:\s*compile only|\.stan[\"']|StanModel\(|\b(?:bread|compare|protocol|"
                  r"subjective|subjective_tractable|aide|check_simulator|draft_simulator|"
                  r"laplace|advi|pathfinder|fit_nuts|estimate_aide)\(")
BUILTINS = set(dir(builtins))


def free_names(source: str) -> set[str]:
    """Names the code reads at module level or from a nested scope as globals, that it
    never binds at module level."""
    table = symtable.symtable(source, "<docs>", "exec")
    bound = {s.get_name() for s in table.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    read: set[str] = set()

    def walk(t):
        for s in t.get_symbols():
            if s.is_referenced() and (t.get_type() == "module" or s.is_global()):
                read.add(s.get_name())
        for child in t.get_children():
            walk(child)
    walk(table)
    return read - bound - BUILTINS


def _imported_names(source: str) -> list[str]:
    """``bread_stan`` names a block imports (``from bread_stan.x import y`` gives
    ``bread_stan.x.y``) or reads as ``bread_stan.x.y``."""
    import ast

    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bread_stan"):
            names += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.startswith("bread_stan")]
    return sorted(set(names + DOTTED.findall(source)))


def check_python(pages: list[Page], run: bool = True) -> list[str]:
    """Python blocks that do not compile, read unbound names, import a ``bread_stan``
    name that does not resolve, or (fast ones, when ``run``) raise when run."""
    problems = []
    for page in pages:
        namespace: dict = {"__name__": "__docs__"}
        bound: set[str] = set()
        slow_seen = False
        for snip in snippets(page):
            if snip.kind not in ("python", "py", "python3"):
                continue
            where = f"{page.name}:{snip.line}"
            try:
                code = compile(snip.text, where, "exec")
            except SyntaxError as error:
                problems.append(f"{where}: does not compile: {error.msg} (block line "
                                f"{error.lineno})")
                continue
            unbound = free_names(snip.text) - bound
            if unbound:
                problems.append(f"{where}: reads {', '.join(sorted(unbound))}, which nothing "
                                "before it on the page binds (NameError)")
            problems += [f"{where}: {name} does not resolve"
                         for name in _imported_names(snip.text) if not resolves(name)]
            table = symtable.symtable(snip.text, where, "exec")
            bound |= {s.get_name() for s in table.get_symbols()
                      if s.is_assigned() or s.is_imported() or s.is_namespace()}
            slow_seen = slow_seen or bool(SLOW.search(snip.text))
            if run and not slow_seen and not unbound:
                problems += _run(code, namespace, where)
    return problems


def _run(code, namespace: dict, where: str) -> list[str]:
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)  # noqa: S102 - the documentation's own examples
    except Exception as error:  # noqa: BLE001 - any failure is the page's problem
        return [f"{where}: raises {type(error).__name__}: {error}"]
    finally:
        os.chdir(cwd)
    return []


# ---------------------------------------------------------------------------------------
# The documentation as it is


PAGES = docs_pages()


def test_every_page_is_read():
    names = {p.name for p in PAGES}
    assert "README.md" in names and "docs/getting_started.md" in names
    assert "docs/guides/not_converged.md" in names and len(names) > 25


def test_command_lines_name_only_options_their_subcommand_has():
    problems = check_options(PAGES)
    assert not problems, "\n".join(problems)


def test_bread_stan_names_in_backticks_resolve():
    problems = check_names(PAGES)
    assert not problems, "\n".join(problems)


def test_relative_links_and_their_anchors_resolve():
    problems = check_links(PAGES)
    assert not problems, "\n".join(problems)


def test_repository_paths_exist():
    problems = check_paths(PAGES)
    assert not problems, "\n".join(problems)


def test_python_blocks_compile_bind_their_names_and_the_fast_ones_run():
    problems = check_python(PAGES)
    assert not problems, "\n".join(problems)


def test_some_python_blocks_are_run_and_some_only_compiled():
    # The fast/slow split must leave something on each side, or "the fast ones run"
    # would be checking nothing.
    blocks = [s for p in PAGES for s in snippets(p) if s.kind == "python"]
    slow = [s for s in blocks if SLOW.search(s.text)]
    assert slow and len(slow) < len(blocks)


# ---------------------------------------------------------------------------------------
# Each check fails on a deliberate break (pages held in memory)


def _page(text: str, where: str = "docs/guides/_probe.md") -> Page:
    return Page(ROOT / where, text)


def test_a_bogus_option_or_choice_is_caught_and_a_real_one_is_not():
    good = _page("```bash\nbread-stan run M.stan --data D.json --steps 10,100 \\\n"
                 "    --path gaussian --out here\n```\n\nAlso `--exact-draws K`.\n")
    assert check_options([good]) == []
    bogus = _page("```bash\nbread-stan run M.stan --data D.json --bogus-option 3\n```\n")
    assert check_options([bogus]) == ["docs/guides/_probe.md:2: bread-stan run has no "
                                      "option --bogus-option"]
    # An option another subcommand has is still wrong on this one (check has no --steps).
    wrong = _page("Run `bread-stan check M.stan --steps 10`.\n")
    assert check_options([wrong]) == ["docs/guides/_probe.md:1: bread-stan check has no "
                                      "option --steps"]
    choice = _page("    bread-stan run M.stan\n        [--path auto|prior|sideways]\n")
    assert len(check_options([choice])) == 1 and "'sideways'" in check_options([choice])[0]
    alone = _page("Use `--no-such-thing` here.\n")
    assert "--no-such-thing" in check_options([alone])[0]
    assert "no subcommand 'runn'" in check_options([_page("`bread-stan runn M.stan`")])[0]


def test_a_bogus_python_name_is_caught():
    good = _page("See `bread_stan.ais.verdict.StepVerdict` and `bread_stan.bread`.\n")
    assert check_names([good]) == []
    assert check_names([_page("`ais.results.BreadResult.headline()`, `stan_models/x`")]) == []
    assert check_names([_page("`reporting.no_such.main`")]) == [
        "docs/guides/_probe.md:1: bread_stan.reporting.no_such.main does not resolve"]
    bogus = _page("See\n`bread_stan.ais.no_such_module.thing` here.\n")
    assert check_names([bogus]) == ["docs/guides/_probe.md:2: "
                                    "bread_stan.ais.no_such_module.thing does not resolve"]
    block = _page("```python\nfrom bread_stan.workflows.bread import NoSuchSettings\n```\n")
    assert check_python([block], run=False) == [
        "docs/guides/_probe.md:2: bread_stan.workflows.bread.NoSuchSettings does not resolve"]


def test_a_broken_link_anchor_or_path_is_caught():
    good = _page("[a](../getting_started.md), [b](../getting_started.md#reading-the-output), "
                 "[c](#here), [d](../../notebooks/bread_example.ipynb), `scripts/`, "
                 "`tests/stan/eight_schools.stan:3`\n\n## Here\n")
    assert check_links([good]) == [] and check_paths([good]) == []
    broken = _page("[a](../no_such_page.md) and [b](../getting_started.md#no-such-heading)\n")
    assert [p.split(" -> ")[1] for p in check_links([broken])] == [
        "no such file", "no heading with anchor #no-such-heading"]
    path = _page("Run `scripts/no_such_script.py`, or\n\n"
                 "```bash\npython tests/stan/no_such.stan\n```\n")
    assert sorted(check_paths([path])) == [
        "docs/guides/_probe.md:1: scripts/no_such_script.py does not exist",
        "docs/guides/_probe.md:4: tests/stan/no_such.stan does not exist"]
    # A placeholder is not a path to check.
    assert check_paths([_page("`stan_models/NAME.stan`")]) == []


def test_a_python_block_that_does_not_compile_name_or_run_is_caught():
    syntax = _page("```python\nx = (1,\n```\n")
    assert "does not compile" in check_python([syntax])[0]
    unbound = _page("```python\nimport bread_stan\n```\n\n```python\n"
                    "bread_stan.aide(model, data)   # docs: compile only\n```\n")
    assert check_python([unbound]) == ["docs/guides/_probe.md:6: reads data, model, which "
                                       "nothing before it on the page binds (NameError)"]
    raises = _page("```python\nvalue = 1\n```\n\n```python\nvalue / 0\n```\n")
    assert check_python([raises]) == ["docs/guides/_probe.md:6: raises ZeroDivisionError: "
                                      "division by zero"]
    slow = _page("```python\nimport bread_stan\nbread_stan.bread('m.stan', 's.stan', {})\n```\n"
                 "```python\n1 / 0   # after a slow block: compiled, not run\n```\n")
    assert check_python([slow]) == []
    assert check_python([_page("```python\nprint(sum(range(4)))\n```\n")]) == []
