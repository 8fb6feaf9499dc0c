"""The last phase of a run: evaluate the selected model on the test split and write history,
curves, the serving export, `model.keras` and `metrics.json` into the run directory."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from tapefit.errors import TapefitError
from tapefit.files import to_builtin, write_json
from tapefit.protocols import hook
from tapefit.runner.preparation import BuiltModel
from tapefit.runner.spec import RunSpec
from tapefit.training.debugging import overfit_verdict
from tapefit.training.run_files import (
    plot_curves,
    save_model,
    weights_digest,
    write_model_summary,
)
from tapefit.training.run_status import METRICS_FILE

log = logging.getLogger("tapefit")


def finalize(
    spec: RunSpec,
    built: BuiltModel,
    data: Any,
    history: dict[str, list[float]],
    run_dir: Path,
    timings: dict[str, float],
    tested: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate on the test split, write history, curves, model and metrics; return metrics.
    `built`: the run's model with the endpoints its export serves; `tested` says whose weights
    the model holds (`use_selected_weights`; default: the last).

    `model.keras` and `metrics.json` come last: only a run that got this far has them.
    """
    model = built.model
    write_json(run_dir / "history.json", history)
    test = {} if data.test is None else model.evaluate(data.test, verbose=0, return_dict=True)
    results = {f"test_{name}": value for name, value in test.items()}
    report = hook(model, "report")
    if report is not None:
        results.update(report(data, run_dir))
    check_finite_metrics(results)
    objective = spec.objective
    name = objective.name
    value, epoch = objective.value_in(history, results)
    results.update(
        objective=name,
        objective_direction=objective.direction,
        objective_value=value,
        objective_epoch=epoch,
        epochs_run=len(next(iter(history.values()), [])),
        **(tested or {"tested_weights": "last"}),
        train_time_s=timings["train_time_s"],
        wall_time_s=time.perf_counter() - timings["started"],
        samples=data.sizes,
        **write_model_summary(model, run_dir / "model_summary.txt"),
    )
    results.setdefault("tested_epoch", results["epochs_run"] or None)
    results.update(overfit_verdict(spec.debug, history))  # debug=overfit: did the loss fall enough?
    if history:
        plot_curves(history, run_dir / "curves.png", name, epoch, results["tested_epoch"])
    results = to_builtin(results)
    trainer = spec.trainer
    if trainer.strategy == "multi_worker":
        log.info("final weights digest: %s (the same on every worker)", weights_digest(model))
        if "train_rows_read" in results:
            log.info("this worker read %d training rows", results["train_rows_read"])
    if trainer.export:  # a SavedModel (and trainer.export_formats), checked against the model
        from tapefit.training.export import EXPORT_DIR, export_for_serving, first_batch

        formats, tolerance = trainer.export_formats, trainer.export_tolerance
        batch = first_batch(data)
        export_for_serving(model, run_dir / EXPORT_DIR, formats, batch, tolerance, built.endpoints)
        results["export"] = EXPORT_DIR
    if trainer.save_model:
        save_model(model, run_dir / "model.keras")
    write_json(run_dir / METRICS_FILE, results)
    return results


def check_finite_metrics(results: dict[str, Any]) -> None:
    """A run whose test metrics are NaN/inf has diverged: it fails instead of reporting them."""
    bad = [k for k, v in results.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        raise TapefitError(
            f"the trained model gives non-finite {', '.join(sorted(bad))}: training diverged; "
            "lower the learning rate or check the data"
        )
