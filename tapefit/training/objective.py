"""The number a sweep optimises: a validation metric by default (never a test metric unless
named explicitly), taken from the best epoch or the last."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tapefit.config.schemas import ObjectiveMode
from tapefit.errors import TapefitError


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
        return -math.inf if self.direction == "max" else math.inf

    def better(self, value: float, than: float) -> bool:
        """Whether `value` beats `than` (strictly: of equal values the first is kept)."""
        return value > than if self.direction == "max" else value < than

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
