"""What the real-data protocol produced, and how it is saved and loaded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..ais.result_files import direction_arrays, direction_fields, direction_meta
from ..ais.results import BreadResult, DirectionResult
from ..store import (CorruptFileError, jsonable, load_json, load_unit, save_json, save_unit,
                     set_aside, write_atomic)
from .agreement import Agreement, agreement_score, shifted_quartiles
from .data_check import DataCheck
from .fit import FitResult
from .sweep import SweepTest, s_sweep_test

__all__ = ["ProtocolResult", "HEADER", "replicate_path", "save_direction", "write_header"]

HEADER = "protocol.json"


@dataclass
class ProtocolResult:
    """Everything the protocol produced; see the module docstring.

    ``sim`` is the BREAD result on the simulated data (forward, and reverse
    from the largest S); ``real_forward`` maps T to forward AIS on the real
    data; ``reverse_sweep`` maps (S, T) to reverse AIS from S start transitions;
    ``replicate_forward`` maps k = 1, 2, ... to {T: forward AIS} on the k-th
    replicate simulated data set (the agreement score's reference band).
    """

    model: str
    settings: dict[str, Any]
    fit: FitResult | None
    hyper: dict[str, float]
    sim: BreadResult
    real_forward: dict[int, DirectionResult] = field(default_factory=dict)
    reverse_sweep: dict[tuple[int, int], DirectionResult] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    replicate_forward: dict[int, dict[int, DirectionResult]] = field(default_factory=dict)

    @property
    def steps(self) -> list[int]:
        done = {s.n_steps for s in self.sim.steps} & set(self.real_forward)
        return sorted(done)

    @property
    def s_sweep(self) -> list[int]:
        return sorted({S for S, _ in self.reverse_sweep})

    def _curves(self) -> tuple[dict, dict]:
        steps = self.steps
        sim_fwd = {T: self.sim.step(T).forward.log_estimates for T in steps}
        real = {T: self.real_forward[T].log_estimates for T in steps}
        sim_rev = {T: self.sim.step(T).reverse.log_estimates for T in steps}
        curves = {"real forward": real, "simulated forward": sim_fwd,
                  "simulated reverse": sim_rev}
        for S in self.s_sweep:
            curves[f"simulated reverse S={S}"] = {
                T: self.reverse_sweep[(S, T)].log_estimates for T in steps
                if (S, T) in self.reverse_sweep}
        shift_real = max(np.median(v) for v in real.values())
        shift_sim = max(np.median(v) for v in sim_fwd.values())
        shifts = {name: (shift_real if name.startswith("real") else shift_sim)
                  for name in curves}
        for k, by_steps in sorted(self.replicate_forward.items()):
            rep = {T: by_steps[T].log_estimates for T in steps if T in by_steps}
            if rep:
                curves[f"replicate {k} forward"] = rep
                shifts[f"replicate {k} forward"] = max(np.median(v) for v in rep.values())
        return curves, shifts

    def curves(self) -> pd.DataFrame:
        """(a) Shifted quartile curves: one row per curve and number of distributions.

        Real forward is shifted by its largest median forward estimate,
        simulated forward and every simulated reverse curve by the simulated
        data's largest median forward estimate, each replicate's forward curve
        by its own.
        """
        if len(self.steps) == 0:
            return pd.DataFrame(columns=["curve", "steps", "q25", "median", "q75", "shift",
                                         "chains"])
        return shifted_quartiles(*self._curves())

    @property
    def has_agreement(self) -> bool:
        """Whether the agreement score can be computed (>= 2 common T, >= 1 replicate)."""
        return len(self._agreement_steps()) >= 2 and bool(self.replicate_forward)

    def _agreement_steps(self) -> list[int]:
        steps = set(self.steps)
        for by_steps in self.replicate_forward.values():
            steps &= set(by_steps)
        return sorted(steps)

    def agreement(self) -> Agreement:
        """(a) The agreement score and flag of the real forward curve against the
        band of the simulated data sets' curves (D_sim and the replicates), on
        the numbers of distributions that all of them ran."""
        s = self.settings.get("protocol", {})
        steps = self._agreement_steps()
        sims = [{T: self.sim.step(T).forward.log_estimates for T in steps}]
        sims += [{T: by_steps[T].log_estimates for T in steps}
                 for _, by_steps in sorted(self.replicate_forward.items())]
        real = {T: self.real_forward[T].log_estimates for T in steps}
        return agreement_score(real, sims, threshold=s.get("agreement_threshold", 0.1),
                               alpha=s.get("agreement_alpha", 0.05),
                               floor=s.get("agreement_floor", 1.0))

    def sweep_test(self) -> SweepTest:
        """(b) Whether the reverse curves move with the number of start transitions."""
        s = self.settings.get("protocol", {})
        steps = set(self.steps)
        gaps = {st.n_steps: float(np.median(st.reverse.log_estimates)
                                  - np.median(st.forward.log_estimates))
                for st in self.sim.steps}
        reverse = {k: v.log_estimates for k, v in self.reverse_sweep.items() if k[1] in steps}
        return s_sweep_test(reverse, gaps, alpha=s.get("sweep_alpha", 0.01),
                            tolerance=s.get("sweep_tolerance", 0.1),
                            floor=s.get("sweep_floor", 0.5))

    def bound_table(self) -> pd.DataFrame:
        """(c) The Jeffreys bound on the simulated data against steps and seconds."""
        return self.sim.summary()

    def data_check(self) -> DataCheck | None:
        """Whether data simulated at the fitted hyperparameters look like the real data
        (None for results saved before the check existed)."""
        saved = self.extra.get("data_check")
        return DataCheck.from_dict(saved) if saved else None

    @property
    def unjudged(self) -> list[int]:
        """The step counts a budget left out when fewer than two finished (the agreement
        score and the S-sweep test need two): then the protocol is not ``ok``."""
        left = list((self.extra.get("budget") or {}).get("not_started") or [])
        return left if left and len(self.steps) < 2 else []

    @property
    def ok(self) -> bool:
        """Consistent simulated run, simulated data like the real data, agreeing curves
        and a passed S-sweep test (never where a budget left too few step counts for the
        last two: :attr:`unjudged`)."""
        if self.unjudged:
            return False
        checked = self.data_check()
        if checked is not None and not checked.passed:
            return False
        if len(self.steps) < 2:
            return self.sim.consistent
        return (self.sim.consistent
                and not (self.has_agreement and self.agreement().flagged)
                and (len(self.s_sweep) < 2 or self.sweep_test().passed))

    def problems(self) -> list[str]:
        out = list(self.sim.problems())
        if self.unjudged:
            out.append(f"the budget left out step count(s) "
                       f"{', '.join(map(str, self.unjudged))}"
                       ": with fewer than two finished, the agreement score and the S-sweep "
                       "test did not run, so the protocol is not judged (a larger --budget "
                       "and the same --out add them)")
        checked = self.data_check()
        if checked is not None and not checked.passed:
            out.append(checked.message)
        if len(self.steps) >= 2:
            if self.has_agreement and (a := self.agreement()).flagged:
                out.append(a.message)
            if len(self.s_sweep) >= 2 and not (t := self.sweep_test()).passed:
                out.append(t.message)
        return out

    def summary(self) -> pd.DataFrame:
        """One row per T: the bound on D_sim (and the robust median gap), shifted
        medians of the curves, cost of every part."""
        table = self.bound_table()
        if table.empty:
            return table
        curves = self.curves()
        for name, col in (("real forward", "real_forward_shifted"),
                          ("simulated forward", "sim_forward_shifted"),
                          ("simulated reverse", "sim_reverse_shifted")):
            med = curves[curves["curve"] == name].set_index("steps")["median"]
            table[col] = table["steps"].map(med)
        table["median_gap"] = table["steps"].map(
            {st.n_steps: float(np.median(st.reverse.log_estimates)
                               - np.median(st.forward.log_estimates)) for st in self.sim.steps})
        table["real_seconds"] = table["steps"].map(
            {T: d.wall_time for T, d in self.real_forward.items()})
        table["mean_real_lower"] = table["steps"].map(
            {T: float(np.mean(d.log_estimates)) for T, d in self.real_forward.items()})
        return table

    def to_dataframe(self) -> pd.DataFrame:
        """Tidy per-chain data: data set, direction, S, steps, chain, log_estimate."""
        frames = []

        def add(dataset, direction, S, T, d):
            frames.append(pd.DataFrame({
                "dataset": dataset, "direction": direction, "S": S, "steps": T,
                "chain": np.arange(d.log_estimates.size), "log_estimate": d.log_estimates}))

        for s in self.sim.steps:
            add("simulated", "forward", -1, s.n_steps, s.forward)
        for T, d in sorted(self.real_forward.items()):
            add("real", "forward", -1, T, d)
        for (S, T), d in sorted(self.reverse_sweep.items()):
            add("simulated", "reverse", S, T, d)
        for k, by_steps in sorted(self.replicate_forward.items()):
            for T, d in sorted(by_steps.items()):
                add(f"replicate {k}", "forward", -1, T, d)
        if not frames:
            return pd.DataFrame(columns=["dataset", "direction", "S", "steps", "chain",
                                         "log_estimate"])
        return pd.concat(frames, ignore_index=True)

    def summary_json(self) -> dict[str, Any]:
        predicted = self.sim.prediction()   # on the simulated data, where not converged
        out = {"model": self.model, "settings": self.settings, "hyper": self.hyper,
               "ok": self.ok, "problems": self.problems(), "extra": jsonable(self.extra),
               "predicted": None if predicted is None else predicted.as_dict(),
               "summary": json.loads(self.summary().to_json(orient="records")),
               "curves": json.loads(self.curves().to_json(orient="records"))}
        if self.fit is not None:
            out["fit"] = {"sampler": self.fit.sampler, "seconds": self.fit.seconds,
                          "max_rhat": self.fit.max_rhat, "min_ess_bulk": self.fit.min_ess_bulk,
                          "diagnostics": self.fit.diagnostics}
        if len(self.steps) >= 2:
            if self.has_agreement:
                out["agreement"] = self.agreement().to_dict()
            if len(self.s_sweep) >= 2:
                out["sweep_test"] = self.sweep_test().to_dict()
        return out

    # -- persistence -----------------------------------------------------
    def save(self, out_dir: Path) -> None:
        """Write everything (header, fit, all runs, summary.json/csv) into ``out_dir``."""
        out_dir = Path(out_dir)
        write_header(out_dir, self)
        if self.fit is not None:
            self.fit.save(out_dir / "fit")
        self.sim.save(out_dir / "sim")
        for T, d in self.real_forward.items():
            save_direction(out_dir / "real" / f"forward_{T}.npz", d)
        for (S, T), d in self.reverse_sweep.items():
            save_direction(out_dir / "sweep" / f"reverse_S{S}_T{T}.npz", d)
        for k, by_steps in self.replicate_forward.items():
            for T, d in by_steps.items():
                save_direction(replicate_path(out_dir, k, T), d)
        save_json(out_dir / "summary.json", self.summary_json())
        write_atomic(out_dir / "summary.csv", self.summary().to_csv(index=False))

    @classmethod
    def load(cls, out_dir: Path) -> "ProtocolResult":
        """Read a result saved by :meth:`save` (or the finished parts of a run).

        A corrupt header raises CorruptFileError; any other corrupt part is set
        aside with a warning (a rerun recomputes it).
        """
        out_dir = Path(out_dir)
        path = out_dir / HEADER
        if not path.exists():
            raise FileNotFoundError(f"{out_dir} holds no protocol results (no {HEADER})")
        header = load_json(path)
        fit_res = None
        if FitResult.exists(out_dir / "fit"):
            try:
                fit_res = FitResult.load(out_dir / "fit")
            except CorruptFileError as error:
                set_aside(error)
        sim = (BreadResult.load(out_dir / "sim") if (out_dir / "sim" / "run.json").exists()
               else BreadResult(header["model"], header["settings"]))
        real = {int(p.stem.split("_")[1]): d
                for p, d in _load_directions(out_dir / "real", "forward_*.npz")}
        sweep = {}
        for p, d in _load_directions(out_dir / "sweep", "reverse_S*_T*.npz"):
            s_part, t_part = p.stem[len("reverse_"):].split("_")
            sweep[(int(s_part[1:]), int(t_part[1:]))] = d
        replicates: dict[int, dict[int, DirectionResult]] = {}
        for p, d in _load_directions(out_dir / "replicates", "r*/forward_*.npz"):
            k, T = int(p.parent.name[1:]), int(p.stem.split("_")[1])
            replicates.setdefault(k, {})[T] = d
        return cls(header["model"], header["settings"], fit_res, header.get("hyper", {}),
                   sim, real, sweep, header.get("extra", {}), replicates)

    def __repr__(self) -> str:
        return (f"ProtocolResult(model={self.model!r}, steps={self.steps}, "
                f"s_sweep={self.s_sweep}, hyper={self.hyper})")


def write_header(out_dir: Path, result: ProtocolResult) -> None:
    save_json(out_dir / HEADER, {"model": result.model, "settings": result.settings,
                                  "hyper": result.hyper, "extra": result.extra})


def replicate_path(out_dir: Path, k: int, T: int) -> Path:
    return out_dir / "replicates" / f"r{k}" / f"forward_{T}.npz"


def save_direction(path: Path, d: DirectionResult) -> None:
    """One direction's run as one ``.npz`` unit at ``path``."""
    save_unit(path, direction_arrays(d, "x"), direction_meta(d))


def _load_directions(directory: Path, pattern: str) -> list[tuple[Path, DirectionResult]]:
    """Every readable direction unit under ``directory`` matching ``pattern``;
    corrupt ones are set aside with a warning."""
    found = []
    for path in sorted(directory.glob(pattern)):
        try:
            arrays, meta = load_unit(path)
            found.append((path, DirectionResult(**direction_fields(arrays, meta, "x"))))
        except CorruptFileError as error:
            set_aside(error)
        except (KeyError, TypeError) as error:
            set_aside(CorruptFileError(path, f"missing entry {error}"))
    return found


# --------------------------------------------------------------------------- #
