"""A guard for resume tests: a finished protocol run, read back, fits and anneals nothing."""

from __future__ import annotations

from bread_stan.ais import engine
from bread_stan.workflows import protocol_stages


def forbid_recomputing(monkeypatch) -> None:
    """Make the real-data fit and every AIS run raise, until ``monkeypatch`` is undone."""
    def recomputed(*args, **kwargs):
        raise AssertionError("a finished run was recomputed")
    monkeypatch.setattr(protocol_stages, "fit", recomputed)
    monkeypatch.setattr(engine, "anneal", recomputed)
