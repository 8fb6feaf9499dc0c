"""The number a run is judged by: which metric, and whether it is better higher or lower.

A validation metric by default (never a test metric unless named explicitly), taken from the
best epoch or the last. The direction decides which epoch is tested and saved, what
EarlyStopping and ReduceLROnPlateau wait for and which trial a search keeps, so it is never
guessed: `auto` resolves the names of Keras' metrics and losses and tapefit's own, and refuses
any other name in one line that says which key states it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tapefit.config.schemas import MonitorMode, ObjectiveMode
from tapefit.errors import TapefitError


def rank(value: float, direction: str) -> float:
    """`value` as a number where lower is better, for `direction` (`max` or `min`): sort or
    `min` by it to put the best first (ties then go by what the key adds, such as the epoch).

    Example:
        >>> sorted([0.5, 0.9, 0.7], key=lambda v: rank(v, "max"))
        [0.9, 0.7, 0.5]
    """
    return -value if direction == "max" else value


def worst_value(direction: str) -> float:
    """The value no run can do worse than in `direction`: what a failed run reports.

    Example:
        >>> worst_value("max"), worst_value("min")
        (-inf, inf)
    """
    return -math.inf if direction == "max" else math.inf


@dataclass(frozen=True)
class Objective:
    """The run's objective, resolved once: which metric, whether higher is better, and which
    epoch's value counts. Selection, callbacks, both tuners and the summaries read it here.

    Examples:
        >>> objective = Objective("val_accuracy", "max")
        >>> objective.value_in({"val_accuracy": [0.5, 0.9, 0.9]}, {})
        (0.9, 2)
        >>> objective.better(0.9, 0.5), objective.worst
        (True, -inf)
    """

    name: str
    direction: str  # "max" or "min"
    mode: str = ObjectiveMode.best.value  # the best epoch's value, or the last one's

    @property
    def worst(self) -> float:
        """The value no run can do worse than: what a failed run reports to a sweeper."""
        return worst_value(self.direction)

    def better(self, value: float, than: float) -> bool:
        """Whether `value` beats `than` (strictly: of equal values the first is kept)."""
        return rank(value, self.direction) < rank(than, self.direction)

    def rank(self, value: float) -> float:
        """`rank(value, direction)`: lower is better."""
        return rank(value, self.direction)

    def value_in(
        self, history: dict[str, list[float]], metrics: dict[str, Any]
    ) -> tuple[float, int | None]:
        """The objective's value and the (1-based) epoch it comes from (None for a test
        metric); of equal values, the first epoch's, as `BestEpochWeights` keeps them."""
        if self.name.startswith("test_"):
            return float(metrics[self.name]), None
        values = [math.nan if v is None else float(v) for v in history.get(self.name, [])]
        if not values:
            return math.nan, None
        if ObjectiveMode(self.mode) == ObjectiveMode.last:
            return values[-1], len(values)
        best: tuple[float, int] | None = None
        for index, value in enumerate(values):
            if math.isfinite(value) and (best is None or self.better(value, best[0])):
                best = (value, index)
        return (math.nan, None) if best is None else (best[0], best[1] + 1)


def check_objective(name: str, logged: set[str], test_metrics: set[str]) -> None:
    """The objective must be a metric the run logs (or, named explicitly, a test metric)."""
    if name not in logged and name not in test_metrics:
        raise TapefitError(
            f"objective={name} is never logged by this run: choose one of "
            f"{', '.join(sorted(logged))} (or a test metric: {', '.join(sorted(test_metrics))})"
        )


# Words of the metric names Keras and tapefit log, by direction.
HIGHER_IS_BETTER = {
    "accuracy", "acc", "auc", "precision", "recall", "f1", "fbeta", "iou", "io", "r2",
    "pearson", "spearman", "correlation", "similarity", "sensitivity", "specificity",
    "mrr", "ndcg",
}  # fmt: skip
LOWER_IS_BETTER = {
    "loss", "error", "crossentropy", "divergence", "hinge", "poisson", "mse", "mae",
    "rmse", "mape", "msle", "logcosh", "negatives", "positives",
}  # fmt: skip
HIGHER_NAMES = {"true_positives", "true_negatives"}  # counts that should grow


def metric_direction(name: str) -> str | None:
    """`max` or `min` for a metric Keras or tapefit logs (by the words of its name, after a
    `val_`/`test_` prefix and Keras' `_1` suffix), None when the name does not tell."""
    base = re.sub(r"_\d+$", "", name.removeprefix("val_").removeprefix("test_"))
    if base in HIGHER_NAMES:
        return "max"
    words = set(base.split("_"))
    higher, lower = bool(words & HIGHER_IS_BETTER), bool(words & LOWER_IS_BETTER)
    if higher == lower:  # neither, or both ("accuracy_loss"): not known
        return None
    return "max" if higher else "min"


def resolve_direction(name: str, configured: str, key: str) -> str:
    """`configured` (`min`/`max`), or for `auto` the direction of metric `name`.

    Args:
        name: the monitored metric as the logs name it (`val_accuracy`).
        configured: `auto`, `min` or `max` (or a `MonitorMode`).
        key: the config key that states it, for the error (`objective_direction`).

    Returns:
        `"min"` or `"max"`.

    Raises:
        TapefitError: `auto` for a name whose direction is not known.

    Examples:
        >>> resolve_direction("val_cosine_similarity", "auto", "objective_direction")
        'max'
        >>> resolve_direction("val_agreement", "max", "objective_direction")
        'max'
    """
    mode = MonitorMode(configured).value
    if mode != MonitorMode.auto.value:
        return mode
    direction = metric_direction(name)
    if direction is None:
        raise TapefitError(
            f"{key}=auto cannot tell whether {name} is better higher or lower: set {key}=max "
            f"or {key}=min"
        )
    return direction
