"""The run's specification (`tapefit.runner.spec`) and the typed pieces below the run's edge it
hands on: compile settings, the tape step's policies, the tested-weights selector. Unit tests: no
training. The debug presets' data limits: tests/training/test_debugging.py."""

import dataclasses

import keras
import pytest
from omegaconf.errors import ConfigKeyError

import tapefit
from tapefit.config import schemas
from tapefit.config.schemas import (
    DebugConfig,
    DebugMode,
    EarlyStoppingConfig,
    Strategy,
    TrainerConfig,
)
from tapefit.config.target_spec import TargetSpec
from tapefit.config.typed import typed
from tapefit.objective import Objective
from tapefit.runner.spec import RunSpec
from tapefit.training.compiling import (
    CompileSettings,
    compile_model,
    configured_optimizer,
    learning_rate_schedule,
)
from tapefit.training.selection import selector


def test_the_spec_holds_the_config_as_typed_objects(compose):
    spec = RunSpec.of(compose(["trainer.epochs=4", "trainer.strategy=mirrored", "debug=overfit"]))
    assert isinstance(spec.trainer, TrainerConfig) and spec.trainer.epochs == 4
    assert spec.trainer.strategy is Strategy.mirrored
    assert spec.debug.mode is DebugMode.overfit
    assert spec.model_class is tapefit.Classifier
    assert spec.objective == Objective("val_accuracy", "max", "best")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.trainer = None


def test_the_objective_comes_from_the_model_class_or_the_config(compose):
    assert RunSpec.of(compose(["experiment=siamese"])).objective.name == "val_spearman"
    spec = RunSpec.of(compose(["objective=val_loss", "objective_mode=last"]))
    assert spec.objective == Objective("val_loss", "min", "last")
    unknown = RunSpec.of(compose(["objective=val_agreement"]))
    assert unknown.objective_name == "val_agreement"  # the run checks first that it logs it
    with pytest.raises(tapefit.TapefitError, match="cannot tell whether val_agreement"):
        unknown.objective  # noqa: B018


def test_compile_settings_carry_the_step_policies_and_every_optimizer(compose):
    cfg = compose(
        [
            "trainer.on_nonfinite=skip",
            "trainer.allow_missing_gradients=[*bias]",
            "callbacks.step_telemetry.histograms=true",
            "trainer.gradient_accumulation_steps=2",
        ]
    )
    settings = RunSpec.of(cfg).compile
    assert settings.policies.arguments() == {
        "on_nonfinite": "skip",
        "on_missing_gradients": "error",
        "allow_missing_gradients": ["*bias"],
        "gradient_telemetry": "histograms",
    }
    assert settings.optimizers == {} and settings.accumulate == 2
    assert settings.optimizer.target == "keras.optimizers.Adam" and settings.optimizer.checked
    cfg.callbacks.step_telemetry.enabled = False
    assert RunSpec.of(cfg).compile.policies.gradient_telemetry == "off"

    adam = TargetSpec("optimizers.generator", "keras.optimizers.Adam", {"learning_rate": 1e-3})
    sgd = TargetSpec("optimizers.critic", "keras.optimizers.SGD", {"learning_rate": 0.1})
    two = CompileSettings(optimizers={"generator": adam, "critic": sgd})
    built = configured_optimizer(two)
    assert {name: type(o).__name__ for name, o in built.items()} == {
        "generator": "Adam",
        "critic": "SGD",
    }


def test_the_schedule_spans_the_epochs_times_the_steps():
    node = TargetSpec("scheduler", "tapefit.training.schedules.cosine", {"min_lr": 0.0})
    schedule = learning_rate_schedule(node, epochs=3, steps_per_epoch=10)(0.1)
    assert float(schedule(0)) == pytest.approx(0.1)
    assert float(schedule(30)) == pytest.approx(0.0, abs=1e-7)  # the run's last step
    assert learning_rate_schedule(None, 3, 10) is None


def test_compile_returns_the_metrics_the_step_will_log():
    model = tapefit.TapeModel(*_functional())
    metric = TargetSpec("compile.metrics", "keras.metrics.MeanAbsoluteError", {"name": "mae_x"})
    settings = CompileSettings(
        optimizer=TargetSpec("optimizer", "keras.optimizers.SGD"),
        loss="mse",
        metrics=(metric,),
    )
    objects = compile_model(model, settings)
    assert objects["loss"] == "mse"
    assert [m.name for m in objects["metrics"]] == ["mae_x"]
    assert model.optimizer.__class__.__name__ == "SGD"


def _functional():
    inputs = keras.Input((2,))
    return inputs, keras.layers.Dense(1)(inputs)


@pytest.mark.parametrize(
    ("objective", "test_weights", "restores", "kept"),
    [
        (Objective("val_loss", "min"), schemas.TestWeights.best, False, "val_loss"),
        (Objective("val_loss", "min"), schemas.TestWeights.last, False, None),
        (Objective("val_loss", "min", "last"), schemas.TestWeights.best, False, None),
        (Objective("test_accuracy", "max"), schemas.TestWeights.best, True, "last epoch"),
    ],
)
def test_the_selector_keeps_the_weights_the_run_is_tested_with(
    objective, test_weights, restores, kept
):
    stopping = EarlyStoppingConfig(enabled=restores, restore_best_weights=restores)
    chosen = selector(objective, test_weights, stopping)
    if kept is None:
        assert chosen is None  # the model ends training with the last weights anyway
    elif kept == "last epoch":
        assert chosen is not None and chosen.monitor is None  # undoes EarlyStopping's restore
    else:
        assert chosen.monitor == kept


def test_a_typed_node_refuses_a_key_its_schema_does_not_have():
    assert typed(TrainerConfig, None) == TrainerConfig()
    with pytest.raises(ConfigKeyError):
        typed(DebugConfig, {"modes": "overfit"})


def test_a_typed_node_resolves_interpolations_through_the_whole_config(compose):
    cfg = compose(
        ["trainer.steps_per_epoch=7", "trainer.validation_steps=${trainer.steps_per_epoch}"]
    )
    assert RunSpec.of(cfg).trainer.validation_steps == 7
    cfg = compose(["trainer.validation_steps=${seed}", "seed=3"])
    assert typed(TrainerConfig, cfg.trainer).validation_steps == 3


def test_the_model_class_check_config_located_is_the_one_the_run_builds(compose, monkeypatch):
    """`check_config` locates the model's class; the spec, the objective and the build take it
    from there and import nothing again."""
    from tapefit.config import targets
    from tapefit.runner import model_from_config
    from tapefit.runner.model_from_config import build_model_from_config
    from tapefit.runner.preparation import build_data
    from tapefit.runner.validation import check_config

    cfg = compose(["model.architecture=mlp", "data.train_limit=64"])
    data = build_data(cfg)
    located = check_config(cfg)
    paths = []
    for module in (targets, model_from_config):
        real = module.locate
        monkeypatch.setattr(
            module, "locate", lambda path, key, real=real: paths.append(key) or real(path, key)
        )
    spec = RunSpec.of(cfg, located=located)
    model = build_model_from_config(spec.model, data)
    assert spec.model_class is located and spec.model.located is located
    assert type(model) is located and "model._target_" not in paths
