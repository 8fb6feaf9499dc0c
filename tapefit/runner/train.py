"""`run(cfg, run_dir)`: the code path of every entry point (CLI, Hydra multirun, notebooks,
tests), written as named phases that other entry points (a tuner trial, a resumed run) reuse:

    prepare -> build_data -> build_model -> fit -> finalize
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from tapefit.config.targets import has_target
from tapefit.errors import TapefitError
from tapefit.families import family_for, objective_of
from tapefit.runner.finish import finalize
from tapefit.runner.validation import check_config, check_logged_names, checked_objective
from tapefit.step.monitor import NonFiniteGuard
from tapefit.training.building import (
    build_before_training,
    build_step_variables,
    check_epoch_lengths,
)
from tapefit.training.callback_state import CarryCallbackStates
from tapefit.training.callback_state import apply as apply_callback_states
from tapefit.training.callbacks import EpochLog, StepProgbar, build_callbacks
from tapefit.training.checkpoints import (
    EpochCheckpoint,
    RestoreMetrics,
    build_optimizers,
    restore_latest,
)
from tapefit.training.compiling import compile_model
from tapefit.training.fitting import Fitting, Segment, replay_shuffles
from tapefit.training.hparams import RunSession, config_hyperparameters
from tapefit.training.lifecycle import (
    CHECKPOINTS,
    RunInterrupted,
    StopOnSignal,
    claim,
    interruptible,
    record_end,
    scratch_run_dir,
    write_status,
)
from tapefit.training.outputs import (
    check_saveable,
)
from tapefit.training.resume import (
    check_same_config,
    config_snapshot,
    fill_tensorboard,
    history_lists,
    rewrite_csv,
)
from tapefit.training.runtime import (
    lost_worker_error,
    make_strategy,
    released_custom_gradients,
    seed_everything,
    set_precision,
    shard_options,
    worker_position,
    writes_run_dir,
)
from tapefit.training.selection import selector, use_selected_weights

log = logging.getLogger("tapefit")


def prepare(cfg: Any) -> tf.distribute.Strategy:
    """Reset Keras' global state, seed everything, set the dtype policy; return the strategy.

    Run it before every model that is built in the same process (sweeps, tuner trials):
    `clear_session` resets the dtype policy and the seed, so both are set after it.
    """
    family_for(cfg)  # an unknown family or a dataset it does not take fails before any work
    keras.backend.clear_session()
    seed_everything(cfg.seed, cfg.trainer.deterministic)
    set_precision(cfg.trainer.precision)
    return make_strategy(cfg.trainer.strategy, cfg.trainer.devices)


def build_data(cfg: Any) -> Any:
    """The family's train/val/test data for `cfg.data`."""
    return family_for(cfg).build_data(cfg)


def sharded(data: Any, policy: str, strategy: tf.distribute.Strategy) -> Any:
    """`data` whose splits are divided among the workers by `policy` (trainer.shard_policy).
    `file`: this worker's training stream reads only its own files (no further split), and
    the held-out splits are split by element."""
    options = {name: shard_options(policy) for name in ("train", "val", "test")}
    if policy == "file":
        workers, index = worker_position(strategy)
        data = data.sharded_by_file(workers, index)
        log.info("this worker reads %d training files: %s", len(data.train_files), data.train_files)
        options = {"train": shard_options("off"), "val": shard_options("data")}
        options["test"] = options["val"]
    return dataclasses.replace(
        data,
        **{
            name: None if getattr(data, name) is None else getattr(data, name).with_options(option)
            for name, option in options.items()
        },
    )


def build_model(cfg: Any, data: Any, strategy: tf.distribute.Strategy) -> keras.Model:
    """Build the configured TapeModel and compile it, inside `strategy`'s scope; a `_target_`
    model is also built from the data's element spec and checked before training."""
    family = family_for(cfg)
    with strategy.scope():
        model = family.model(cfg, data)
        compile_model(model, cfg, family.compile_arguments(cfg, data))
        if has_target(cfg.model):
            build_before_training(model, data.train, f"model._target_={cfg.model._target_}")
        build_step_variables(model, data.train)
    if cfg.trainer.save_model:
        check_saveable(model)  # refused now, not after training
    check_logged_names(cfg, model, validation=data.val is not None)
    return model


def assemble_callbacks(
    cfg: Any, data: Any, run_dir: Path, before_writers: list, append: bool
) -> list[keras.callbacks.Callback]:
    """The run's callbacks in their order: the family's first (they add to the epoch logs),
    then the configured ones with `before_writers` (checkpoints, which must precede the
    writers) ahead of those that write the logs (the CSV appended to when `append`), the
    progress bar and the epoch's log line last."""
    callbacks = family_for(cfg).callbacks(cfg, data)
    if cfg.trainer.on_nonfinite != "ignore":
        callbacks.insert(0, NonFiniteGuard())
    callbacks += build_callbacks(
        cfg.callbacks,
        run_dir,
        before_writers=before_writers,
        append=append,
        objective=objective_of(cfg),
    )
    if cfg.trainer.verbose:  # before the epoch's log line, so the bar ends its line first
        callbacks.append(StepProgbar())
    callbacks.append(EpochLog())
    for callback in callbacks:  # those that save or carry the others' state
        if hasattr(callback, "use_callbacks"):
            callback.use_callbacks(callbacks)
    return callbacks


