"""One owner of random-stream purposes: every stream and derived-seed purpose is named
in ``bread_stan.rng``, and no two share a number.

Exact tests (no sampling): they read the enums and the package's source.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from bread_stan.rng import ChainRandom, Purpose, Stream, derived_seed

PACKAGE = Path(__file__).resolve().parent.parent / "bread_stan"


def _duplicates(pairs):
    seen: dict = {}
    for name, value in pairs:
        seen.setdefault(value, []).append(name)
    return {v: names for v, names in seen.items() if len(names) > 1}


def test_no_two_streams_share_a_number():
    # __members__ keeps aliases: an Enum silently turns a repeated value into an alias.
    assert not _duplicates((n, int(m)) for n, m in Stream.__members__.items())


def test_no_two_purposes_share_a_scope_and_number():
    assert not _duplicates((n, m.value) for n, m in Purpose.__members__.items())


def test_streams_sit_apart_from_the_scored_runs_streams():
    """Step count i of a scored run uses streams 2i and 2i + 1: every other stream is
    above any plausible number of step counts."""
    named = sorted(int(s) for s in Stream if s not in (Stream.FORWARD, Stream.REVERSE))
    assert named[0] >= 1_000_000 and min(np.diff(named)) >= 1_000_000


def test_the_fit_and_the_simulator_check_draw_different_numbers():
    """They shared stream 2,000,000 before: with equal seeds they drew equal normals."""
    fit = ChainRandom.from_seed(3, 2, stream=Stream.FIT).normal(4)
    check = ChainRandom.from_seed(3, 2, stream=Stream.SIMULATOR_CHECK).normal(4)
    assert not np.array_equal(fit, check)


def test_a_purpose_seeds_as_its_number():
    assert derived_seed(7, Purpose.CHAINS, 30) == derived_seed(7, 3, 30)
    assert derived_seed(7, Purpose.SUBJECTIVE_FIT) == derived_seed(7, 10)


def _literal_int(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int)


def test_no_module_seeds_or_streams_by_a_bare_number():
    """Outside rng.py, derived_seed's purpose and a ``stream=`` are never integer
    literals: they name a Purpose or a Stream."""
    bare = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "rng.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name == "derived_seed" and len(node.args) > 1 and _literal_int(node.args[1]):
                bare.append(f"{path.name}:{node.lineno}")
            if any(k.arg == "stream" and _literal_int(k.value) for k in node.keywords):
                bare.append(f"{path.name}:{node.lineno}")
    assert not bare, bare
