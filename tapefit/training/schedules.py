"""Learning-rate schedules from the `scheduler` config group: warmup, then Keras' own decay.

Why: the recipes people train with (linear warmup then cosine decay, exponential or step
decay, a floor) should be one override (`scheduler=cosine scheduler.warmup_fraction=0.1`),
not Python. Each option of `conf/scheduler/` names one of the functions below by `_target_`;
tapefit supplies the optimizer's `learning_rate` (the peak), the run's `total_steps` and its
`steps_per_epoch`. The decay itself is Keras' (`CosineDecay`, `PolynomialDecay`,
`ExponentialDecay`, `PiecewiseConstantDecay`); `Warmup` adds the linear warmup in front and
the floor `min_lr` under it. A schedule is a function of the optimizer's step counter, which
the checkpoints carry, so a resumed run continues it exactly.

Steps are batches: Keras evaluates a schedule at the optimizer's call count, which under
`trainer.gradient_accumulation_steps` counts every accumulated batch.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops
from keras.optimizers.schedules import (
    CosineDecay,
    ExponentialDecay,
    LearningRateSchedule,
    PiecewiseConstantDecay,
    PolynomialDecay,
)

from tapefit.errors import TapefitError

SCHEDULE_ARGUMENTS = ("learning_rate", "total_steps", "steps_per_epoch")  # tapefit passes these
CONSTANT = "tapefit.training.schedules.constant"


@keras.saving.register_keras_serializable(package="tapefit")
class Warmup(LearningRateSchedule):
    """A linear warmup from `initial` to `peak` over `warmup_steps`, then `decay` (counted
    from the warmup's end), never below `floor`.

    Why: Keras' schedules decay but (except `CosineDecay`) do not warm up, and none keeps a
    floor under exponential decay; one small wrapper gives every decay both.

    Args:
        decay: The schedule after the warmup (a `LearningRateSchedule`), or a constant.
        warmup_steps: Steps of the warmup; 0: none.
        peak: The learning rate the warmup ends at.
        initial: The learning rate of step 0 of the warmup.
        floor: The smallest learning rate ever returned.

    Example:
        >>> schedule = Warmup(1.0, warmup_steps=4, peak=1.0)
        >>> [round(float(schedule(step)), 2) for step in range(6)]
        [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self,
        decay: LearningRateSchedule | float,
        warmup_steps: int,
        peak: float,
        initial: float = 0.0,
        floor: float = 0.0,
    ) -> None:
        self.decay = decay
        self.warmup_steps = int(warmup_steps)
        self.peak, self.initial, self.floor = float(peak), float(initial), float(floor)

    def __call__(self, step: Any) -> Any:
        step = ops.cast(step, "float32")
        after = ops.maximum(step - self.warmup_steps, 0.0)
        decayed = self.decay(after) if callable(self.decay) else ops.convert_to_tensor(self.decay)
        decayed = ops.maximum(ops.cast(decayed, "float32"), self.floor)
        if not self.warmup_steps:
            return decayed
        rising = self.initial + (self.peak - self.initial) * step / self.warmup_steps
        return ops.where(step < self.warmup_steps, rising, decayed)

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments, the decay serialised (a model.keras reloads it)."""
        decay = self.decay
        if isinstance(decay, LearningRateSchedule):
            decay = keras.saving.serialize_keras_object(decay)
        return {
            "decay": decay,
            "warmup_steps": self.warmup_steps,
            "peak": self.peak,
            "initial": self.initial,
            "floor": self.floor,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Warmup:
        """The schedule `get_config` describes."""
        config = dict(config)
        if isinstance(config["decay"], dict):
            config["decay"] = keras.saving.deserialize_keras_object(config["decay"])
        return cls(**config)


def warmup_length(total_steps: int | None, warmup_steps: int, warmup_fraction: float | None) -> int:
    """The warmup's steps: `warmup_fraction` of the run (rounded) when given, else
    `warmup_steps`; refused in one line when it leaves no step to decay over.

    Args:
        total_steps: The run's steps; None (an endless stream): only `warmup_steps` can say.
        warmup_steps: Steps of warmup asked for directly.
        warmup_fraction: Share of the run to warm up over, in [0, 1); overrides warmup_steps.

    Returns:
        The number of warmup steps.

    Raises:
        TapefitError: a fraction outside [0, 1), negative steps, or a warmup as long as the run.

    Example:
        >>> warmup_length(100, 0, 0.2)
        20
    """
    if warmup_fraction is not None:
        if not 0.0 <= warmup_fraction < 1.0:
            raise TapefitError(
                f"scheduler.warmup_fraction={warmup_fraction} must be in [0, 1): the share "
                "of the run's steps spent warming up"
            )
        warmup_steps = round(warmup_fraction * _needs_length(total_steps))
    if warmup_steps < 0:
        raise TapefitError(f"scheduler.warmup_steps={warmup_steps} must be >= 0")
    if warmup_steps and total_steps is not None and warmup_steps >= total_steps:
        raise TapefitError(
            f"scheduler.warmup_steps={warmup_steps} leaves no step to decay over in a run of "
            f"{total_steps} steps: lower it or use scheduler.warmup_fraction"
        )
    return warmup_steps


def _check_floor(min_lr: float, learning_rate: float) -> None:
    if not 0.0 <= min_lr <= learning_rate:
        raise TapefitError(
            f"scheduler.min_lr={min_lr} must be in [0, optimizer.learning_rate="
            f"{learning_rate}]: the floor the schedule decays to"
        )


def constant(
    learning_rate: float,
    total_steps: int | None,
    steps_per_epoch: int | None,
    warmup_steps: int = 0,
    warmup_fraction: float | None = None,
) -> float | LearningRateSchedule:
    """The optimizer's learning rate all run long, after an optional linear warmup.

    Args:
        learning_rate: The optimizer's `learning_rate` (supplied by tapefit).
        total_steps: The run's steps (supplied; unused without a warmup fraction).
        steps_per_epoch: Batches per epoch (supplied; unused).
        warmup_steps: Steps rising linearly from 0 to `learning_rate`; 0: none.
        warmup_fraction: The warmup as a share of the run instead, in [0, 1).

    Returns:
        `learning_rate` itself with no warmup (the optimizer is as if no schedule were
        configured), else a `Warmup`.

    Example:
        >>> constant(0.01, 100, 10)
        0.01
    """
    if not warmup_steps and not warmup_fraction:
        return learning_rate
    steps = warmup_length(total_steps, warmup_steps, warmup_fraction)
    return Warmup(learning_rate, steps, learning_rate)


def cosine(
    learning_rate: float,
    total_steps: int | None,
    steps_per_epoch: int | None,
    warmup_steps: int = 0,
    warmup_fraction: float | None = None,
    min_lr: float = 0.0,
) -> LearningRateSchedule:
    """Linear warmup to `learning_rate`, then half a cosine down to `min_lr` at the run's last step
    (Keras' `CosineDecay`).

    Args:
        learning_rate: The peak (the optimizer's `learning_rate`, supplied by tapefit).
        total_steps: The run's steps (supplied).
        steps_per_epoch: Batches per epoch (supplied; unused).
        warmup_steps: Steps of linear warmup from 0; 0: none.
        warmup_fraction: The warmup as a share of the run instead, in [0, 1).
        min_lr: The learning rate at the last step, in [0, learning_rate].

    Returns:
        The schedule.

    Example:
        >>> schedule = cosine(1.0, total_steps=11, steps_per_epoch=5, warmup_steps=2)
        >>> [round(float(schedule(s)), 2) for s in (0, 1, 2, 6, 10)]
        [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    return _warmup_then_decay(
        lambda steps: CosineDecay(learning_rate, steps, alpha=min_lr / learning_rate),
        learning_rate,
        total_steps,
        (warmup_steps, warmup_fraction),
        min_lr,
    )


def linear(
    learning_rate: float,
    total_steps: int | None,
    steps_per_epoch: int | None,
    warmup_steps: int = 0,
    warmup_fraction: float | None = None,
    min_lr: float = 0.0,
) -> LearningRateSchedule:
    """Linear warmup to `learning_rate`, then a straight line down to `min_lr` at the last
    step (Keras' `PolynomialDecay` of power 1).

    Args:
        learning_rate: The peak (the optimizer's `learning_rate`, supplied by tapefit).
        total_steps: The run's steps (supplied).
        steps_per_epoch: Batches per epoch (supplied; unused).
        warmup_steps: Steps of linear warmup from 0; 0: none.
        warmup_fraction: The warmup as a share of the run instead, in [0, 1).
        min_lr: The learning rate at the last step, in [0, learning_rate].

    Returns:
        The schedule.

    Example:
        >>> schedule = linear(1.0, total_steps=5, steps_per_epoch=2)
        >>> [round(float(schedule(s)), 2) for s in range(5)]
        [1.0, 0.75, 0.5, 0.25, 0.0]
    """
    return _warmup_then_decay(
        lambda steps: PolynomialDecay(learning_rate, steps, end_learning_rate=min_lr, power=1.0),
        learning_rate,
        total_steps,
        (warmup_steps, warmup_fraction),
        min_lr,
    )


def exponential(
    learning_rate: float,
    total_steps: int | None,
    steps_per_epoch: int | None,
    decay_rate: float = 0.9,
    staircase: bool = False,
    warmup_steps: int = 0,
    warmup_fraction: float | None = None,
    min_lr: float = 0.0,
) -> LearningRateSchedule:
    """Linear warmup, then the learning rate multiplied by `decay_rate` every epoch
    (smoothly, or at each epoch's end with `staircase`), never below `min_lr` (Keras'
    `ExponentialDecay`).

    Args:
        learning_rate: The peak (the optimizer's `learning_rate`, supplied by tapefit).
        total_steps: The run's steps (supplied; needed only for `warmup_fraction`).
        steps_per_epoch: Batches per epoch (supplied): the decay's period.
        decay_rate: The factor per epoch, in (0, 1].
        staircase: Decay in steps at epoch ends rather than continuously.
        warmup_steps: Steps of linear warmup from 0; 0: none.
        warmup_fraction: The warmup as a share of the run instead, in [0, 1).
        min_lr: The floor, in [0, learning_rate].

    Returns:
        The schedule.

    Example:
        >>> schedule = exponential(1.0, total_steps=30, steps_per_epoch=10, decay_rate=0.5)
        >>> [round(float(schedule(s)), 2) for s in (0, 10, 20)]
        [1.0, 0.5, 0.25]
    """
    if not 0.0 < decay_rate <= 1.0:
        raise TapefitError(
            f"scheduler.decay_rate={decay_rate} must be in (0, 1]: the factor per epoch"
        )
    period = _needs_length(steps_per_epoch, "steps per epoch")
    _check_floor(min_lr, learning_rate)
    warm = warmup_length(total_steps, warmup_steps, warmup_fraction)
    decay = ExponentialDecay(learning_rate, period, decay_rate, staircase=staircase)
    return Warmup(decay, warm, learning_rate, floor=min_lr)


def piecewise(
    learning_rate: float,
    total_steps: int | None,
    steps_per_epoch: int | None,
    milestones: tuple[float, ...] = (0.5, 0.75),
    factor: float = 0.1,
    warmup_steps: int = 0,
    warmup_fraction: float | None = None,
) -> LearningRateSchedule:
    """Step decay: the learning rate multiplied by `factor` at each milestone, a share of the
    run (torch's MultiStepLR; Keras' `PiecewiseConstantDecay`).

    Args:
        learning_rate: The first value (the optimizer's `learning_rate`, supplied by tapefit).
        total_steps: The run's steps (supplied).
        steps_per_epoch: Batches per epoch (supplied; unused).
        milestones: Increasing shares of the run in (0, 1) where the rate drops.
        factor: What each drop multiplies the rate by, in (0, 1].
        warmup_steps: Steps of linear warmup from 0; 0: none.
        warmup_fraction: The warmup as a share of the run instead, in [0, 1).

    Returns:
        The schedule.

    Example:
        >>> schedule = piecewise(1.0, total_steps=8, steps_per_epoch=4, milestones=[0.5])
        >>> [round(float(schedule(s)), 2) for s in (0, 4, 5)]
        [1.0, 1.0, 0.1]
    """
    total = _needs_length(total_steps)
    milestones = [float(m) for m in milestones]
    if not milestones or any(not 0 < m < 1 for m in milestones) or milestones != sorted(milestones):
        raise TapefitError(
            f"scheduler.milestones={milestones} must be increasing shares of the run in (0, 1), "
            "e.g. [0.5, 0.75]"
        )
    if not 0.0 < factor <= 1.0:
        raise TapefitError(
            f"scheduler.factor={factor} must be in (0, 1]: what each drop multiplies by"
        )
    warm = warmup_length(total, warmup_steps, warmup_fraction)
    boundaries = [max(round(m * total) - warm, 0) for m in milestones]
    values = [learning_rate * factor**k for k in range(len(milestones) + 1)]
    return Warmup(PiecewiseConstantDecay(boundaries, values), warm, learning_rate)


def _warmup_then_decay(
    decay_over: Any,
    learning_rate: float,
    total_steps: int | None,
    warmup: tuple[int, float | None],
    min_lr: float,
) -> LearningRateSchedule:
    """`Warmup` in front of `decay_over(steps)`, the decay reaching `min_lr` at the run's
    last step: what the decays to a floor (cosine, linear) share."""
    total = _needs_length(total_steps)
    _check_floor(min_lr, learning_rate)
    warm = warmup_length(total, *warmup)
    return Warmup(decay_over(_decay_steps(total, warm)), warm, learning_rate, floor=min_lr)


def _decay_steps(total: int, warm: int) -> int:
    """Steps from the warmup's end to the run's last step (0-based: `total - 1`), where the
    decay reaches its end value: the last update uses `min_lr`."""
    return max(total - 1 - warm, 1)


def _needs_length(steps: int | None, what: str = "total steps") -> int:
    if steps is None:
        raise TapefitError(
            f"this learning-rate schedule needs the run's {what}, which an endless training "
            "stream does not have: set trainer.steps_per_epoch, or scheduler=constant"
        )
    return int(steps)
