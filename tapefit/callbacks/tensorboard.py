"""Keras' TensorBoard callback, made to fit a TapeModel: training scalars on the optimizer-step
axis that `step/*` and `evaluation_*` use, and `write_graph` through the traced step."""

from __future__ import annotations

import logging
from typing import Any

import keras
import tensorflow as tf

log = logging.getLogger("tapefit")


class StepTensorBoard(keras.callbacks.TensorBoard):
    """`keras.callbacks.TensorBoard` made step-exact for a TapeModel, with its graph written.

    It takes `keras.callbacks.TensorBoard`'s arguments (`log_dir`, `histogram_freq`,
    `write_graph`, `update_freq`, `profile_batch`, ...) and changes two things:

    - `batch_*` scalars (`update_freq="batch"` or N) are written at the optimizer step, as
      `step/*` telemetry and Keras' own `evaluation_*_vs_iterations` are: Keras counts its
      callback calls instead, one per execution of `steps_per_execution` steps, and restarts
      the count at 1 in a resumed run.
    - `write_graph=True` writes the graph of the traced training step (Keras 3 finds none to
      write for a model whose `train_function` is not itself a `tf.function`; TensorBoard's
      Graphs tab then says "No graph definition files were found").

    Args:
        *args: Keras' TensorBoard arguments (`log_dir` first).
        profile_batch: A batch to profile (0: none), or "start,stop" or [start, stop].
        **kwargs: Keras' TensorBoard keyword arguments.

    Examples:
        >>> from pathlib import Path
        >>> import keras, numpy as np, tapefit
        >>> from tapefit.callbacks.tensorboard import StepTensorBoard
        >>> inputs = keras.Input((2,))
        >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> board = StepTensorBoard(log_dir="logs", update_freq="batch")
        >>> x, y = np.ones((16, 2)), np.ones((16, 1))
        >>> _ = model.fit(x, y, epochs=1, validation_split=0.25, callbacks=[board], verbose=0)
        >>> sorted(path.name for path in Path("logs").iterdir())
        ['train', 'validation']
    """

    def __init__(self, *args: Any, profile_batch: int | str | list[int] = 0, **kwargs: Any) -> None:
        """Build it as Keras' TensorBoard.

        Args:
            *args: Keras' TensorBoard arguments (`log_dir` first).
            profile_batch: A batch to profile (0: none), or "start,stop" or [start, stop]
                (batches from 1), which Keras takes and its default of 0 hides.
            **kwargs: Keras' TensorBoard keyword arguments.
        """
        if isinstance(profile_batch, list):
            profile_batch = tuple(profile_batch)
        super().__init__(*args, profile_batch=profile_batch, **kwargs)

    def on_train_begin(self, logs: dict | None = None) -> None:
        super().on_train_begin(logs)
        self._should_write_train_graph = False  # Keras' own writer finds no graph: ours below
        first_profiled = self._should_trace and self._start_batch <= 1
        self.tracing_graph = bool(self.write_graph) and not first_profiled
        if self.tracing_graph:  # the profiler's trace, if it starts at once, has the graph
            tf.summary.trace_on(graph=True, profiler=False)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.tracing_graph:
            self.tracing_graph = False
            with self._train_writer.as_default():
                tf.summary.trace_export(name="train_step", step=0)
            stop_collecting_graphs()
        calls = self._global_train_batch  # Keras' count, which profile_batch refers to
        self._global_train_batch = int(self.model.optimizer.iterations.numpy())
        try:
            super().on_train_batch_end(batch, logs)
        finally:
            self._global_train_batch = calls

    def use_intervals(self) -> None:
        """Write the `epoch_*` scalars at the optimizer step, not the epoch's index.

        Validation intervals are this run's epochs (`trainer.val_check_interval`): their
        points then lie N steps apart on TensorBoard's axis."""
        self.epochs_are_intervals = True

    def _log_epoch_metrics(self, epoch: int, logs: dict | None) -> None:
        if getattr(self, "epochs_are_intervals", False):
            epoch = int(self.model.optimizer.iterations.numpy())
        super()._log_epoch_metrics(epoch, logs)

    def _stop_trace(self, batch: int | None = None) -> None:
        super()._stop_trace(batch)
        stop_collecting_graphs()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.tracing_graph:  # no batch ran
            tf.summary.trace_off()
            stop_collecting_graphs()
            self.tracing_graph = False
        super().on_train_end(logs)


def stop_collecting_graphs() -> None:
    """End the graph collection `tf.summary.trace_on(graph=True)` started.

    `trace_export` and `trace_off` leave it on (TF 2.21), and every later function call then
    keeps its graph, about 5 MB a small trial (measured over ten sweep trials after a traced
    run).
    """
    from tensorflow.python.eager import context

    context.context().disable_graph_collection()
