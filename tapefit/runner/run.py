"""`Run`: one training run of a composed config, wired once from its parts.

Run(cfg, run_dir).execute()
  record   RunRecord            claim the directory, status.json, HParams session, tracker
  signals  interruptible        SIGINT/SIGTERM/SIGUSR1 stop after a step, with a checkpoint
  phases   prepare → build_data → build_model         (tapefit.runner.preparation)
  resume   CheckpointConnector  restore, checkpointer, restoring callbacks
  order    assemble_callbacks   every callback in its place
  fit      Fitting              model.fit over the epochs left (a partial epoch first)
  finish   select the best epoch (Objective) → test → outputs   (tapefit.runner.results)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from tapefit.callbacks.averaging import AveragedWeights, uses_averages
from tapefit.callbacks.stop_on_signal import RunInterrupted, StopOnSignal, interruptible
from tapefit.checkpointing.callback_state import apply as apply_callback_states
from tapefit.checkpointing.connector import CheckpointConnector, Resumption
from tapefit.checkpointing.history_files import history_lists
from tapefit.checkpointing.warm_start import WarmStart
from tapefit.data.unlabelled import require_labels
from tapefit.errors import TapefitError
from tapefit.readiness import log_readiness
from tapefit.runner import preparation
from tapefit.runner.callback_order import Connections, assemble_callbacks
from tapefit.runner.data_from_config import load_checked_data
from tapefit.runner.results import finalize
from tapefit.runner.run_record import RunRecord
from tapefit.runner.spec import RunSpec
from tapefit.runner.validation import check_config
from tapefit.training.build_from_data import check_epoch_lengths
from tapefit.training.debugging import announce, explain_numerics, limited, numerics_checked
from tapefit.training.fit_plan import FitPlan, check_interval
from tapefit.training.fitting import Fitting, Segment, replay_shuffles, steps_of
from tapefit.training.run_status import scratch_run_dir
from tapefit.training.runtime import released_custom_gradients, writes_run_dir
from tapefit.training.selection import selector, use_selected_weights


class Run:
    """Train and evaluate the configured experiment in `run_dir`.

    Args:
        cfg: The composed config (`tapefit.compose`).
        run_dir: The run directory; created, claimed and written by this run.
        callbacks: Keras callbacks added to the configured ones.
        load_data: Replaces the `data` loader: called with the `data` node (checked with the
            config) and the run's seed, it returns the data object (a sweep reuses loaded
            data).
        warm_start: A saved model and the epochs it trained, to continue from (Hyperband).
        hparams_session: Make `tensorboard/` an HParams session of the config's values.

    Examples:
        >>> results = Run(tapefit.compose(["trainer.epochs=1"]), "outputs/one").execute()
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        cfg: Any,
        run_dir: str | Path,
        callbacks: list[keras.callbacks.Callback] | None = None,
        *,
        load_data: Any = None,
        warm_start: WarmStart | None = None,
        hparams_session: bool = True,
    ) -> None:
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.callbacks = list(callbacks or [])
        self.load_data = load_data or load_checked_data
        self.warm_start = warm_start
        self.hparams_session = hparams_session
        self.stopper = StopOnSignal()
        self.tracked = True  # the experiment tracker logs this process's run (the chief's)
        self.loggers: list[keras.callbacks.Callback] = []
        self.strategy: tf.distribute.Strategy | None = None  # set by `prepare`
        self.spec: RunSpec | None = None  # set once the config is checked

    def execute(self) -> dict[str, Any]:
        """Run it; return the final metrics (see `tapefit.run`). Under multi-worker training
        only the chief writes `run_dir`; the others use a scratch directory, then remove it."""
        if writes_run_dir(self.cfg.trainer.strategy):
            return self._recorded()
        with scratch_run_dir(self.run_dir, self.cfg.resume) as scratch:
            self.run_dir, self.hparams_session, self.tracked = scratch, False, False
            return self._recorded()

    def _recorded(self) -> dict[str, Any]:
        with RunRecord(self.cfg, self.run_dir, self.hparams_session) as record:
            located = check_config(self.cfg)  # the model's class, located by the check
            self.spec = RunSpec.of(self.cfg, record.snapshot, located)  # everything else: once
            with (
                interruptible(self.stopper),
                released_custom_gradients(),
                numerics_checked(self.spec.debug),
            ):
                results = self._train(record)
            CheckpointConnector(self.spec.checkpoint, self.run_dir).discard()
            record.completed(results)
        return results

    def _train(self, record: RunRecord) -> dict[str, Any]:
        started = time.perf_counter()
        announce(self.spec.debug, self.spec.profile_batch)
        if self.tracked and self.cfg.get("logger") is not None:
            record.track(preparation.build_logger(self.cfg.logger))
            self.loggers = record.tracker_callbacks()
        strategy = self.strategy = preparation.prepare(self.cfg.seed, self.spec.trainer)
        self.stopper.rearm()  # after the strategy: a multi-worker one takes SIGTERM over
        record.start_session()
        data = self._data()
        try:
            return self._fit_and_finish(data, strategy, started)
        except tf.errors.OpError as error:
            diagnose = getattr(data, "diagnose", None)  # the data's own one-line account
            explained = explain_numerics(error) or (diagnose(error) if diagnose else None)
            if not isinstance(explained, TapefitError):
                raise
        raise explained

    def _data(self) -> Any:
        """The run's data, loaded (and, across workers, sharded by the run's strategy)."""
        loaded = self.load_data(self.cfg.data, self.cfg.seed)
        data = limited(self.spec.debug, loaded)  # debug: fewer batches
        require_labels(data, ("train", "val", "test"), "a run trains and tests on labelled images")
        if self.spec.trainer.strategy == "multi_worker":
            data = preparation.sharded(data, self.spec.trainer.shard_policy, self.strategy)
        return data

    def _fit_and_finish(self, data: Any, strategy: tf.distribute.Strategy, started: float) -> dict:
        spec, trainer = self.spec, self.spec.trainer
        check_epoch_lengths(data, trainer.steps_per_epoch, trainer.validation_steps)
        check_interval(trainer, data.val is not None)
        built = preparation.build_checked_model(spec, data, strategy)
        model = built.model
        log_readiness(model, data.train, strategy, trainer.jit_compile)
        checkpoints = CheckpointConnector(spec.checkpoint, self.run_dir)
        plan = FitPlan.of(trainer, data.train)
        epoch_steps = plan.steps_per_epoch or steps_of(data.train, None)
        state = checkpoints.restore(model, strategy, self.warm_start, epoch_steps)
        objective = spec.objective
        chosen = selector(objective, trainer.test_weights, spec.early_stopping)
        kept = [chosen] if chosen is not None else []  # before the checkpointer: it saves them
        kept += checkpoints.kept_models(objective)
        if kept and state.callback_states:  # its state now, even if no epoch is left
            apply_callback_states(kept, state.callback_states)
        checkpointer = checkpoints.checkpointer(state)
        if trainer.checkpoint_on_signal and trainer.checkpoints:
            self.stopper.checkpoint = checkpointer  # a signal writes a checkpoint first
        averages = AveragedWeights(model) if uses_averages(model) else None
        before_writers = [
            *checkpoints.restoring_callbacks(state),
            *kept,
            *([averages.swap_out] if averages else []),  # raw weights into the checkpoint
            checkpointer,
            self.stopper,
            *self.callbacks,
        ]
        connected = Connections(
            objective=objective,
            own=built.own_callbacks,
            before_writers=before_writers,
            append=bool(state.epochs),
            loggers=self.loggers,
            averages=averages,
        )
        fitting = Fitting(
            trainer,
            model,
            data,
            assemble_callbacks(spec.callbacks, trainer, self.run_dir, connected),
        )
        self._fit(fitting, state)
        timings = {"started": started, "train_time_s": time.perf_counter() - started}
        with strategy.scope():
            first = self.warm_start.epochs_done if self.warm_start else 0
            tested = use_selected_weights(model, chosen, first)
        history = history_lists(checkpointer.history)
        return finalize(spec, built, data, history, self.run_dir, timings, tested)

    def _fit(self, fitting: Fitting, state: Resumption) -> None:
        """The epochs left: the rest of an interrupted epoch on its own (the same shuffle,
        its first `steps_in` batches skipped), then the others; the callbacks see one fit."""
        epochs, model, train = fitting.plan.epochs, fitting.model, fitting.data.train
        unknown_length = bool(train.cardinality() == tf.data.UNKNOWN_CARDINALITY)
        done = state.done
        if done < epochs and fitting.plan.interval is None:  # intervals skip in their stream
            replay_shuffles(train, done, self.spec.trainer.steps_per_epoch, unknown_length)
        if state.steps_in and done < epochs:
            fitting.run(Segment(done, done + 1, skip_steps=state.steps_in), unknown_length)
            done += 1
            if fitting.plan.interval is not None and done < epochs:
                # The next `fit` reads the stream anew: from data built afresh, its shuffles
                # draw the orders the uninterrupted run's one pass over the stream drew.
                fitting.restart_stream(self._data())
        if done < epochs and not model.stop_training:
            fitting.run(Segment(done, epochs), unknown_length)
        fitting.end()
        signum = self.stopper.agreed()  # one that came after the last step's check
        if signum is not None:  # the last epoch's checkpoint holds the run
            raise RunInterrupted(signum)
