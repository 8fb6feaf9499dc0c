"""Run-directory artefacts: history.json, metrics.json, curves.png and model_summary.txt,
written atomically."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from tapefit.errors import UnsaveableModelError
from tapefit.files import atomic_path, atomic_write, write_png
from tapefit.step.rebuild_check import check_rebuildable
from tapefit.step.tape_model import TapeModel


def save_model(model: Any, path: Path) -> Path:
    """`model.save` through a temporary `.keras` name, so a crash never leaves a broken file;
    a model whose config would not rebuild it is a one-line error, and nothing is written.
    The rebuild check runs once per save: a TapeModel's own `save` makes it, any other model
    is checked here."""
    if not isinstance(model, TapeModel):
        check_saveable(model)
    try:
        with atomic_path(path, suffix=".keras") as temporary:
            model.save(temporary)
    except UnsaveableModelError as error:
        raise UnsaveableModelError(f"{error}, or set trainer.save_model=false") from None
    return path


def check_saveable(model: Any) -> None:
    """Refuse a model whose `.keras` file would not load again (see `check_rebuildable`),
    naming the setting that skips saving."""
    try:
        check_rebuildable(model)
    except UnsaveableModelError as error:
        raise UnsaveableModelError(f"{error}, or set trainer.save_model=false") from None


def weights_digest(model: Any) -> str:
    """A short SHA-256 of every weight's bytes: equal digests mean identical models (multi-worker
    runs log it on every worker, so a user can see that they agree)."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()[:16]


def curve_panels(history: dict[str, list[float]]) -> list[tuple[str, list[str]]]:
    """(title, series) per panel: every logged metric with its `val_` counterpart, a validation
    metric without a training one (the Siamese `val_spearman`) on its own, and the learning
    rate or skipped steps only when they changed."""
    panels: dict[str, list[str]] = {}
    for key in history:
        name = key.removeprefix("val_")
        panels.setdefault(name, [])
        panels[name].append(key)
    changing = {k for k, v in history.items() if len({x for x in v if x is not None}) > 1}
    quiet = ("learning_rate", "skipped_steps")
    return [
        (name, sorted(keys, key=lambda k: k.startswith("val_")))
        for name, keys in panels.items()
        if name not in quiet or set(keys) & changing
    ]


# Panel and margin sizes in inches: the layout is fixed rather than measured (a tight layout
# draws the figure once more, about a third of the time a run spends on curves.png).
PANEL_INCHES = (4.5, 3.4)
MARGIN_INCHES = {"left": 0.75, "right": 0.15, "bottom": 0.5, "top": 0.35}
GAP_INCHES = {"wspace": 0.85, "hspace": 0.85}


def curves_figure(
    history: dict[str, list[float]],
    objective: str | None = None,
    best_epoch: int | None = None,
    tested_epoch: int | None = None,
) -> Any:
    """The figure of `curve_panels`, epochs numbered from 0 as History, `history.csv` and
    TensorBoard number them. The epoch whose weights were tested (`tested_epoch`, counted from
    1 as in metrics.json; default `best_epoch`) is a dashed line on every panel, and the
    objective's best value (`best_epoch`, as `objective_epoch`) a star on its own panel.

    A `matplotlib.figure.Figure` outside pyplot (nothing to close; safe beside a user's own
    pyplot figures), each panel 4.5 x 3.4 inches with fixed margins.

    Examples:
        >>> figure = curves_figure({"loss": [0.9, 0.5], "val_loss": [1.0, 0.7]}, "val_loss", 2)
        >>> [axis.get_title() for axis in figure.axes], figure.get_size_inches().tolist()
        (['loss'], [4.5, 3.4])
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    panels = curve_panels(history)
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    width, height = PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(rows, columns, squeeze=False)
    panel_width = (width - MARGIN_INCHES["left"] - MARGIN_INCHES["right"]) / columns
    panel_height = (height - MARGIN_INCHES["bottom"] - MARGIN_INCHES["top"]) / rows
    figure.subplots_adjust(
        left=MARGIN_INCHES["left"] / width,
        right=1 - MARGIN_INCHES["right"] / width,
        bottom=MARGIN_INCHES["bottom"] / height,
        top=1 - MARGIN_INCHES["top"] / height,
        wspace=GAP_INCHES["wspace"] / (panel_width - GAP_INCHES["wspace"]),
        hspace=GAP_INCHES["hspace"] / (panel_height - GAP_INCHES["hspace"]),
    )
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (name, series) in zip(axes.flat, panels, strict=False):
        for key in series:
            values = [math.nan if v is None else v for v in history[key]]
            label = "validation" if key.startswith("val_") else "train"
            color = "C1" if label == "validation" else "C0"  # the same colours on every panel
            axis.plot(np.arange(len(values)), values, "o-", markersize=3, color=color, label=label)
        tested = tested_epoch or best_epoch
        if tested is not None:
            axis.axvline(
                tested - 1,
                color="grey",
                linestyle="--",
                linewidth=1,
                label=f"tested weights (tested_epoch {tested})",
            )
        if best_epoch is not None and objective in series:
            axis.plot(
                [best_epoch - 1],
                [history[objective][best_epoch - 1]],
                marker="*",
                markersize=12,
                color="black",
                linestyle="none",
                label=f"best {objective} (objective_epoch {best_epoch})",
            )
        axis.set_title(name, y=1.0)  # a fixed place: no layout pass to find one
        axis.set_xlabel("epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    return figure


def plot_curves(
    history: dict[str, list[float]],
    path: Path,
    objective: str | None = None,
    best_epoch: int | None = None,
    tested_epoch: int | None = None,
) -> Path:
    """Write `curves_figure` to `path` (PNG), atomically."""
    return write_png(curves_figure(history, objective, best_epoch, tested_epoch), path)


def write_model_summary(model: Any, path: Path) -> dict[str, int]:
    """Keras' `model.summary()` as text in `path` (atomically); return the parameter counts.

    Args:
        model: A built Keras model.
        path: Where the summary goes (`<run dir>/model_summary.txt`).

    Returns:
        `{"params_total": ..., "params_trainable": ...}`, counted over the model's weights.
    """
    lines: list[str] = []
    model.summary(print_fn=lambda line, *args, **kwargs: lines.append(line), line_length=100)
    atomic_write(path, lambda file: file.write("\n".join(lines) + "\n"))
    return {
        "params_total": int(sum(np.prod(w.shape) for w in model.weights)),
        "params_trainable": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
    }
