"""The objective: which epoch's value counts (`Objective`), and whether a metric is better
higher or lower (`resolve_direction`), which decides the epoch that is tested and saved."""

import math

import pytest

from tapefit.errors import TapefitError
from tapefit.objective import Objective, check_objective, metric_direction, resolve_direction


def test_the_best_epoch_is_the_first_of_equal_values_in_the_objectives_direction():
    higher = Objective("val_accuracy", "max")
    assert higher.value_in({"val_accuracy": [0.5, 0.9, 0.9]}, {}) == (0.9, 2)
    lower = Objective("val_loss", "min")
    assert lower.value_in({"val_loss": [0.8, 0.6, 0.7, 0.6]}, {}) == (0.6, 2)


def test_epochs_without_a_finite_value_are_never_the_best():
    objective = Objective("val_loss", "min")
    history = {"val_loss": [None, math.nan, 0.7, -math.inf, 0.9]}
    assert objective.value_in(history, {}) == (0.7, 3)
    value, epoch = objective.value_in({"val_loss": [None, math.nan]}, {})
    assert math.isnan(value) and epoch is None
    value, epoch = objective.value_in({"loss": [0.1]}, {})  # never logged
    assert math.isnan(value) and epoch is None


def test_the_last_epoch_and_a_test_metric():
    last = Objective("val_loss", "min", mode="last")
    assert last.value_in({"val_loss": [0.8, 0.6, 0.7]}, {}) == (0.7, 3)
    tested = Objective("test_accuracy", "max")
    assert tested.value_in({"val_accuracy": [0.1]}, {"test_accuracy": 0.75}) == (0.75, None)


def test_better_is_strict_and_worst_is_the_far_end():
    higher, lower = Objective("val_accuracy", "max"), Objective("val_loss", "min")
    assert higher.better(0.9, 0.5) and not higher.better(0.5, 0.9)
    assert lower.better(0.4, 0.5) and not lower.better(0.5, 0.4)
    assert not higher.better(0.5, 0.5) and not lower.better(0.5, 0.5)  # the first is kept
    assert (higher.worst, lower.worst) == (-math.inf, math.inf)
    assert all(higher.better(v, higher.worst) and lower.better(v, lower.worst) for v in (0, 1e9))


def test_an_objective_the_run_never_logs_is_refused_with_the_choices():
    check_objective("val_loss", {"loss", "val_loss"}, {"test_loss"})
    check_objective("test_loss", {"loss", "val_loss"}, {"test_loss"})
    with pytest.raises(TapefitError) as refused:
        check_objective("val_acc", {"val_loss", "loss"}, {"test_loss"})
    assert str(refused.value) == (
        "objective=val_acc is never logged by this run: choose one of loss, val_loss "
        "(or a test metric: test_loss)"
    )


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("val_accuracy", "max"),
        ("val_sparse_categorical_accuracy", "max"),
        ("val_f1_score", "max"),
        ("val_precision", "max"),
        ("val_mean_io_u", "max"),
        ("val_spearman", "max"),
        ("test_auc", "max"),
        ("val_loss", "min"),
        ("val_mean_absolute_error", "min"),
        ("val_mse", "min"),
        ("val_cosine_similarity", "max"),
        ("val_pearson_correlation", "max"),
        ("val_r2_score", "max"),
        ("val_root_mean_squared_error", "min"),
        ("val_kl_divergence", "min"),
        ("val_false_positives", "min"),
        ("val_true_positives", "max"),
        ("val_categorical_crossentropy_1", "min"),
    ],
)
def test_the_objective_direction_of_keras_and_tapefit_metrics_is_known(name, mode):
    """The direction decides which epoch's weights are tested and saved."""
    assert resolve_direction(name, "auto", "objective_direction") == mode


@pytest.mark.parametrize(
    ("monitor", "mode"),
    [("val_spearman", "max"), ("val_loss", "min"), ("val_auc", "max"), ("val_accuracy", "max")],
)
def test_auto_mode_knows_which_metrics_grow(monitor, mode):
    assert resolve_direction(monitor, "auto", "callbacks.early_stopping.mode") == mode
    assert resolve_direction(monitor, "min", "callbacks.early_stopping.mode") == "min"


@pytest.mark.parametrize("name", ["val_agreement", "val_mean", "val_accuracy_loss"])
def test_an_unknown_direction_is_refused_in_one_line_naming_the_key(name):
    expected = f"cannot tell whether {name} is better higher or lower: set objective_direction=max"
    with pytest.raises(TapefitError, match=expected):
        resolve_direction(name, "auto", "objective_direction")
    assert resolve_direction(name, "max", "objective_direction") == "max"


def test_a_configured_direction_is_taken_as_given_and_the_key_is_named():
    assert resolve_direction("val_agreement", "min", "callbacks.early_stopping.mode") == "min"
    assert metric_direction("val_agreement") is None
    with pytest.raises(TapefitError) as refused:
        resolve_direction("val_agreement", "auto", "callbacks.early_stopping.mode")
    assert str(refused.value) == (
        "callbacks.early_stopping.mode=auto cannot tell whether val_agreement is better higher "
        "or lower: set callbacks.early_stopping.mode=max or callbacks.early_stopping.mode=min"
    )
    with pytest.raises(ValueError, match="'up' is not a valid MonitorMode"):
        resolve_direction("val_loss", "up", "objective_direction")
