"""Which Stan release a program's language features need, and the one-line refusal
when the toolchain's Stan is older.

The toolkit compiles with the Stan of the httpstan wheel: Stan 2.39 (httpstan 4.17)
on Python 3.12 and later, Stan 2.35 (httpstan 4.13) on Python 3.11, which has no
newer wheel.  stanc 2.35 answers a program that declares a ``sum_to_zero_vector``
with "Syntax error ... parsing error", which does not say what to do;
:func:`newer_stan_refusal` names the feature, the Stan release it needs and the
way to get one, in one line.  It reads the program's text only (comments and
strings aside), so it runs no subprocess.
"""

from __future__ import annotations

import re
import subprocess
import sys

from ..errors import StanVersionError
from .toolchain import Toolchain

__all__ = ["NEWER_FEATURES", "needed_features", "newer_stan_refusal", "stan_version_line"]

# feature -> (the first Stan release with it, a pattern finding it in the program)
NEWER_FEATURES: dict[str, tuple[tuple[int, int], str]] = {
    "sum_to_zero_vector": ((2, 36), r"\bsum_to_zero_vector\b"),
    "column_stochastic_matrix": ((2, 36), r"\bcolumn_stochastic_matrix\b"),
    "row_stochastic_matrix": ((2, 36), r"\brow_stochastic_matrix\b"),
    "jacobian +=": ((2, 36), r"\bjacobian\s*\+="),
    "sum_to_zero_matrix": ((2, 37), r"\bsum_to_zero_matrix\b"),
}
_COMMENT_OR_STRING = re.compile(r'//[^\n]*|#[^\n]*|/\*.*?\*/|"[^"\n]*"', re.DOTALL)


def _code_only(source: str) -> str:
    """The source with comments and strings blanked (line breaks kept)."""
    return _COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def _version(text: str) -> tuple[int, int]:
    parts = [int(p) for p in re.findall(r"\d+", text)[:2]]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def needed_features(source: str) -> list[tuple[str, int, tuple[int, int]]]:
    """(feature, line of its first use, Stan release needed) for every feature of
    :data:`NEWER_FEATURES` the program uses, in order of appearance."""
    code = _code_only(source)
    found = []
    for feature, (release, pattern) in NEWER_FEATURES.items():
        match = re.search(pattern, code)
        if match:
            found.append((match.start(), feature, code.count("\n", 0, match.start()) + 1,
                          release))
    return [(feature, line, release) for _, feature, line, release in sorted(found)]


def _remedy(toolchain: Toolchain, release: tuple[int, int]) -> str:
    have = "Stan {}.{}".format(*_version(toolchain.stan_version))
    if toolchain.source == "cmdstan":
        return (f"this toolkit uses {have} from the CmdStan at {toolchain.source_version}; "
                f"use CmdStan {release[0]}.{release[1]} or later, or the httpstan toolchain "
                "on Python 3.12+")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if sys.version_info < (3, 12):
        return f"this toolkit has {have} on Python {python}; use Python 3.12+"
    return (f"this toolkit has {have} from httpstan {toolchain.source_version}; install "
            "the httpstan version bread-stan pins for Python 3.12+")


def newer_stan_refusal(source: str, toolchain: Toolchain,
                       program: str = "") -> StanVersionError | None:
    """The one-line error for a program that uses a feature newer than the toolchain's
    Stan (None when it uses none: stanc's own message then stands)."""
    have = _version(toolchain.stan_version)
    for feature, line, release in needed_features(source):
        if release > have:
            where = f"{program}, line {line}" if program else f"line {line}"
            return StanVersionError(
                f"{where}: {feature} needs Stan {release[0]}.{release[1]} or later "
                f"({_remedy(toolchain, release)})", program=program, line=line)
    return None


def stan_version_line(toolchain: Toolchain) -> str:
    """What ``bread-stan info`` says of Stan: the headers' version, stanc's own, and
    which of the newer features this Stan lacks."""
    try:
        stanc = subprocess.run([str(toolchain.stanc), "--version"], capture_output=True,
                               text=True, timeout=60).stdout.strip() or "stanc: no version"
    except (OSError, subprocess.SubprocessError) as error:
        stanc = f"stanc --version failed: {error}"
    have = _version(toolchain.stan_version)
    missing = [f for f, (release, _) in NEWER_FEATURES.items() if release > have]
    line = f"Stan {toolchain.stan_version} ({stanc})"
    if missing:
        line += f"; without {', '.join(missing)} ({_remedy(toolchain, (2, 37))})"
    return line
