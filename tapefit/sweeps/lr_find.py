"""`tune=lr_find`: the learning-rate range test (Smith, "Cyclical Learning Rates", 2017).

Why: the learning rate is the one setting most runs get wrong first. The range test trains a
fresh copy of the configured model for a few dozen steps while the learning rate grows
exponentially, and reads the loss: it falls where the rate is useful and blows up where it is
too high. As in Lightning's `lr_find`, the suggestion is where the smoothed loss falls
fastest. Nothing of a run is touched: no checkpoint, no `model.keras`;
`lr_find.csv`, `lr_find.png` and `lr_find.json` are written to the run directory.
"""

from __future__ import annotations

import copy
import logging
import math
from pathlib import Path
from typing import Any

import keras
import numpy as np
from omegaconf import DictConfig

from tapefit.config.schemas import LrFindConfig
from tapefit.config.typed import typed
from tapefit.errors import TapefitError
from tapefit.files import write_json, write_png
from tapefit.runner.data_from_config import load_checked_data
from tapefit.runner.optimizer_checks import optimizer_nodes
from tapefit.runner.preparation import build_model, prepare
from tapefit.runner.spec import RunSpec

log = logging.getLogger("tapefit")


class RangeTest(keras.callbacks.Callback):
    """Sets the learning rate of step i to `min_lr * (max_lr / min_lr) ** (i / (steps - 1))`,
    records each step's own loss and its bias-corrected moving average, and stops once the
    average exceeds `diverge_factor` times its best (or is not finite).

    Args:
        min_lr: The first step's learning rate.
        max_lr: The last step's learning rate.
        steps: Steps of the test.
        smoothing: The moving average's factor.
        diverge_factor: How far above its best the smoothed loss may go.
    """

    def __init__(
        self, min_lr: float, max_lr: float, steps: int, smoothing: float, diverge_factor: float
    ) -> None:
        super().__init__()
        self.rates = min_lr * (max_lr / min_lr) ** (np.arange(steps) / max(steps - 1, 1))
        self.smoothing, self.diverge_factor = smoothing, diverge_factor
        self.losses: list[float] = []
        self.smoothed: list[float] = []
        self.average = 0.0

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self.model.reset_metrics()  # the logged loss is then this step's own, not a mean
        self.model.optimizer.learning_rate = float(self.rates[len(self.losses)])

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        loss = float((logs or {}).get("loss", math.nan))
        self.losses.append(loss)
        self.average = self.smoothing * self.average + (1 - self.smoothing) * loss
        smoothed = self.average / (1 - self.smoothing ** len(self.losses))
        self.smoothed.append(smoothed)
        best = min(self.smoothed)
        if (
            not math.isfinite(smoothed)
            or smoothed > self.diverge_factor * best
            or len(self.losses) == len(self.rates)
        ):
            self.model.stop_training = True


