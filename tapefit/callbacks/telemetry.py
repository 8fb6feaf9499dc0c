"""Per-step telemetry from what TapeModel's step records: gradient norm, learning rate, loss
scale and skipped steps, to TensorBoard and a CSV file."""

from __future__ import annotations

import csv
from pathlib import Path

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.files import atomic_write
from tapefit.keras_compat import learning_rate_setting, optimizer_calls
from tapefit.step.nonfinite_guard import recorded_step_state
from tapefit.step.step_guards import GradientTelemetry, is_loss_scaled

TELEMETRY_FIELDS = ("step", "gradient_norm", "learning_rate", "loss_scale", "skipped_steps")
# What each series is, shown on its TensorBoard card.
DESCRIPTIONS = {
    "gradient_norm": "Global L2 norm of the gradients of the one optimizer step written (before "
    "clipping, loss scaling undone): a sample every every_n_steps steps, not a window mean.",
    "learning_rate": "The learning rate this step's update used (a schedule's value).",
    "loss_scale": "LossScaleOptimizer's dynamic loss scale (mixed_float16): halves on an "
    "overflowing step, doubles after 2000 good ones.",
    "skipped_steps": "Optimizer steps skipped so far because the loss or gradients were NaN/inf "
    "(trainer.on_nonfinite=skip).",
}


