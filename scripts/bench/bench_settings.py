"""Jeffreys bound at fixed T over several seeds, for several sampler settings side by side.

The evidence behind the default metric and pilot size (issue 15): each setting is
a name and ``SamplerSettings`` fields, e.g. ``auto20:metric=auto,pilot_steps=20``
(an empty field list is today's defaults).  For each T and setting the script runs
:func:`bread_stan.bread` once per seed (``--chains`` per direction, 1 thread, no
simulator check) and prints one line: the bound averaged over seeds, the bound of
each seed (each seed is a different simulated problem), and the mean tuning, AIS,
wall and CPU seconds and gradients of the two AIS directions.

Models: ``nhefs`` (linear regression on the bundled NHEFS data), ``pima``
(logistic regression on the bundled Pima data) and ``vague`` (the vague-prior,
uncentred-predictor regression of ``scripts/bench/bench_schedules.py``).

Results of the runs behind the defaults: ``scripts/figures/bench_settings/results.md``.

Usage: ``PYTHONPATH=$PWD python scripts/bench/bench_settings.py pima 190,270
"diag40:metric=diag,pilot_steps=40" "auto20:" [--seeds 0,1,2] [--chains 100]``.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from bench_defaults import one_run
from bench_schedules import vague_data
from bread_stan.stan import datasets
from bread_stan.workflows.bread import RunSettings, SamplerSettings

MODELS = {"nhefs": ("linear_regression", lambda: datasets.load("nhefs")),
          "pima": ("logistic_regression", lambda: datasets.load("pima")),
          "vague": ("vague_regression", vague_data)}


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def setting(text: str) -> tuple[str, SamplerSettings]:
    """``name:field=value,...`` -> (name, SamplerSettings)."""
    name, _, fields = text.partition(":")
    pairs = (p.split("=", 1) for p in fields.split(",") if p)
    return name, SamplerSettings(**{k: _value(v) for k, v in pairs})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("steps", help="comma-separated numbers of distributions T")
    parser.add_argument("settings", nargs="+", help="name:field=value,... (SamplerSettings)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--chains", type=int, default=100)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    data = MODELS[args.model][1]()
    seeds = [int(s) for s in args.seeds.split(",")]
    settings = [setting(s) for s in args.settings]
    for T in (int(t) for t in args.steps.split(",")):
        for name, sampler in settings:
            runs = [one_run(MODELS[args.model][0], data, sampler, RunSettings().schedule, T,
                            args.chains, seed) for seed in seeds]
            mean = {key: np.mean([r[key] for r in runs]) for key in runs[0]}
            per_seed = ", ".join(f"{r['bound']:.3g}" for r in runs)
            print(f"{args.model} T={T} {name}: bound {mean['bound']:.3f} ({per_seed}), "
                  f"tuning {mean['tuning']:.2f} s, AIS {mean['ais']:.2f} s, "
                  f"wall {mean['wall']:.2f} s, CPU {mean['cpu']:.2f} s, "
                  f"gradients {mean['grads'] / 1e3:.0f}k", flush=True)


if __name__ == "__main__":
    main()
