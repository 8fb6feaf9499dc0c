"""Validation every N steps (`FitPlan`): how a run's training maps onto Keras epochs, the
stream the intervals read, where a resume starts in it, and the refusal without validation."""

import pytest
import tensorflow as tf

from tapefit.config.schemas import TrainerConfig
from tapefit.errors import TapefitError
from tapefit.training.fit_plan import UNTIL_THE_STREAM_ENDS, FitPlan, check_interval


def batches(count: int, known_length: bool = True) -> tf.data.Dataset:
    """`count` batches of one number each, 0 to count - 1; a stream hides its length."""
    data = tf.data.Dataset.range(count).batch(1)
    return data if known_length else data.filter(lambda _: True)


def numbers(dataset: tf.data.Dataset) -> list[int]:
    return [int(batch[0]) for batch in dataset]


def test_without_an_interval_a_keras_epoch_is_the_runs_epoch():
    plan = FitPlan.of(TrainerConfig(epochs=3, steps_per_epoch=4), batches(10))
    assert plan == FitPlan(epochs=3, steps_per_epoch=4)
    train = batches(10)
    assert plan.stream(train, 3) is train  # Keras reads the split once an epoch
    assert plan.stream_offset(first=2, skip_steps=3) == 3  # only the steps into the epoch


def test_an_interval_makes_each_keras_epoch_n_steps_of_the_whole_runs_stream():
    plan = FitPlan.of(TrainerConfig(epochs=3, val_check_interval=4), batches(10))
    # 30 steps in intervals of 4: seven intervals, the last one 2 steps long
    assert plan == FitPlan(epochs=8, steps_per_epoch=4, interval=4, total_steps=30)
    stream = numbers(plan.stream(batches(10), 3))
    assert stream == list(range(10)) * 3
    # a resume at Keras epoch 2 with 3 steps of it done: 2 * 4 + 3 batches already trained
    assert plan.stream_offset(first=2, skip_steps=3) == 11


def test_steps_per_epoch_with_an_interval_cuts_the_endlessly_repeated_split():
    plan = FitPlan.of(TrainerConfig(epochs=2, steps_per_epoch=7, val_check_interval=5), batches(4))
    assert plan == FitPlan(epochs=3, steps_per_epoch=5, interval=5, total_steps=14, endless=True)
    assert numbers(plan.stream(batches(4), 2)) == [0, 1, 2, 3] * 3 + [0, 1]


def test_a_stream_of_unknown_length_runs_intervals_until_it_ends():
    plan = FitPlan.of(TrainerConfig(epochs=2, val_check_interval=3), batches(5, False))
    assert (plan.epochs, plan.steps_per_epoch, plan.total_steps) == (UNTIL_THE_STREAM_ENDS, 3, None)
    assert not plan.endless
    assert numbers(plan.stream(batches(5, False), 2)) == list(range(5)) * 2
    assert plan.stream_offset(first=1, skip_steps=0) == 3


def test_an_interval_without_a_validation_split_is_refused_in_one_line():
    check_interval(TrainerConfig(val_check_interval=10), has_validation=True)
    check_interval(TrainerConfig(val_check_interval=None), has_validation=False)
    with pytest.raises(TapefitError) as refused:
        check_interval(TrainerConfig(val_check_interval=10), has_validation=False)
    assert str(refused.value) == (
        "trainer.val_check_interval needs a validation split, and this data has none: give the "
        "loader one, or set trainer.val_check_interval=null"
    )
