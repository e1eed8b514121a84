"""Write the simulator program of a :class:`~.translate.Draft` (conventions of
``stan_models/README.md``: the model's data minus what is simulated, ``hyper_given`` and
``h_given`` arrays, every parameter and simulated data variable under its own name)."""

from __future__ import annotations

from dataclasses import replace

from .replay import OBSERVED_SUFFIX
from .translate import Draft

__all__ = ["emit", "emit_parameter_part"]


def _block(name: str, lines: list[str]) -> list[str]:
    return [f"{name} {{", *lines, "}"]


def emit_parameter_part(draft: Draft, model_name: str) -> str | None:
    """The simulator's parameter part: the same program with the data draws left out and
    only the parameters (and the normaliser's outputs) generated, whose draw ``i`` gives
    the parameters of the simulator's draw ``i`` (the same RNG calls, in the same order,
    up to the first data draw); None when a data draw precedes a prior draw."""
    if draft.parameter_statements is None:
        return None
    simulated = set(draft.simulated)
    return emit(replace(draft, outputs=[d for d in draft.outputs if d.name not in simulated],
                        statements=draft.parameter_statements, simulated=[]),
                model_name + " (its parameter part)")


def emit(draft: Draft, model_name: str) -> str:
    """The simulator program's text."""
    hyper = ", ".join(h.name for h in draft.hyper) or "none"
    data = (f"then the\n// simulated data {', '.join(draft.simulated)}" if draft.simulated
            else "and no\n// data")
    out = [f"// Simulator for {model_name}, drafted by `bread-stan draft-simulator`:",
           f"// every parameter from its prior (hyperparameters unless given), {data}. "
           f"Hyperparameters: {hyper}."]
    out += [f"// Declared without its data-block bounds: {why}" for why in draft.relaxed.values()]
    out += [draft.normaliser_note] if draft.normaliser_note else []
    if draft.functions is not None:
        out += ["functions {" + draft.functions + "}"]
    data = [f"  {d.type_text()} {d.name};" for d in draft.data]
    data += [f"  {d.type_text()} {d.name}{OBSERVED_SUFFIX};" for d in draft.observed]
    data.append("  int<lower=0, upper=1> hyper_given;")
    for h in draft.hyper:
        dims = ", ".join(["hyper_given", *(d.text for d in h.dims)])
        data.append(f"  array[{dims}] {h.type_text(array=False)} {h.name}_given;")
    out += _block("data", data)
    if draft.transformed_data is not None:
        out += ["transformed data {" + draft.transformed_data + "}"]
    gq = [f"  {d.type_text(bounds=d.name not in draft.relaxed)} {d.name};"
          for d in draft.outputs] + draft.normaliser
    out += _block("generated quantities", gq + draft.statements)
    return "\n".join(out) + "\n"
