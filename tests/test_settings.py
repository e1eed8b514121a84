"""One set of defaults: the engine's and the tuning's own settings default to what the
workflows' settings give them, so calling tune() or runs.run() directly runs as
bread() does; one name per field from SamplerSettings down to TuningConfig; and the
resume fingerprint of a run saved before the fields were renamed is unchanged.  Exact:
compares dataclass fields and fingerprints, runs nothing."""

from __future__ import annotations

import dataclasses

import pytest

from bread_stan.ais.engine import RunConfig
from bread_stan.ais.frozen_kernels import PARAMS_BY_KIND
from bread_stan.ais.imh_tuning import IMHTuningConfig
from bread_stan.ais.smc import SMCConfig
from bread_stan.ais.tuning import TuningConfig
from bread_stan.kernels.registry import KERNELS, kernel_entry
from bread_stan.workflows import bread, protocol
from bread_stan.workflows.common import fingerprints
from bread_stan.workflows.protocol import ProtocolSettings
from bread_stan.workflows.settings import SMC_PARTICLES, RunSettings, SamplerSettings

# TuningConfig's fields that SamplerSettings does not set (the engine's alone).
ENGINE_ONLY = {"burn_in", "stream", "dense_correlation", "floor_min"}


def test_the_default_sampler_tunes_with_tunings_defaults():
    assert SamplerSettings().tuning_config() == TuningConfig()


def _names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_pilot_settings_keep_their_names_from_sampler_settings_to_tuning_config():
    """Every field of TuningConfig that a user sets has the name it has in
    SamplerSettings, and tuning_config() copies each from the field of that name
    (non-default values, so a crossed pair would show); the defaults shared by the
    two are TuningConfig's ("auto" ridge aside: the path resolves it)."""
    assert _names(TuningConfig) - ENGINE_ONLY <= _names(SamplerSettings)
    sampler = SamplerSettings(kernel="hmc", pilot_grid=7, pilot_steps=9, pilot_floor=0.01,
                              metric_ridge="relative", metric="diag", adapt_metric=False,
                              target_accept=0.7)
    config = sampler.tuning_config()
    for name in _names(TuningConfig) - ENGINE_ONLY:
        assert getattr(config, name) == getattr(sampler, name), name
    for name in _names(TuningConfig) - ENGINE_ONLY - {"metric_ridge"}:
        assert getattr(SamplerSettings(), name) == getattr(TuningConfig(), name), name
    assert "metric_ridge" in _names(IMHTuningConfig) and "ridge" not in _names(IMHTuningConfig)


def test_the_smc_particle_default_is_defined_once():
    assert SMC_PARTICLES == SMCConfig().particles
    assert RunSettings(algorithm="smc").particles == SMCConfig().particles
    assert RunSettings(algorithm="smc").particles_per_run == SMCConfig().particles


# Fingerprints of run.json headers computed by the code before the pilot's settings
# were renamed (bread._header and protocol._header at commit 2563dc7, with the arguments
# of the test below): a run directory that code wrote must resume, so these values may
# never change.
_CASES = {
    "default": (SamplerSettings(), RunSettings()),
    "hmc_floor_relative": (
        SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                        pilot_steps=12, pilot_floor=1e-3, metric_ridge="relative",
                        metric="diag", target_accept=0.7),
        RunSettings(steps=(10, 40), chains=20, seed=3, path="prior")),
    "imh_smc": (SamplerSettings(kernel="imh", pilot_chains=64),
                RunSettings(algorithm="smc", path="prior")),
}
_OLD = {"default": ("ae9f9feeda40d729", "6a33fc8f8eb8c693", "19f95e22d9b13e5c"),
        "hmc_floor_relative": ("fc2efed57b9ec7a0", "c6c5073961c452e0", "4b40483dd9af9563"),
        "imh_smc": ("bb0280a48f51a88a", "b59c8207569ebe8b", "46ec9faed504aa2a")}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_a_run_saved_before_the_rename_keeps_its_fingerprint(case):
    """bread's and the protocol's run.json headers hash the pilot's settings under
    their old names (n_grid, adapt_steps, beta_floor, ridge), so the fingerprint of
    the same settings is the one the code before the rename wrote (a non-default
    floor, ridge and target acceptance; HMC/NUTS and IMH)."""
    sampler, run = _CASES[case]
    data, hyper = {"y": [1.0, 2.0]}, {"tau": 1.0}
    header = bread._header("m", "model text", "sim text", data, sampler, run, hyper)
    old_bread, old_tuning, old_protocol = _OLD[case]
    assert header["fingerprint"] == old_bread
    assert header["fingerprints"]["tuning"] == old_tuning
    assert fingerprints(tuning=sampler.tuning_fingerprint())[0] == old_tuning
    assert protocol._header("m", "model text", "sim text", data, sampler, run,
                            ProtocolSettings())["fingerprint"] == old_protocol


def test_run_config_and_run_settings_share_their_common_defaults():
    run, config = RunSettings(), RunConfig()
    common = ({f.name for f in dataclasses.fields(RunSettings)}
              & {f.name for f in dataclasses.fields(RunConfig)}) - {"progress", "schedule"}
    assert common >= {"steps", "increment_blocks"}
    assert {k: getattr(run, k) for k in common} == {k: getattr(config, k) for k in common}


def test_every_settings_kernel_is_registered_once():
    assert set(PARAMS_BY_KIND) == set(KERNELS)
    for name, entry in KERNELS.items():
        kernel, params = SamplerSettings(kernel=name).make()
        # IMH has no base params: its proposals come from its own pilot.
        assert type(kernel) is entry.kernel and (
            type(params) is entry.params if name != "imh" else params is None)
    with pytest.raises(ValueError, match="unknown kernel 'mala'; use 'hmc', 'nuts' or 'imh'"):
        kernel_entry("mala")
    with pytest.raises(ValueError, match="unknown kernel"):
        SamplerSettings(kernel="mala")