def train(
    cfg: Any,
    run_dir: Path,
    callbacks: list | None,
    stopper: StopOnSignal,
    load_data: Callable[[Any], Any] | None = None,
    warm_start: tuple[Path, int] | None = None,
    session: RunSession | None = None,
) -> dict:
    """The phases, resuming from the run directory's last checkpoint when asked, or continuing
    from `warm_start` = (saved model, epochs it trained) (Hyperband's later rounds); the run's
    HParams `session` starts once the strategy exists."""
    started = time.perf_counter()
    check_config(cfg)
    checked_objective(cfg)
    strategy = prepare(cfg)
    if session is not None:
        session.start()
    data = (load_data or build_data)(cfg)
    if cfg.trainer.strategy == "multi_worker":
        data = sharded(data, cfg.trainer.shard_policy, strategy)
    try:
        return train_on(cfg, data, run_dir, callbacks, stopper, strategy, warm_start, started)
    except tf.errors.OpError as error:
        explained = data_error(data, error)
        if explained is None:
            raise
    raise explained


def data_error(data: Any, error: Exception) -> TapefitError | None:
    """The data's own one-line account of a failure inside its pipeline (a file that does not
    decode), if it has one (`data.diagnose`)."""
    diagnose = getattr(data, "diagnose", None)
    return diagnose(error) if diagnose is not None else None


def train_on(
    cfg: Any,
    data: Any,
    run_dir: Path,
    callbacks: list | None,
    stopper: StopOnSignal,
    strategy: tf.distribute.Strategy,
    warm_start: tuple[Path, int] | None,
    started: float,
) -> dict:
    """`train` once the data are loaded: build, restore, fit, finalize."""
    check_epoch_lengths(data, cfg.trainer.steps_per_epoch, cfg.trainer.validation_steps)
    model = build_model(cfg, data, strategy)
    checkpoints = run_dir / CHECKPOINTS
    done, steps_in, epochs, metric_states = 0, 0, [], None
    callback_states: tuple[dict, dict] = ({}, {})
    if warm_start is not None:
        with strategy.scope():  # the optimizers' variables belong to the strategy
            build_optimizers(model)
            model.load_weights(warm_start[0])
        done = warm_start[1]
    if cfg.resume:
        with strategy.scope():
            restored = restore_latest(checkpoints, model)
        if restored is None:
            log.warning("resume=true but %s holds no checkpoint: starting from scratch", run_dir)
        else:
            check_same_config(restored["config"], cfg, cfg.force_resume)
            done, epochs = restored["epochs_done"], restored["history"]
            steps_in, metric_states = restored["steps_in_epoch"], restored["metric_states"]
            model.stop_training = restored.get("stop_training", False)
            callback_states = (restored.get("callback_states", {}), restored["callback_arrays"])
            log.info("resuming %s after epoch %d and %d steps", run_dir, done, steps_in)
            if cfg.callbacks.csv_logger.enabled:
                rewrite_csv(run_dir / cfg.callbacks.csv_logger.filename, epochs)
            if cfg.callbacks.tensorboard.enabled:
                fill_tensorboard(run_dir / "tensorboard", epochs)
    chosen = selector(cfg, objective_of(cfg))
    kept = [chosen] if chosen is not None else []  # before the checkpointer: it saves its state
    if kept and callback_states[0]:  # its state now, even if no epoch is left to fit
        apply_callback_states(kept, *callback_states)
    checkpointer = EpochCheckpoint(
        checkpoints,
        {"config": config_snapshot(cfg)},
        epochs,
        save=cfg.trainer.checkpoints,
        every_steps=cfg.trainer.checkpoint_every_steps,
    )
    unknown_length = bool(data.train.cardinality() == tf.data.UNKNOWN_CARDINALITY)
    if cfg.trainer.checkpoint_on_signal and cfg.trainer.checkpoints:
        stopper.checkpoint = checkpointer  # a signal writes a checkpoint before the stop
    # Before the checkpointer, after the monitors: the checkpointed callback states are put
    # back after `on_train_begin` reset them, and a mid-epoch checkpoint's metric sums at the
    # start of the interrupted epoch, so a step checkpoint of this epoch carries them too.
    restoring = [
        CarryCallbackStates(*callback_states),
        RestoreMetrics(metric_states if steps_in else None),
    ]
    extra = [*restoring, *kept, checkpointer, stopper, *(callbacks or [])]
    fitting = Fitting(cfg, model, data, assemble_callbacks(cfg, data, run_dir, extra, bool(epochs)))
    if done < cfg.trainer.epochs:
        replay_shuffles(data.train, done, cfg.trainer.steps_per_epoch, unknown_length)
    if steps_in and done < cfg.trainer.epochs:
        # The rest of the interrupted epoch, on its own: the same shuffle, its first
        # `steps_in` batches skipped; the callbacks see one training (`Fitting`).
        checkpointer.skipped_steps = steps_in
        fitting.run(Segment(done, done + 1, skip_steps=steps_in), unknown_length)
        done += 1
    if done < cfg.trainer.epochs and not model.stop_training:
        fitting.run(Segment(done, cfg.trainer.epochs), unknown_length)
    fitting.end()
    timings = {"started": started, "train_time_s": time.perf_counter() - started}
    with strategy.scope():
        tested = use_selected_weights(model, chosen, warm_start[1] if warm_start else 0)
    history = history_lists(checkpointer.history)
    return finalize(cfg, model, data, history, run_dir, timings, tested)


