"""What a user runs: BREAD on simulated data (``bread``, ``compare``), the real-data
protocol with its NUTS fit and its agreement and S-sweep statistics, the subjective
divergence and AIDE.

Every workflow follows one skeleton whose steps are the shared layer: program and name,
output directory, header and fingerprints, resume (:mod:`.common`); the simulated problem
and prior draws (:mod:`.problem`); load or tune (:func:`.common.load_or_tune`); checks;
the AIS runs of each step count; the result.  ``docs/guides/architecture.md`` lists the
steps and where a new algorithm or an automatic prior/likelihood split plugs in.
"""
