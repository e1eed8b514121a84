"""Typed exceptions of the Stan access layer.

Each error names what went wrong and carries the evidence (stanc's message,
the compiler command and output, Stan's own message) so that a user can fix
the program, the data or the installation without reading our code.
"""

from __future__ import annotations

import re

__all__ = [
    "BreadStanError",
    "InputError",
    "DraftError",
    "ToolchainError",
    "StanCompileError",
    "StanVersionError",
    "CompilerError",
    "StanDataError",
    "PriorDrawError",
    "ImproperPriorError",
    "StanEvaluationError",
    "PriorOnlyMissingError",
    "ModelSetupError",
]


class BreadStanError(Exception):
    """Base class of the toolkit's own errors: what the user can fix (the program,
    the data, the settings, the installation).  The command line reports these,
    and OS errors, as bad input (exit 2); any other exception is a bug."""


class InputError(BreadStanError, ValueError):
    """A setting, argument or data value the toolkit refuses (also a ValueError,
    so code that catches ValueError keeps working)."""


class ToolchainError(BreadStanError):
    """No usable stanc / Stan headers / libtbb were found."""


class StanCompileError(BreadStanError):
    """stanc rejected the Stan program (syntax or semantic error).

    ``message`` is stanc's text; ``line`` and ``column`` locate the first
    problem when stanc reported a position (else None).
    """

    def __init__(self, message: str, *, program: str = ""):
        self.message = message.strip()
        self.program = program
        found = re.search(r"line (\d+), column (\d+)", self.message)
        self.line = int(found.group(1)) if found else None
        self.column = int(found.group(2)) if found else None
        where = f" at line {self.line}, column {self.column}" if found else ""
        super().__init__(f"stanc could not translate {program or 'the program'}{where}:\n"
                         f"{self.message}")


class StanVersionError(StanCompileError):
    """The program uses a language feature newer than the toolchain's Stan (for
    example ``sum_to_zero_vector`` under Stan 2.35): one line naming the feature, the
    Stan release it needs and how to get one (:mod:`bread_stan.stan.features`)."""

    def __init__(self, message: str, *, program: str = "", line: int | None = None):
        self.message = message
        self.program = program
        self.line = line
        self.column = None
        BreadStanError.__init__(self, message)


class CompilerError(BreadStanError):
    """The C++ compiler or linker failed; carries the command and its output."""

    def __init__(self, command: list[str], output: str):
        self.command = list(command)
        self.output = output
        tail = "\n".join(output.strip().splitlines()[-40:])
        super().__init__("C++ compilation failed.\ncommand: " + " ".join(self.command)
                         + "\noutput (last lines):\n" + tail)


class StanDataError(BreadStanError):
    """The data do not match the program's data block (Stan's message attached)."""


class PriorDrawError(StanDataError):
    """A prior draw breaks the simulation: an ``_rng`` refused an argument the simulator
    drew, a drawn value overflowed, or a failed draw's parameters cannot be drawn.  A
    prior too vague to simulate from; the real-data protocol fixes the parameters whose
    prior draws do this at values fitted on the data."""


class StanEvaluationError(BreadStanError):
    """Stan threw while evaluating the model (for example a ``reject``)."""


class PriorOnlyMissingError(BreadStanError):
    """The model program lacks the ``prior_only`` data variable."""

    def __init__(self, program: str = ""):
        super().__init__(
            f"The model program {program or ''} does not declare `prior_only` in its "
            "data block.\nbread_stan evaluates the program twice, with prior_only = 1 "
            "(log prior) and prior_only = 0 (joint), and takes the log likelihood as "
            "their difference, so the program must wrap its likelihood like this:\n\n"
            "  data { ...; int<lower=0, upper=1> prior_only; }\n"
            "  model { ...priors...;\n"
            "    if (!prior_only) { y ~ normal(mu, sigma); } }\n\n"
            "Do not put prior_only in the data file: bread_stan supplies it.")


class ModelSetupError(BreadStanError):
    """The model program runs but cannot be what its author meant (for example a
    likelihood outside ``if (!prior_only)`` or a parameter without a prior)."""


class DraftError(BreadStanError, ValueError):
    """The simulator drafter cannot translate a model program (the message names the
    statement and why)."""


class ImproperPriorError(DraftError):
    """The drafter's refusal of parameters with no proper prior (flat), naming all of
    them in ``parameters``: nothing can be simulated from their prior, but they can be
    given (fixed at fitted values, the real-data protocol's route)."""

    def __init__(self, message: str, parameters):
        super().__init__(message)
        self.parameters = list(parameters)