def suggestion(rates: np.ndarray, smoothed: list[float]) -> float:
    """The suggested learning rate: where the smoothed loss falls fastest against the log of
    the rate (Lightning's and fastai's "steepest" point), between the first tenth of the
    steps and the lowest loss (the divergence after it is left out).

    Args:
        rates: The learning rate of each step.
        smoothed: The smoothed loss of each step run (possibly fewer than `rates`).

    Returns:
        The suggestion.

    Raises:
        TapefitError: fewer than three steps gave a finite loss.

    Example:
        >>> rates = np.array([1e-5, 1e-4, 1e-3, 1e-2, 1e-1])
        >>> float(suggestion(rates, [2.0, 1.9, 1.0, 0.8, 3.0]))
        0.001
    """
    values = np.array(smoothed, dtype=float)
    finite = np.isfinite(values)
    if finite.sum() < 3:
        raise TapefitError(
            "tune=lr_find: fewer than 3 steps gave a finite loss: lower tune.lr_find.min_lr, "
            "raise tune.lr_find.steps or check the data"
        )
    lowest = int(np.nanargmin(np.where(finite, values, np.nan)))
    start = min(len(values) // 10, max(lowest - 2, 0))
    window = slice(start, max(lowest + 1, start + 3))
    slopes = np.gradient(values[window], np.log10(rates[: len(values)][window]))
    return float(rates[start + int(np.nanargmin(slopes))])


def check_settings(settings: LrFindConfig) -> None:
    """Refuse range-test settings that cannot run, in one line.

    Example:
        >>> check_settings(LrFindConfig(steps=3))
        Traceback (most recent call last):
        tapefit.errors.TapefitError: tune.lr_find.steps=3 must be at least 5
    """
    if not 0 < settings.min_lr < settings.max_lr:
        raise TapefitError(
            f"tune.lr_find.min_lr={settings.min_lr} and max_lr={settings.max_lr}: need "
            "0 < min_lr < max_lr"
        )
    if settings.steps < 5:
        raise TapefitError(f"tune.lr_find.steps={settings.steps} must be at least 5")
    if not 0 <= settings.smoothing < 1:
        raise TapefitError(f"tune.lr_find.smoothing={settings.smoothing} must be in [0, 1)")
    if settings.diverge_factor <= 1:
        raise TapefitError(f"tune.lr_find.diverge_factor={settings.diverge_factor} must be > 1")


def find(cfg: DictConfig, run_dir: str | Path) -> dict[str, Any]:
    """Run the range test on the configured model and data; write its files to `run_dir`.

    Args:
        cfg: The composed config with `tune=lr_find` (`tune.lr_find` holds the settings).
        run_dir: Where `lr_find.csv`, `lr_find.png` and `lr_find.json` go.

    Returns:
        `suggested_lr`, `min_loss_lr`, the steps run and the override to paste.

    Raises:
        TapefitError: bad settings, or a loss that is never finite.

    Example:
        >>> import tapefit
        >>> cfg = tapefit.compose(["tune=lr_find", "tune.lr_find.steps=20"])
        >>> find(cfg, "outputs/lr")["steps_run"] <= 20  # doctest: +SKIP
        True
    """
    from tapefit.runner.validation import check_config

    settings = typed(LrFindConfig, cfg.tune.lr_find)  # the edge: below it, typed settings
    check_settings(settings)
    keys = list(optimizer_nodes(cfg))
    test_cfg = copy.deepcopy(cfg)
    test_cfg.scheduler = None  # the test sets the rate itself, step by step
    test_cfg.trainer.steps_per_execution = 1  # so that it can, every step
    spec = RunSpec.of(test_cfg, located=check_config(test_cfg))
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    strategy = prepare(test_cfg.seed, spec.trainer)
    data = load_checked_data(test_cfg.data, test_cfg.seed)
    model = build_model(spec, data, strategy)
    test = RangeTest(
        settings.min_lr,
        settings.max_lr,
        settings.steps,
        settings.smoothing,
        settings.diverge_factor,
    )
    model.fit(
        data.train.repeat(),
        steps_per_epoch=settings.steps,
        epochs=1,
        callbacks=[test],
        verbose=0,
    )
    suggested = suggestion(test.rates, test.smoothed)
    steps = len(test.losses)
    rows = np.column_stack(
        [np.arange(1, steps + 1), test.rates[:steps], test.losses, test.smoothed]
    )
    np.savetxt(
        run_dir / "lr_find.csv",
        rows,
        delimiter=",",
        header="step,learning_rate,loss,smoothed_loss",
        comments="",
        fmt=["%d", "%.6g", "%.6g", "%.6g"],
    )
    plot(test.rates[:steps], test.smoothed, suggested, run_dir / "lr_find.png")
    summary = {
        "suggested_lr": suggested,
        "min_loss_lr": float(test.rates[int(np.nanargmin(test.smoothed))]),
        "steps_run": steps,
        "override": " ".join(f"{key}.learning_rate={suggested:.3g}" for key in keys),
    }
    write_json(run_dir / "lr_find.json", summary)
    log.info(
        "lr_find: suggested learning rate %.3g (lowest smoothed loss at %.3g, after %d steps); "
        "train with %s",
        suggested,
        summary["min_loss_lr"],
        steps,
        summary["override"],
    )
    return summary


def plot(rates: np.ndarray, smoothed: list[float], suggested: float, path: Path) -> None:
    """The smoothed loss over the learning rate (log scale), the suggestion marked (a
    `matplotlib.figure.Figure` outside pyplot, written atomically)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4), layout="tight")
    axes = figure.subplots()
    axes.plot(rates, smoothed)
    axes.axvline(suggested, color="tab:red", linestyle="--", label=f"suggested {suggested:.3g}")
    axes.set(xscale="log", xlabel="learning rate", ylabel="smoothed training loss")
    finite = [v for v in smoothed if math.isfinite(v)]
    if finite:  # the divergence at the end would flatten the rest
        axes.set_ylim(min(finite) * 0.9, min(max(finite), 3 * finite[0]) * 1.1)
    axes.legend()
    axes.set_title("Learning-rate range test")
    write_png(figure, path)
