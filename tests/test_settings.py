"""One set of defaults: the engine's and the tuning's own settings default to what the
workflows' settings give them, so calling tune() or engine.run() directly runs as
bread() does.  Exact: compares dataclass fields, runs nothing."""

from __future__ import annotations

import dataclasses

import pytest

from bread_stan.ais.engine import RunConfig
from bread_stan.ais.frozen_kernels import PARAMS_BY_KIND
from bread_stan.ais.tuning import TuningConfig
from bread_stan.kernels.registry import KERNELS, kernel_entry
from bread_stan.workflows.settings import RunSettings, SamplerSettings


def test_the_default_sampler_tunes_with_tunings_defaults():
    assert SamplerSettings().tuning_config() == TuningConfig()


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
