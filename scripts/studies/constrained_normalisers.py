"""Whether Stan's densities of constrained types integrate to 1 in Stan's coordinates
(stanc 2.35), and the volume of a simplex and of the 3 x 3 correlation matrices without a
density: importance-sampling estimates of log c (bread_stan.ais.prior_normaliser, 50,000
draws) beside the value the drafter claims (bread_stan.stan.draft.normaliser).

    PYTHONPATH=$PWD nice python scripts/studies/constrained_normalisers.py

Output: scripts/figures/constrained_normalisers/results.md.
"""
from pathlib import Path
import numpy as np
from bread_stan.stan.compile import Program, compile_many
from bread_stan.stan.model import StanModel
from bread_stan.stan.simulator import Simulator
from bread_stan.ais.prior_normaliser import estimate_log_normaliser

cases = {
 "simplex3": ("simplex[3] x;", "", "simplex[3] x = dirichlet_rng(rep_vector(1, 3));", -np.log(2)),
 "simplex4": ("simplex[4] x;", "", "simplex[4] x = dirichlet_rng(rep_vector(1, 4));", -np.log(6)),
 "dir": ("simplex[3] x;", "x ~ dirichlet([2, 3, 1.5]');", "simplex[3] x = dirichlet_rng([2, 3, 1.5]');", 0.0),
 "lkjchol": ("cholesky_factor_corr[3] L;", "L ~ lkj_corr_cholesky(2);", "cholesky_factor_corr[3] L = lkj_corr_cholesky_rng(3, 2);", 0.0),
 "lkj": ("corr_matrix[3] S;", "S ~ lkj_corr(2);", "corr_matrix[3] S = lkj_corr_rng(3, 2);", 0.0),
 "wish": ("cov_matrix[2] S;", "S ~ wishart(4, [[1, 0.3], [0.3, 2]]);", "cov_matrix[2] S = wishart_rng(4, [[1, 0.3], [0.3, 2]]);", 0.0),
 "iwish": ("cov_matrix[2] S;", "S ~ inv_wishart(5, [[1, 0.3], [0.3, 2]]);", "cov_matrix[2] S = inv_wishart_rng(5, [[1, 0.3], [0.3, 2]]);", 0.0),
 "wchol": ("cholesky_factor_cov[2] L;", "L ~ wishart_cholesky(4, [[1, 0], [0.3, 2]]);", "cholesky_factor_cov[2] L = wishart_cholesky_rng(4, [[1, 0], [0.3, 2]]);", 0.0),
 "iwchol": ("cholesky_factor_cov[2] L;", "L ~ inv_wishart_cholesky(5, [[1, 0], [0.3, 2]]);", "cholesky_factor_cov[2] L = inv_wishart_cholesky_rng(5, [[1, 0], [0.3, 2]]);", 0.0),
 "corrflat": ("corr_matrix[3] S;", "", "corr_matrix[3] S = lkj_corr_rng(3, 1);", np.log(np.pi**2/2)),
}
progs = []
for k, (p, m, g, _) in cases.items():
    progs.append(Program(f"parameters {{ {p} }} model {{ {m} }}", f"vc_{k}"))
    progs.append(Program(f"generated quantities {{ {g} }}", f"vc_{k}_sim"))
compiled = compile_many(progs, workers=2)
rows = ["# log c of constrained types in Stan's coordinates", "",
        "Command: `PYTHONPATH=$PWD nice python scripts/studies/constrained_normalisers.py`.", "",
        "| case | program | IS log c | se | Pareto k | claimed |", "|---|---|---|---|---|---|"]
for i, (k, (_, _, _, truth)) in enumerate(cases.items()):
    model = StanModel(compiled[2 * i])
    sim = Simulator(compiled[2 * i + 1])
    draws = sim.simulate(4000, 1)
    u = model.param_unconstrain_batch(draws)
    est = estimate_log_normaliser(lambda x: model.log_density_batch(np.ascontiguousarray(x), jacobian=True), u,
                                  np.random.default_rng(2), 50000)
    text = " ".join(x for x in cases[k][:2] if x)
    rows.append(f"| {k} | `{text}` | {est.log_c:.4f} | {est.se:.4f} | {est.pareto_k:.2f} | "
                f"{truth:.4f} |")
out = Path(__file__).resolve().parents[1] / "figures" / "constrained_normalisers" / "results.md"
out.write_text("\n".join(rows + ["", "corrflat's claimed value, log(pi^2 / 2), is the volume "
                                  "of the 3 x 3 correlation matrices; the drafter does not "
                                  "use it (no general K)."]) + "\n")
print(out.read_text())
