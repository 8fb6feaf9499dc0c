"""`run(cfg, run_dir)`: the single code path of every entry point (CLI, multirun, tuner, tests)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import keras

from tapefit.callbacks import build_callbacks
from tapefit.optimizers import build_optimizer
from tapefit.outputs import plot_curves, to_builtin, write_json
from tapefit.runtime import make_strategy, parse_jit_compile, seed_everything, set_precision
from tapefit.tasks import task_for


def build_and_compile(cfg: Any, data: Any) -> keras.Model:
    """Build the configured TapeModel and compile it, inside the configured strategy's scope."""
    task = task_for(cfg)
    with make_strategy(cfg.trainer.strategy.value).scope():
        model = task.model(cfg, data)
        model.compile(
            optimizer=build_optimizer(cfg.optimizer),
            steps_per_execution=cfg.trainer.steps_per_execution,
            jit_compile=parse_jit_compile(cfg.trainer.jit_compile),
            run_eagerly=cfg.trainer.run_eagerly,
            **task.compile_arguments(cfg),
        )
    return model


def save_model(model: keras.Model, path: Path) -> Path:
    """`model.save` through a temporary name, so a crash never leaves a broken model.keras."""
    temporary = path.with_name(f".{path.stem}.tmp.keras")
    model.save(temporary)
    os.replace(temporary, path)
    return path


def run(cfg: Any, run_dir: str | Path) -> dict[str, Any]:
    """Train and evaluate the configured experiment; write the run directory; return metrics.

    Returns a flat dict: `test_<metric>` for every test metric plus `wall_time_s` and
    `epochs_run`.
    """
    started = time.perf_counter()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    task = task_for(cfg)
    keras.backend.clear_session()  # sweeps run many jobs in one process
    seed_everything(cfg.seed, cfg.trainer.deterministic)
    set_precision(cfg.trainer.precision.value)
    data = task.datasets(cfg)
    model = build_and_compile(cfg, data)
    history = model.fit(
        data.train,
        validation_data=data.val,
        shuffle=False,  # the tf.data pipeline already reshuffles, from the seed
        epochs=cfg.trainer.epochs,
        steps_per_epoch=cfg.trainer.steps_per_epoch,
        validation_steps=cfg.trainer.validation_steps,
        callbacks=task.callbacks(cfg, data) + build_callbacks(cfg.callbacks, run_dir),
        verbose=cfg.trainer.verbose,
    )
    train_time = time.perf_counter() - started
    write_json(run_dir / "history.json", history.history)
    if history.history:
        plot_curves(history.history, run_dir / "curves.png")
    test = model.evaluate(data.test, verbose=0, return_dict=True)
    results = {f"test_{name}": value for name, value in test.items()}
    results.update(task.report(model, data, run_dir))
    if cfg.trainer.save_model:
        save_model(model, run_dir / "model.keras")
    results.update(
        epochs_run=len(history.epoch),
        train_time_s=train_time,
        wall_time_s=time.perf_counter() - started,
        samples=data.sizes,
    )
    results = to_builtin(results)
    write_json(run_dir / "metrics.json", results)
    return results
