"""`tapefit.config.typed`: a config node as the dataclass its schema describes."""

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

import tapefit
from tapefit.config.schemas import DebugConfig, DebugMode, TrainerConfig
from tapefit.config.typed import typed


def test_a_composed_node_becomes_its_schema_with_enums_and_interpolations_resolved():
    cfg = tapefit.compose(["trainer.epochs=3", "debug=overfit"])
    trainer = typed(TrainerConfig, cfg.trainer)
    assert isinstance(trainer, TrainerConfig) and trainer.epochs == 3
    assert typed(DebugConfig, cfg.debug).mode is DebugMode.overfit
    assert typed(TrainerConfig, trainer) is trainer  # typed already: as it is


def test_a_plain_mapping_or_none_merges_over_the_schemas_defaults():
    assert typed(DebugConfig, None) == DebugConfig()
    plain = OmegaConf.create({"mode": "${choice}", "choice": "overfit"})
    assert typed(DebugConfig, {"mode": "fast_dev_run"}).mode is DebugMode.fast_dev_run
    with pytest.raises(ConfigKeyError):
        typed(DebugConfig, plain)  # `choice` is no key of the schema
    with pytest.raises(ValidationError):
        typed(DebugConfig, {"mode": "slowly"})
