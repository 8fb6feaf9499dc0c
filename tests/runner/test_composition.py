"""`tapefit.runner.composition`: the schemas registered, and `conf/` composed as the CLI would."""

import pytest
from hydra import initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from tapefit.errors import TapefitError
from tapefit.runner.composition import register_schemas


def test_overrides_apply(compose):
    cfg = compose(["trainer.epochs=2", "optimizer.learning_rate=3e-4", "seed=7"])
    assert (cfg.trainer.epochs, cfg.optimizer.learning_rate, cfg.seed) == (2, 3e-4, 7)


def test_the_schemas_are_stored_once_a_process_and_compose_after_a_clear():
    from hydra.core.config_store import ConfigStore

    from tapefit.runner.composition import compose, register_schemas

    register_schemas()
    stored = ConfigStore.instance().repo["trainer"]["trainer_schema.yaml"]
    register_schemas()
    assert ConfigStore.instance().repo["trainer"]["trainer_schema.yaml"] is stored
    del ConfigStore.instance().repo["trainer"]["trainer_schema.yaml"]  # as a cleared store
    assert compose(["trainer.epochs=2"]).trainer.epochs == 2  # stored again when missing
    assert "trainer_schema.yaml" in ConfigStore.instance().repo["trainer"]


def test_a_misspelt_key_is_one_tapefit_line_without_hydras_error_behind_it(compose):
    with pytest.raises(TapefitError, match=r"^trainer.epoch is not a config key") as refused:
        compose(["trainer.epoch=3"])
    line = str(refused.value)
    assert "(did you mean trainer.epochs?)" in line and "\n" not in line
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_a_value_its_schema_refuses_stays_hydras_error(compose):
    with pytest.raises(ConfigCompositionException, match=r"trainer\.epochs=abc") as refused:
        compose(["trainer.epochs=abc"])
    assert not isinstance(refused.value, TapefitError)


def test_compose_starts_afresh_inside_a_hydra_already_initialised(compose, tmp_path):
    (tmp_path / "config.yaml").write_text("other: 1\n")
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        cfg = compose(["seed=3"])
    assert (cfg.experiment_name, cfg.seed) == ("classifier", 3)
    assert "other" not in cfg


def test_the_run_name_resolver_names_a_slurm_batch_jobs_directory(monkeypatch):
    OmegaConf.clear_resolver("tapefit.run_name")
    register_schemas()
    node = OmegaConf.create({"dir": "${tapefit.run_name:2024-01-01_10-00-00}"})
    for name in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_JOB_NAME"):
        monkeypatch.delenv(name, raising=False)
    assert node.dir == "2024-01-01_10-00-00"
    monkeypatch.setenv("SLURM_JOB_ID", "4321")
    assert node.dir == "slurm-4321"
