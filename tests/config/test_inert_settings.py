"""tapefit/config/inert_settings.py: each rule refuses a typed override its config leaves
without effect, and lets the same override through once the feature is on."""

from __future__ import annotations

import pytest

from tapefit.config.inert_settings import check_no_inert_overrides, override_key
from tapefit.errors import TapefitError
from tapefit.runner.composition import compose

# (the inert override, what the line must say it needs, the override that gives it an effect)
CASES = [
    ("trainer.export_formats=[onnx]", "trainer.export=true", "trainer.export=true"),
    ("trainer.export_tolerance=0.001", "trainer.export=true", "trainer.export=true"),
    (
        "callbacks.reduce_lr_on_plateau.factor=0.2",
        "callbacks.reduce_lr_on_plateau.enabled=true",
        "callbacks.reduce_lr_on_plateau.enabled=true",
    ),
    ("tune.max_trials=3", "tune=random", "tune=random"),
    ("tune.lr_find.steps=20", "tune=lr_find", "tune=lr_find"),
    ("tune.pruner=none", "tune=optuna", "tune=optuna"),
    ("debug.batches=2", "debug=fast_dev_run", "debug=fast_dev_run"),
    ("checkpoint.save_last=false", "checkpoint.save_top_k=K", "checkpoint.save_top_k=2"),
    ("force_resume=true", "resume=true", "resume=true"),
    ("init_from_strict=false", "init_from=RUN_DIR", "init_from=somewhere"),
    ("trainer.shard_policy=data", "trainer.strategy=multi_worker", "trainer.strategy=multi_worker"),
    ("model.hidden_units=[32]", "model.architecture=mlp", "model.architecture=mlp"),
    ("model.conv_blocks=[[8,1]]", "model.architecture=cnn", "model.architecture=cnn"),
    ("model.dense_units=32", "model.architecture=cnn", "model.architecture=cnn"),
    ("model.dropout=0.2", "model.architecture=cnn", "model.architecture=cnn"),
]
# the CNN's keys are judged with the MLP chosen (the default body is the CNN)
MLP = {"model.conv_blocks", "model.dense_units", "model.dropout"}


@pytest.mark.parametrize(("override", "needs", "enabling"), CASES)
def test_an_override_that_does_nothing_is_refused_and_passes_once_it_acts(
    override, needs, enabling
):
    # a search, but not the one the key belongs to
    base = ["tune=random"] if override.startswith(("tune.pruner", "tune.lr_find")) else []
    base += ["model.architecture=mlp"] if override.split("=")[0] in MLP else []
    with pytest.raises(TapefitError) as refused:
        check_no_inert_overrides(compose([*base, override]), [*base, override])
    line = str(refused.value)
    assert line.startswith(f"{override} does nothing in this run: it needs ")
    assert needs in line and line.endswith("add that, or drop the override")
    assert "\n" not in line
    typed = [enabling, override]
    check_no_inert_overrides(compose(typed), typed)  # acts now: nothing raised


def test_a_value_a_config_file_sets_is_not_judged():
    """conf/ sets callbacks.early_stopping.patience while early stopping is off: a default."""
    cfg = compose([])
    assert cfg.callbacks.early_stopping.enabled is False
    check_no_inert_overrides(cfg, ["trainer.epochs=2", "hydra.run.dir=out", "~seed"])


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("trainer.epochs=2", "trainer.epochs"),
        ("+callbacks.extra.x._target_=a.B", "callbacks.extra.x._target_"),
        ("++trainer.export_formats=[onnx]", "trainer.export_formats"),
        ("hydra.run.dir=out", None),
        ("~trainer.devices", None),
        ("data@foo=bar", None),
    ],
)
def test_the_key_an_override_sets(override, key):
    assert override_key(override) == key
