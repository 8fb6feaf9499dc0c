"""`tapefit.sweeps.lr_find`: the range test's schedule and stop, and the rate its curve suggests."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from tapefit.config.schemas import LrFindConfig
from tapefit.errors import TapefitError
from tapefit.sweeps.lr_find import RangeTest, check_settings, suggestion


class Model:
    """What the range test touches of a model: its optimizer's rate, its metrics, its stop."""

    def __init__(self):
        self.optimizer = SimpleNamespace(learning_rate=None)
        self.stop_training = False
        self.resets = 0

    def reset_metrics(self):
        self.resets += 1


def range_test(losses, steps=10, smoothing=0.5, diverge_factor=2.0):
    """A range test from 1e-4 told `losses` step by step, until it stops its model."""
    test = RangeTest(1e-4, 1e-1, steps, smoothing, diverge_factor)
    model = Model()
    test.set_model(model)
    for loss in losses:
        test.on_train_batch_begin(len(test.losses))
        test.on_train_batch_end(len(test.losses), {"loss": loss})
        if model.stop_training:
            break
    return test, model


def test_each_step_sets_its_rate_on_the_exponential_schedule_and_resets_the_metrics():
    test, model = range_test([1.0, 1.0, 1.0], steps=4, diverge_factor=4.0)
    np.testing.assert_allclose(test.rates, [1e-4, 1e-3, 1e-2, 1e-1])
    assert model.optimizer.learning_rate == pytest.approx(1e-2)  # the third step's
    assert model.resets == 3 and not model.stop_training


def test_the_smoothed_loss_is_bias_corrected_from_the_first_step():
    test, _ = range_test([4.0, 2.0])
    assert test.smoothed == pytest.approx([4.0, (0.5 * 2.0 + 0.5 * 2.0) / 0.75])


@pytest.mark.parametrize(
    ("losses", "steps_run"),
    [([4.0, 2.0, 20.0, 1.0], 3), ([4.0, math.nan, 1.0], 2), ([3.0, 3.0, 3.0, 3.0, 3.0], 4)],
    ids=["diverged", "not-finite", "last-step"],
)
def test_the_test_stops_once_the_loss_diverges_is_not_finite_or_the_steps_end(losses, steps_run):
    test, model = range_test(losses, steps=4)
    assert model.stop_training and len(test.losses) == steps_run


def test_the_suggestion_is_the_steepest_fall_after_the_first_tenth_of_the_steps():
    rates = np.geomspace(1e-6, 1.0, 20)
    falls = [10, 3, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4, 2.3, 1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7]
    smoothed = [*falls, 5, 9, 20, 40]  # the first steps' drop is left out, as is the divergence
    assert suggestion(rates, smoothed) == rates[8]


def test_a_fall_after_the_lowest_loss_is_left_out_of_a_test_that_stopped_early():
    rates = np.geomspace(1e-5, 1e2, 8)
    assert suggestion(rates, [2.0, 1.0, 0.5, 5.0, 0.6]) == rates[0]  # five steps of eight run


def test_fewer_than_three_finite_losses_are_refused():
    with pytest.raises(TapefitError, match=r"^tune=lr_find: fewer than 3 steps gave a finite"):
        suggestion(np.geomspace(1e-5, 1.0, 4), [1.0, math.nan, math.inf, 2.0])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_lr": 0.1, "max_lr": 0.1}, "min_lr=0.1 and max_lr=0.1: need 0 < min_lr < max_lr"),
        ({"min_lr": 0.0}, "min_lr=0.0 and max_lr=10.0: need 0 < min_lr < max_lr"),
        ({"smoothing": 1.0}, r"smoothing=1.0 must be in \[0, 1\)"),
        ({"diverge_factor": 1.0}, "diverge_factor=1.0 must be > 1"),
    ],
    ids=["empty-range", "zero-min", "smoothing", "diverge-factor"],
)
def test_settings_that_cannot_run_are_refused_in_one_line(settings, message):
    check_settings(LrFindConfig(steps=5))  # the defaults, at the fewest steps, run
    with pytest.raises(TapefitError, match=f"^tune.lr_find.{message}$"):
        check_settings(LrFindConfig(**settings))
