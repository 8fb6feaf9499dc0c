"""Validation every N steps (`trainer.val_check_interval`): what Keras' `fit` calls an epoch
becomes one interval of N training steps, so validation, History, every callback
(EarlyStopping, checkpoints, ReduceLROnPlateau), TensorBoard, sweeps' objective and pruning
see one point per interval, as with Lightning's `val_check_interval`.

Why: a corpus of millions of pairs makes an epoch hours long; an epoch-end-only run cannot
stop early, checkpoint its best model or report to a sweep in between. Keras has no such
option, but its `fit` runs `steps_per_epoch` steps per "epoch" from one iterator that it
keeps across epochs: given the run's whole training stream (the training split repeated
`trainer.epochs` times) and `steps_per_epoch=N`, each of its epochs is one interval. A
resumed run skips the intervals and steps already trained in that same stream, so it sees
exactly the batches the uninterrupted run saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tensorflow as tf

from tapefit.config.schemas import TrainerConfig
from tapefit.errors import TapefitError

UNTIL_THE_STREAM_ENDS = 2**31 - 1  # Keras epochs of a stream of unknown length


@dataclass(frozen=True)
class FitPlan:
    """How the run's training maps onto Keras `fit` epochs.

    Args:
        epochs: Keras epochs: `trainer.epochs`, or the number of validation intervals.
        steps_per_epoch: Steps per Keras epoch (`trainer.steps_per_epoch`, or the interval).
        interval: `trainer.val_check_interval`; None: validation at epoch ends.
        total_steps: The run's training steps, None for a stream of unknown length.
        endless: `trainer.steps_per_epoch` sets the epoch's length: the stream repeats the
            split endlessly and is cut at `total_steps`, as Keras reads it on across epochs.

    Example:
        >>> plan = FitPlan(epochs=4, steps_per_epoch=10, interval=10, total_steps=36)
        >>> plan.stream_offset(first=2, skip_steps=3)
        23
    """

    epochs: int
    steps_per_epoch: int | None
    interval: int | None = None
    total_steps: int | None = None
    endless: bool = False

    @classmethod
    def of(cls, trainer: TrainerConfig, train: tf.data.Dataset) -> FitPlan:
        """The plan for the trainer's settings and the training split.

        Args:
            trainer: The run's `trainer` settings.
            train: The training split (batched).

        Returns:
            The plan.
        """
        interval = trainer.val_check_interval
        if not interval:
            return cls(trainer.epochs, trainer.steps_per_epoch)
        per_epoch = trainer.steps_per_epoch or _cardinality(train)
        total = None if per_epoch is None else trainer.epochs * per_epoch
        epochs = UNTIL_THE_STREAM_ENDS if total is None else math.ceil(total / interval)
        return cls(epochs, interval, interval, total, bool(trainer.steps_per_epoch))

    def stream(self, train: tf.data.Dataset, epochs: int) -> tf.data.Dataset:
        """The whole run's training batches as one dataset, which the intervals read one
        after the other: `train` repeated `epochs` times (`trainer.epochs`); `train` itself
        when validation is at epoch ends."""
        if self.interval is None:
            return train
        if self.endless:
            return train.repeat().take(self.total_steps)
        return train.repeat(epochs)

    def stream_offset(self, first: int, skip_steps: int) -> int:
        """Batches of the stream trained before Keras epoch `first` and its `skip_steps`."""
        return first * (self.steps_per_epoch or 0) + skip_steps if self.interval else skip_steps


def check_interval(trainer: TrainerConfig, has_validation: bool) -> None:
    """Refuse `trainer.val_check_interval` for data without a validation split.

    Args:
        trainer: The run's `trainer` settings.
        has_validation: Whether the data has a validation split.

    Raises:
        TapefitError: one line saying what to change.

    Example:
        >>> check_interval(TrainerConfig(val_check_interval=None), has_validation=False)
    """
    if trainer.val_check_interval and not has_validation:
        raise TapefitError(
            "trainer.val_check_interval needs a validation split, and this data has none: "
            "give the loader one, or set trainer.val_check_interval=null"
        )


def _cardinality(dataset: tf.data.Dataset) -> int | None:
    cardinality = int(dataset.cardinality())
    return cardinality if cardinality >= 0 else None
