"""Learning-rate schedules (`tapefit.training.schedules`): each decay's values against its
formula, the warmup in front of it and the floor under it, the warmup's length, and every bad
setting refused in one line."""

import keras
import numpy as np
import pytest

from tapefit.errors import TapefitError
from tapefit.training import schedules
from tapefit.training.schedules import Warmup, warmup_length


def values(schedule, steps):
    return np.array([float(schedule(step)) for step in steps])


def test_cosine_with_warmup_matches_its_formula():
    total, warm, peak, floor = 50, 10, 0.1, 0.001
    got = values(schedules.cosine(peak, total, 10, warmup_steps=warm, min_lr=floor), range(total))
    steps = np.arange(total, dtype=float)
    progress = (steps - warm) / (total - 1 - warm)
    decayed = floor + (peak - floor) * 0.5 * (1 + np.cos(np.pi * progress))
    want = np.where(steps < warm, peak * steps / warm, decayed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    assert got[-1] == pytest.approx(floor, rel=1e-5)


def test_linear_exponential_and_piecewise_match_their_formulas():
    total = 40
    steps = np.arange(total, dtype=float)
    linear = values(schedules.linear(0.2, total, 8, warmup_fraction=0.25, min_lr=0.02), steps)
    want = np.where(steps < 10, 0.2 * steps / 10, 0.2 - (0.2 - 0.02) * (steps - 10) / (total - 11))
    np.testing.assert_allclose(linear, np.maximum(want, 0.0), rtol=1e-5, atol=1e-8)

    smooth = values(schedules.exponential(0.1, total, 8, decay_rate=0.5, min_lr=0.02), steps)
    np.testing.assert_allclose(smooth, np.maximum(0.1 * 0.5 ** (steps / 8), 0.02), rtol=1e-5)
    stairs = values(schedules.exponential(0.1, total, 8, decay_rate=0.5, staircase=True), steps)
    np.testing.assert_allclose(stairs, 0.1 * 0.5 ** np.floor(steps / 8), rtol=1e-5)

    steps_decay = values(schedules.piecewise(1.0, total, 8, milestones=[0.5, 0.75]), steps)
    want = np.where(steps <= 20, 1.0, np.where(steps <= 30, 0.1, 0.01))
    np.testing.assert_allclose(steps_decay, want, rtol=1e-5)


def test_constant_without_warmup_is_the_plain_learning_rate():
    assert schedules.constant(0.003, 100, 10) == 0.003
    warm = values(schedules.constant(0.5, 100, 10, warmup_steps=4), range(6))
    np.testing.assert_allclose(warm, [0.0, 0.125, 0.25, 0.375, 0.5, 0.5])


def test_a_schedule_survives_keras_serialisation():
    schedule = schedules.cosine(0.01, 100, 10, warmup_fraction=0.1, min_lr=1e-4)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    np.testing.assert_array_equal(
        values(again, range(0, 100, 7)), values(schedule, range(0, 100, 7))
    )


def test_a_schedule_over_an_endless_stream_needs_steps_per_epoch():
    with pytest.raises(TapefitError, match="endless training stream does not have"):
        schedules.cosine(0.01, None, None)
    assert float(schedules.constant(0.01, None, None, warmup_steps=5)(2)) == pytest.approx(0.004)


def test_the_warmup_length_is_the_fraction_of_the_run_when_given_else_the_steps():
    assert warmup_length(100, 0, 0.2) == 20
    assert warmup_length(100, 7, None) == 7
    assert warmup_length(100, 7, 0.25) == 25  # the fraction wins
    assert warmup_length(100, 7, 0.0) == 0
    assert (warmup_length(10, 0, 0.25), warmup_length(10, 0, 0.35)) == (2, 4)  # round half even
    assert warmup_length(None, 5, None) == 5  # an endless stream: only steps can say


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            (100, 0, 1.0),
            "scheduler.warmup_fraction=1.0 must be in [0, 1): the share of the run's steps "
            "spent warming up",
        ),
        ((100, 0, -0.1), "scheduler.warmup_fraction=-0.1 must be in [0, 1)"),
        ((100, -1, None), "scheduler.warmup_steps=-1 must be >= 0"),
        (
            (10, 10, None),
            "scheduler.warmup_steps=10 leaves no step to decay over in a run of 10 steps: lower "
            "it or use scheduler.warmup_fraction",
        ),
        (
            (None, 0, 0.1),
            "this learning-rate schedule needs the run's total steps, which an endless training "
            "stream does not have: set trainer.steps_per_epoch, or scheduler=constant",
        ),
    ],
    ids=["fraction-1", "fraction-negative", "steps-negative", "as-long-as-the-run", "endless"],
)
def test_a_warmup_that_cannot_be_is_refused_in_one_line(arguments, message):
    with pytest.raises(TapefitError) as refused:
        warmup_length(*arguments)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_warmup_rises_from_initial_then_decays_to_the_floor():
    decay = keras.optimizers.schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)
    schedule = Warmup(decay, warmup_steps=2, peak=1.0, initial=0.5, floor=0.2)
    # 0.5, halfway to the peak; then the decay from its own step 0, 0.125 held at the floor
    np.testing.assert_allclose(values(schedule, range(6)), [0.5, 0.75, 1.0, 0.5, 0.25, 0.2])
    again = Warmup.from_config(schedule.get_config())
    np.testing.assert_array_equal(values(again, range(6)), values(schedule, range(6)))
    no_warmup = Warmup(0.3, warmup_steps=0, peak=0.3)  # a constant decay, no warmup
    np.testing.assert_allclose(values(no_warmup, [0, 5]), [0.3, 0.3])


def test_piecewise_drops_at_the_milestones_counted_from_the_runs_start():
    schedule = schedules.piecewise(1.0, 10, 5, milestones=[0.5], factor=0.1, warmup_steps=2)
    np.testing.assert_allclose(
        values(schedule, range(8)), [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 0.1, 0.1], rtol=1e-6
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: schedules.cosine(0.1, 100, 10, min_lr=0.2),
            "scheduler.min_lr=0.2 must be in [0, optimizer.learning_rate=0.1]: the floor the "
            "schedule decays to",
        ),
        (
            lambda: schedules.piecewise(1.0, 100, 10, milestones=[0.8, 0.3]),
            "scheduler.milestones=[0.8, 0.3] must be increasing shares of the run in (0, 1), "
            "e.g. [0.5, 0.75]",
        ),
        (
            lambda: schedules.piecewise(1.0, 100, 10, milestones=[]),
            "scheduler.milestones=[] must be increasing shares",
        ),
        (
            lambda: schedules.piecewise(1.0, 100, 10, factor=0),
            "scheduler.factor=0 must be in (0, 1]: what each drop multiplies by",
        ),
        (
            lambda: schedules.exponential(1.0, 100, 10, decay_rate=2),
            "scheduler.decay_rate=2 must be in (0, 1]: the factor per epoch",
        ),
        (
            lambda: schedules.exponential(1.0, None, None),
            "this learning-rate schedule needs the run's steps per epoch",
        ),
    ],
    ids=["floor", "milestones", "no-milestones", "factor", "decay-rate", "no-epoch-length"],
)
def test_bad_schedule_settings_are_refused_in_one_line(make, message):
    with pytest.raises(TapefitError) as refused:
        make()
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
