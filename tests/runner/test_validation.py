"""The checks a built run passes before training, against the run's typed callback settings:
a callback's `monitor` and the objective must be names the epoch logs will hold."""

import types

import keras
import pytest

import tapefit
from tapefit import TapefitError
from tapefit.callbacks.configured import CallbackSettings
from tapefit.config.schemas import TrainerConfig
from tapefit.config.target_spec import TargetSpec
from tapefit.runner.validation import check_logged_names, expected_logs


def compiled_model() -> keras.Model:
    inputs = keras.Input((2,))
    model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
    model.compile("sgd", "mse", metrics=["mae"])
    return model


def callback(name: str, target: str, **arguments) -> TargetSpec:
    return TargetSpec(f"callbacks.{name}", target, arguments, checked=True)


WITH_VALIDATION = types.SimpleNamespace(val=object())
PLATEAU = callback("reduce_lr_on_plateau", "keras.callbacks.ReduceLROnPlateau", monitor="loss")


def test_the_logs_hold_the_steps_metrics_their_val_twins_and_the_learning_rate_on_a_plateau():
    model = compiled_model()
    plain = expected_logs(CallbackSettings(), TrainerConfig(), model, WITH_VALIDATION, ["mae"], [])
    assert {"loss", "mae", "val_loss", "val_mae"} <= plain and "learning_rate" not in plain
    settings = CallbackSettings(acting=(PLATEAU,))
    assert "learning_rate" in expected_logs(
        settings, TrainerConfig(), model, WITH_VALIDATION, [], []
    )


def test_a_monitor_the_run_never_logs_is_refused_naming_the_real_ones():
    stopping = callback("early_stopping", "keras.callbacks.EarlyStopping", monitor="val_acc")
    with pytest.raises(TapefitError) as refused:
        check_logged_names(
            CallbackSettings(acting=(stopping,)),
            TrainerConfig(),
            compiled_model(),
            WITH_VALIDATION,
            "val_loss",
            ["mae"],
            [],
        )
    assert str(refused.value).startswith(
        "callbacks.early_stopping.monitor=val_acc is not a logged metric: choose one of loss, mae"
    )


def test_a_monitor_of_a_disabled_callback_is_not_checked():
    check_logged_names(  # nothing enabled: only the objective is checked, and it is logged
        CallbackSettings(),
        TrainerConfig(),
        compiled_model(),
        WITH_VALIDATION,
        "val_mae",
        ["mae"],
        [],
    )
