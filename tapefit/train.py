"""`run(cfg, run_dir)`: the code path of every entry point (CLI, Hydra multirun, notebooks,
tests), written as named phases that other entry points (a tuner trial, a resumed run) reuse:

    prepare -> build_data -> build_model -> fit -> finalize
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from tapefit.callbacks import build_callbacks
from tapefit.optimizers import build_optimizer
from tapefit.outputs import plot_curves, save_model, to_builtin, write_json
from tapefit.runtime import jit_compile_argument, make_strategy, seed_everything, set_precision
from tapefit.step_monitor import NonFiniteGuard
from tapefit.tasks import task_for


def step_policies(cfg: Any) -> dict[str, Any]:
    """TapeModel.compile's step options from `cfg.trainer` and `cfg.callbacks.step_telemetry`."""
    telemetry = cfg.callbacks.step_telemetry
    return {
        "on_nonfinite": cfg.trainer.on_nonfinite,
        "on_missing_gradients": cfg.trainer.on_missing_gradients,
        "allow_missing_gradients": list(cfg.trainer.allow_missing_gradients),
        "gradient_telemetry": (
            "off" if not telemetry.enabled else "histograms" if telemetry.histograms else "norm"
        ),
    }


def prepare(cfg: Any) -> tf.distribute.Strategy:
    """Reset Keras' global state, seed everything, set the dtype policy; return the strategy.

    Run it before every model that is built in the same process (sweeps, tuner trials):
    `clear_session` resets the dtype policy and the seed, so both are set after it.
    """
    task_for(cfg)  # an unknown family or a dataset it does not take fails before any work
    keras.backend.clear_session()
    seed_everything(cfg.seed, cfg.trainer.deterministic)
    set_precision(cfg.trainer.precision)
    return make_strategy(cfg.trainer.strategy)


def build_data(cfg: Any) -> Any:
    """The family's train/val/test data for `cfg.data`."""
    return task_for(cfg).build_data(cfg)


def build_model(cfg: Any, data: Any, strategy: tf.distribute.Strategy) -> keras.Model:
    """Build the configured TapeModel and compile it, inside `strategy`'s scope."""
    task = task_for(cfg)
    with strategy.scope():
        model = task.model(cfg, data)
        model.compile(
            optimizer=build_optimizer(cfg.optimizer, cfg.trainer.gradient_accumulation_steps),
            steps_per_execution=cfg.trainer.steps_per_execution,
            jit_compile=jit_compile_argument(cfg.trainer.jit_compile),
            run_eagerly=cfg.trainer.run_eagerly,
            **step_policies(cfg),
            **task.compile_arguments(cfg, data),
        )
    return model


def fit(
    cfg: Any,
    model: keras.Model,
    data: Any,
    run_dir: Path,
    extra_callbacks: list[keras.callbacks.Callback] | None = None,
) -> keras.callbacks.History:
    """`model.fit` on the data with the family's callbacks, the configured ones and `extra`."""
    callbacks = task_for(cfg).callbacks(cfg, data) + build_callbacks(cfg.callbacks, run_dir)
    if cfg.trainer.on_nonfinite != "ignore":
        callbacks.insert(0, NonFiniteGuard())
    return model.fit(
        data.train,
        validation_data=data.val,
        shuffle=False,  # the tf.data pipeline already reshuffles, from the seed
        epochs=cfg.trainer.epochs,
        steps_per_epoch=cfg.trainer.steps_per_epoch,
        validation_steps=cfg.trainer.validation_steps,
        callbacks=callbacks + list(extra_callbacks or []),
        verbose=cfg.trainer.verbose,
    )


def finalize(
    cfg: Any,
    model: keras.Model,
    data: Any,
    history: keras.callbacks.History,
    run_dir: Path,
    timings: dict[str, float],
) -> dict[str, Any]:
    """Evaluate on the test split, write history, curves, model and metrics; return metrics."""
    write_json(run_dir / "history.json", history.history)
    if history.history:
        plot_curves(history.history, run_dir / "curves.png")
    test = model.evaluate(data.test, verbose=0, return_dict=True)
    results = {f"test_{name}": value for name, value in test.items()}
    results.update(task_for(cfg).report(model, data, run_dir))
    if cfg.trainer.save_model:
        save_model(model, run_dir / "model.keras")
    results.update(
        epochs_run=len(history.epoch),
        train_time_s=timings["train_time_s"],
        wall_time_s=time.perf_counter() - timings["started"],
        samples=data.sizes,
    )
    results = to_builtin(results)
    write_json(run_dir / "metrics.json", results)
    return results


def run(cfg: Any, run_dir: str | Path) -> dict[str, Any]:
    """Train and evaluate the configured experiment; write the run directory; return metrics.

    Returns a flat dict: `test_<metric>` for every test metric plus `epochs_run`,
    `train_time_s`, `wall_time_s` and the split `samples`.
    """
    started = time.perf_counter()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    strategy = prepare(cfg)
    data = build_data(cfg)
    model = build_model(cfg, data, strategy)
    history = fit(cfg, model, data, run_dir)
    timings = {"started": started, "train_time_s": time.perf_counter() - started}
    return finalize(cfg, model, data, history, run_dir, timings)