def step_learning_rate(optimizer: keras.optimizers.Optimizer) -> float:
    """The learning rate the optimizer's latest update used.

    Why: `optimizer.learning_rate` is a schedule's value at the step counter, which the update
    has already advanced: the rate of the next step, not of the one just taken.

    Args:
        optimizer: A Keras optimizer (a `LossScaleOptimizer` is looked through).

    Returns:
        The schedule at the last step taken, or the optimizer's constant learning rate.

    Example:
        >>> from keras.optimizers.schedules import PolynomialDecay
        >>> optimizer = keras.optimizers.SGD(PolynomialDecay(1.0, 4, end_learning_rate=0.0))
        >>> optimizer.iterations.assign(3)  # doctest: +ELLIPSIS
        <...>
        >>> step_learning_rate(optimizer), float(optimizer.learning_rate)
        (0.5, 0.25)
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    schedule = learning_rate_setting(inner)
    if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        calls = int(keras.ops.convert_to_numpy(optimizer_calls(inner)))  # batches, as Keras counts
        return float(keras.ops.convert_to_numpy(schedule(max(calls - 1, 0))))
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


class StepTelemetry(keras.callbacks.Callback):
    """Per-step telemetry of a TapeModel's step: gradient norm, learning rate, loss scale.

    Epoch logs hide what happens within an epoch (a gradient spike, a loss scale that keeps
    halving); this callback reads what TapeModel's step records. Every `every_n_steps`
    optimizer steps it writes the gradient norm, learning rate, loss scale and skipped-step
    count to TensorBoard (`<log_dir>/train`, tags `step/...`, x-axis = optimizer steps) and as
    a row of `csv_path`; gradient histograms too when the model was compiled with
    `gradient_telemetry="histograms"`. The loss scale is written only under loss scaling
    (mixed_float16) and the skipped steps only with `on_nonfinite="skip"`: in other runs they
    could never change.

    With `steps_per_execution > 1` Keras calls back once per execution, so a row is written at
    the first execution end at or past each multiple of `every_n_steps`, labelled with the
    optimizer step it was read at.

    Args:
        log_dir: The TensorBoard folder; the scalars go to its `train` run.
        every_n_steps: Optimizer steps between two rows.
        csv_path: A CSV file the rows are appended to (with a header when new); None: none.

    Raises:
        TapefitError: `every_n_steps` below 1; when training starts, a model that is not a
            TapeModel compiled with `gradient_telemetry` `norm` or `histograms`.

    Examples:
        >>> from pathlib import Path
        >>> import keras, numpy as np, tapefit
        >>> from tapefit.callbacks.telemetry import StepTelemetry
        >>> inputs = keras.Input((2,))
        >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
        >>> model.compile(optimizer="sgd", loss="mse", gradient_telemetry="norm")
        >>> telemetry = StepTelemetry("tensorboard", every_n_steps=2, csv_path="steps.csv")
        >>> x, y = np.ones((16, 2)), np.ones((16, 1))
        >>> _ = model.fit(x, y, batch_size=4, epochs=1, callbacks=[telemetry], verbose=0)
        >>> rows = Path("steps.csv").read_text().splitlines()
        >>> rows[0], len(rows)  # the header, then steps 2 and 4
        ('step,gradient_norm,learning_rate', 3)
    """

    def __init__(
        self, log_dir: str | Path, every_n_steps: int = 10, csv_path: str | Path | None = None
    ) -> None:
        super().__init__()
        if every_n_steps < 1:
            raise TapefitError(f"every_n_steps={every_n_steps} must be at least 1")
        self.log_dir, self.every_n_steps = Path(log_dir), int(every_n_steps)
        self.csv_path = Path(csv_path) if csv_path is not None else None

    def on_train_begin(self, logs: dict | None = None) -> None:
        state = recorded_step_state(self.model)
        if self.model._gradient_telemetry == GradientTelemetry.off:
            raise TapefitError(
                "StepTelemetry needs the model compiled with gradient_telemetry='norm' or "
                "'histograms'"
            )
        self.state = state
        self.fields = [
            name
            for name in TELEMETRY_FIELDS
            if (name != "loss_scale" or is_loss_scaled(self.model.optimizer))
            and (name != "skipped_steps" or self.model._on_nonfinite.value == "skip")
        ]
        self.writer = tf.summary.create_file_writer(str(self.log_dir / "train"))
        self.last_step = int(self.model.optimizer.iterations.numpy())
        self.rows: list[dict[str, float]] = []
        if self.csv_path is not None and self.csv_path.exists():
            keep_rows_until(self.csv_path, self.last_step)  # a resume continues from its step

    def values(self) -> dict[str, float]:
        """The telemetry values now, keyed as the CSV columns.

        Returns:
            `step`, `gradient_norm`, `learning_rate`, and `loss_scale` and `skipped_steps`
            when they are written.
        """
        optimizer = self.model.optimizer
        row = {
            "step": int(optimizer.iterations.numpy()),
            "gradient_norm": float(self.state.gradient_norm.numpy()),
            "learning_rate": step_learning_rate(optimizer),
        }
        if "skipped_steps" in self.fields:
            row["skipped_steps"] = int(self.state.skipped_steps.numpy())
        if "loss_scale" in self.fields:
            row["loss_scale"] = float(optimizer.dynamic_scale.numpy())
        return row

    def write(self) -> None:
        """Write the current values at the current optimizer step.

        The scalars and histograms go to TensorBoard, the row to `csv_path` at once: a run
        killed after its next step checkpoint keeps it, and a resume from an earlier one
        drops it (`keep_rows_until`).
        """
        row = self.values()
        with self.writer.as_default(step=row["step"]):
            for name in self.fields[1:]:
                tf.summary.scalar(f"step/{name}", row[name], description=DESCRIPTIONS[name])
            for path, gradient in self.state.gradients.items():
                tf.summary.histogram(f"gradient/{path}", gradient)
        self.rows.append(row)
        self.last_step = row["step"]
        self.append_rows()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        step = int(self.model.optimizer.iterations.numpy())
        if step // self.every_n_steps > self.last_step // self.every_n_steps:
            self.write()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        epochs = self.params.get("run_epochs", self.params.get("epochs", 0))
        last = self.model.stop_training or epoch + 1 >= epochs
        if last and int(self.model.optimizer.iterations.numpy()) > self.last_step:
            self.write()  # the fit's last step, before an epoch-end checkpoint holds it
        self.flush()

    def on_interrupt(self, batch: int | None) -> None:
        """A signal stops the run after this step (`batch`; None: at the epoch's end), which
        its checkpoint holds: record the step as usual and flush, so the resumed run's rows
        continue these."""
        if batch is not None:
            self.on_train_batch_end(batch)
        self.flush()

    def on_train_end(self, logs: dict | None = None) -> None:
        if int(self.model.optimizer.iterations.numpy()) > self.last_step:
            self.write()
        self.flush()

    def flush(self) -> None:
        """Flush the TensorBoard writer (at the end of every epoch and of training)."""
        self.writer.flush()
        self.append_rows()

    def append_rows(self) -> None:
        """Append the rows written since the last call to `csv_path` (with a header when new)."""
        if self.csv_path is not None and self.rows:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.csv_path.exists()
            with self.csv_path.open("a", newline="") as file:
                writer = csv.DictWriter(file, fieldnames=self.fields)
                if new:
                    writer.writeheader()
                writer.writerows(self.rows)
        self.rows = []


def keep_rows_until(path: Path, step: int) -> None:
    """Drop the rows of `path` (a `steps.csv`) past optimizer step `step`: a run killed after
    its last checkpoint wrote them, and its resume, which starts at that checkpoint's step,
    writes them again.

    Example:
        >>> from pathlib import Path
        >>> _ = Path("steps.csv").write_text("step,gradient_norm\\n10,0.5\\n20,0.4\\n30,0.3\\n")
        >>> keep_rows_until(Path("steps.csv"), 20)
        >>> Path("steps.csv").read_text().splitlines()
        ['step,gradient_norm', '10,0.5', '20,0.4']
    """
    with path.open(newline="") as file:
        lines = file.readlines()

    def kept_row(line: str) -> bool:
        first = line.split(",", 1)[0]
        # a line without its end, or no step, was cut short by the kill: it goes too
        return line.endswith("\n") and first.isdigit() and int(first) <= step

    kept = lines[:1] + [line for line in lines[1:] if kept_row(line)]
    if len(kept) < len(lines):
        atomic_write(path, lambda file: file.write("".join(kept)))
