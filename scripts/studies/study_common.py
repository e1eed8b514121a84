"""What the study scripts share: the study's models and data sets, option parsers, and
how a study writes its summary (``summary.csv``, ``summary.md``, a figure)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "stan_models"
STUDY_CASES = {  # case -> (model program stem, data set name), SPEC section 5
    "linear_regression": ("linear_regression", "nhefs"),
    "logistic_regression": ("logistic_regression", "pima"),
    "ar1": ("ar1", "goog"),
    "gaussian_mixture": ("gaussian_mixture", "faithful"),
    "mf_centred": ("matrix_factorisation", "movielens"),
    "mf_uncentred": ("matrix_factorisation", "movielens_uncentred"),
}


def cases(*names: str) -> dict[str, tuple[str, str]]:
    """The study cases ``names``, in that order."""
    return {name: STUDY_CASES[name] for name in names}


def ints(text: str) -> tuple[int, ...]:
    """A comma-separated list of whole numbers (an option's value)."""
    return tuple(int(s) for s in text.split(",") if s.strip())


def names(text: str) -> list[str]:
    """A comma-separated list of names (an option's value)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def write_summary(summary: pd.DataFrame, out: Path, heading: str,
                  figure: Callable[[pd.DataFrame, Path], None], figure_name: str) -> None:
    """``summary.csv``, ``summary.md`` (``heading`` then the table) and the figure in ``out``."""
    from bread_stan.reporting.report import markdown_table

    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(heading + markdown_table(summary) + "\n")
    figure(summary, out / figure_name)
    print(markdown_table(summary))
