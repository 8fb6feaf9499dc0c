"""Whether a metric is better higher or lower: stated in the config, or known from the metric.

The direction decides which epoch is tested and saved, what EarlyStopping and
ReduceLROnPlateau wait for and which trial a search keeps, so it is never guessed: `auto`
resolves the names of Keras' metrics and losses and tapefit's own, and refuses any other name
in one line that says which key states it.
"""

from __future__ import annotations

import re

from tapefit.config.schemas import MonitorMode
from tapefit.errors import TapefitError

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