def run(
    cfg: Any,
    run_dir: str | Path,
    callbacks: list[keras.callbacks.Callback] | None = None,
    *,
    load_data: Callable[[Any], Any] | None = None,
    warm_start: tuple[Path, int] | None = None,
    hparams_session: bool = True,
) -> dict[str, Any]:
    """Train and evaluate the configured experiment in `run_dir`; return the final metrics.

    The directory's `status.json` says `running`, then `completed`, `failed` (with the error)
    or `interrupted` (SIGINT/SIGTERM, after the current step). `callbacks` are added to the
    configured ones; `load_data(cfg)` replaces `build_data` (a sweep reuses loaded data);
    `warm_start` is a saved model and the epochs it trained, to continue from;
    `hparams_session` makes `tensorboard/` an HParams session of the config's values (a
    search's trials are sessions of their searched values instead). Returns a flat
    dict: `test_<metric>` for every test metric, the objective, `epochs_run`, `train_time_s`,
    `wall_time_s` and the split `samples`.

    Under `trainer.strategy=multi_worker` only the chief writes `run_dir`; the other workers
    train alike in a temporary directory that is removed when they finish.
    """
    run_dir = Path(run_dir)
    if not writes_run_dir(cfg.trainer.strategy):  # a multi-worker task other than the chief
        with scratch_run_dir(run_dir, cfg.resume) as scratch:
            return run_in(cfg, scratch, callbacks, load_data, warm_start, False)
    return run_in(cfg, run_dir, callbacks, load_data, warm_start, hparams_session)


def run_in(
    cfg: Any,
    run_dir: Path,
    callbacks: list[keras.callbacks.Callback] | None,
    load_data: Callable[[Any], Any] | None,
    warm_start: tuple[Path, int] | None,
    hparams_session: bool,
) -> dict[str, Any]:
    """`run` in a directory this process owns: claimed, with `status.json` (and the HParams
    session, if any) telling the truth."""
    claim(run_dir, resume=cfg.resume)
    log.info("run directory: %s", run_dir.resolve())
    session = None
    if hparams_session and cfg.callbacks.tensorboard.enabled:
        session = RunSession(run_dir / "tensorboard", config_hyperparameters(cfg))

    def end(state: str, **fields: Any) -> None:
        record_end(run_dir, state, **fields)
        if session is not None:
            session.end(state, fields.get("error"))

    stopper = StopOnSignal()
    try:
        with interruptible(stopper), released_custom_gradients():
            results = train(cfg, run_dir, callbacks, stopper, load_data, warm_start, session)
    except RunInterrupted as stop:
        end("interrupted", signal=stop.signum, error=str(stop))
        raise
    except TapefitError as error:
        end("failed", error=str(error))
        raise
    except tf.errors.UnavailableError as error:
        if cfg.trainer.strategy != "multi_worker":
            end("failed", error=f"{type(error).__name__}: {error}")
            raise
        lost = lost_worker_error(error)
        end("failed", error=str(lost))
        raise lost from None
    except BaseException as error:
        end("failed", error=f"{type(error).__name__}: {error}")
        raise
    shutil.rmtree(run_dir / CHECKPOINTS, ignore_errors=True)  # model.keras supersedes them
    write_status(
        run_dir,
        "completed",
        objective=results["objective"],
        objective_direction=results["objective_direction"],
    )
    if session is not None:
        session.end("completed", results=results)
    log.info(
        "completed: %s; objective %s=%s",
        ", ".join(f"{k}={v:.4f}" for k, v in results.items() if k.startswith("test_"))
        or "no test split",
        results["objective"],
        "none" if results["objective_value"] is None else f"{results['objective_value']:.4f}",
    )
    return results
