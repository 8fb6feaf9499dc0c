"""`Model.compile`'s arguments from the run's settings (`tapefit.training.compiling`): the
config's loss replacing the model's own, its metrics added to the model's, names checked
against Keras', the names metrics are logged under, and the schedule's length."""

import keras
import numpy as np
import pytest

from tapefit.config.target_spec import TargetSpec
from tapefit.errors import TapefitError
from tapefit.training.compiling import (
    CompileSettings,
    StepPolicies,
    compile_objects,
    learning_rate_schedule,
    metric_name,
    model_compile_defaults,
)

DEFAULTS = {"loss": "mse", "metrics": ["mae"]}  # what a model's compile_defaults() gives


def test_the_models_own_loss_and_metrics_without_compile_settings():
    objects = compile_objects(CompileSettings(), DEFAULTS)
    assert objects == DEFAULTS and objects is not DEFAULTS
    assert compile_objects(CompileSettings(), {}) == {}


def test_compile_loss_replaces_the_models_and_compile_metrics_are_added():
    settings = CompileSettings(loss="huber", metrics=("auc", "accuracy"))
    assert compile_objects(settings, DEFAULTS) == {
        "loss": "huber",
        "metrics": ["mae", "auc", "accuracy"],
    }
    assert compile_objects(CompileSettings(metrics=("auc",)), {"loss": "mse"}) == {
        "loss": "mse",
        "metrics": ["auc"],
    }
    assert DEFAULTS == {"loss": "mse", "metrics": ["mae"]}  # the model's own left as they were


def test_a_target_node_is_built():
    node = TargetSpec.of({"_target_": "keras.losses.Huber", "delta": 2.0}, "compile.loss")
    metric = TargetSpec("compile.metrics[0]", "keras.metrics.AUC", {"name": "pr", "curve": "PR"})
    objects = compile_objects(CompileSettings(loss=node, metrics=(metric,)), {})
    assert isinstance(objects["loss"], keras.losses.Huber)
    assert float(objects["loss"]([[0.0]], [[3.0]])) == 4.0  # delta 2: 2 * (3 - 2 / 2)
    [auc] = objects["metrics"]
    assert isinstance(auc, keras.metrics.AUC) and auc.name == "pr" and auc.curve.name == "PR"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            CompileSettings(loss="msee"),
            "compile.loss=msee is not a Keras loss: use a name such as mse, mae, "
            "binary_crossentropy, or a node with _target_",
        ),
        (
            CompileSettings(metrics=("mae", "acuracy")),
            "compile.metrics[1]=acuracy is not a Keras metric: use a name such as mae, "
            "accuracy, auc, or a node with _target_",
        ),
    ],
    ids=["loss", "metric"],
)
def test_a_name_keras_does_not_know_is_refused_in_one_line_naming_the_key(settings, message):
    with pytest.raises(TapefitError) as refused:
        compile_objects(settings, DEFAULTS)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("metric", "name"),
    [
        ("accuracy", "accuracy"),
        (keras.metrics.AUC(name="roc"), "roc"),
        (keras.metrics.mean_squared_error, "mean_squared_error"),
        (TargetSpec("compile.metrics", "keras.metrics.AUC", {"name": "pr"}), "pr"),
        # no name: built, the class's default
        (TargetSpec("compile.metrics", "keras.metrics.MeanAbsoluteError"), "mean_absolute_error"),
    ],
    ids=["string", "built", "function", "named", "unnamed"],
)
def test_the_name_a_configured_metric_is_logged_under(metric, name):
    assert metric_name(metric) == name


def test_a_models_own_compile_defaults_are_asked_for():
    class Defaulting:
        def compile_defaults(self):
            return {"loss": "mae"}

    assert model_compile_defaults(Defaulting()) == {"loss": "mae"}
    assert model_compile_defaults(keras.Sequential([keras.layers.Dense(1)])) == {}


def test_the_schedule_runs_epochs_times_the_splits_batches():
    assert learning_rate_schedule(None, 3, 10) is None
    node = TargetSpec("scheduler", "tapefit.training.schedules.linear")
    schedule = learning_rate_schedule(node, 3, 10)(1.0)  # 30 steps: 0 at step 29
    rates = [float(schedule(step)) for step in (0, 15, 29)]
    np.testing.assert_allclose(rates, [1.0, 1 - 15 / 29, 0.0], atol=1e-6)
    endless = learning_rate_schedule(node, 3, None)
    with pytest.raises(TapefitError, match="needs the run's total steps"):
        endless(1.0)


def test_the_step_policies_are_compiles_keyword_arguments():
    policies = StepPolicies(on_nonfinite="skip", allow_missing_gradients=("frozen/.*",))
    assert policies.arguments() == {
        "on_nonfinite": "skip",
        "on_missing_gradients": "error",
        "allow_missing_gradients": ["frozen/.*"],
        "gradient_telemetry": "norm",
    }
