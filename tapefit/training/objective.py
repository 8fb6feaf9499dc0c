"""The number a sweep optimises: a validation metric by default (never a test metric unless
named explicitly), taken from the best epoch or the last."""

from __future__ import annotations

import math
from typing import Any

from tapefit.config.schemas import ObjectiveMode
from tapefit.errors import TapefitError
from tapefit.training.direction import resolve_direction


def objective_name(cfg: Any, default: str) -> str:
    """`cfg.objective`, or the family's `default` when it is null."""
    return cfg.objective or default


def objective_direction(cfg: Any, name: str) -> str:
    """`max` or `min`: `cfg.objective_direction`, or for `auto` the known direction of metric
    `name` (refused in one line when it is not known)."""
    return resolve_direction(name, cfg.get("objective_direction", "auto"), "objective_direction")


def check_objective(name: str, logged: set[str], test_metrics: set[str]) -> None:
    """The objective must be a metric the run logs (or, named explicitly, a test metric)."""
    if name not in logged and name not in test_metrics:
        raise TapefitError(
            f"objective={name} is never logged by this run: choose one of "
            f"{', '.join(sorted(logged))} (or a test metric: {', '.join(sorted(test_metrics))})"
        )


def objective_value(
    name: str,
    mode: str,
    direction: str,
    history: dict[str, list[float]],
    metrics: dict[str, Any],
) -> tuple[float, int | None]:
    """The objective's value and the (1-based) epoch it comes from (None for a test metric);
    of equal values, the first epoch's, as `BestEpochWeights` keeps them."""
    if name.startswith("test_"):
        return float(metrics[name]), None
    values = [math.nan if v is None else float(v) for v in history.get(name, [])]
    if not values:
        return math.nan, None
    if ObjectiveMode(mode) == ObjectiveMode.last:
        return values[-1], len(values)
    finite = [(v, i) for i, v in enumerate(values) if math.isfinite(v)]
    if not finite:
        return math.nan, None
    sign = -1.0 if direction == "max" else 1.0
    value, index = min(finite, key=lambda pair: (sign * pair[0], pair[1]))  # first best epoch
    return value, index + 1
