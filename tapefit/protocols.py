"""What a run may ask of a model or a data object beyond `_target_`: optional methods, found by
duck typing. tapefit's own `Classifier` and `SiameseModel` and its loaders implement them; a
model or loader of yours needs none of them to train, and gains each one it adds.

These `Protocol` classes document the hooks; nothing checks `isinstance` against them.

Model (the class `model._target_` names, or the model it builds):

- `check_options(options)` (classmethod): refuse configured values no model can use, before
  anything is built (types are already checked from the constructor's hints).
- `default_objective(data_config)` (classmethod): the validation metric a run selects on when
  `objective` is null; without it, `val_loss`.
- `compile_defaults()`: the `loss`/`metrics` `compile` needs when the config names none.
- `training_callbacks(data)`: callbacks that add to the epoch logs (whole-split metrics),
  placed before every configured callback; each may list its `logged_names`.
- `report(data, run_dir)`: extra test metrics and files after training.
- `serving_endpoints()`: `{name: (function, input specs)}` for `trainer.export=true`; without
  it, Keras' `model.export`.
- `prediction_columns(x, y_pred)`: the columns `python -m tapefit.predict` writes for a batch;
  without it, each output as `output` or `output_<i>`.
- `encode(texts, batch_size)`: one vector per text, as a NumPy array; what retrieval
  (`python -m tapefit.evaluate ... queries=`) and `python -m tapefit.mine` search with. A
  model without it is refused there with a one-line error.
- `similarity_to_label(similarities)`: the model's outputs on its training labels' scale, for
  `python -m tapefit.predict ... scale=label`; a model without it is refused there.

Pair loss (the `loss` a `SiameseModel` trains with; tapefit's own in `tapefit.models.losses`):

- `uses_text_ids`: true when the loss takes each pair's text fingerprints as `y_true` (in-batch
  negatives find duplicates by them) instead of the labels.
- `uses_negatives`: true when the loss takes a third text per row (a hard negative) when the
  data have one; a loss without it is refused on such data.
- `to_label_scale(similarities)`: the loss's map from cosine similarity back onto the labels'
  range (only a loss that regresses the labels, `cosine_mse`, has one); a model's
  `similarity_to_label` is this.
- `label_type`: `graded` or `binary`, the labels the loss needs (None: either); a run whose
  `data.label_type` differs is refused, naming the losses for its labels.

Data (what the loader `data._target_` names returns):

- `model_arguments()`: constructor arguments the data decide (image shape, classes,
  vocabulary), passed to the model when its signature takes them and the config leaves them
  out.
- `rebuilt(batch_size)`: the same data in pipelines of another batch size (sweeps).
- `diagnose(error)`: a one-line account of a failure inside the pipeline (a corrupt file).
- `unlabelled`: `{split: why}` for splits of inputs alone (new images to predict on), which
  training and `tapefit.evaluate` refuse with `why` (`tapefit.data.unlabelled`).
- `input_columns(split)`: `{name: values}` naming each row's input (an image's file), the
  first columns of `python -m tapefit.predict`'s file.
- For `SiameseModel`'s whole-split metrics and report: `splits` (the held-out pairs in memory
  by split name, named tuples with `texts_a`, `texts_b` and `labels`, as
  `tapefit.data.pairs.PairSplit`), `inputs(split)` (a split's text batches, in order),
  `label_type` and `read_counts()`.
- For `trainer.shard_policy=file` (each worker reads its own training files):
  `sharded_by_file(workers, index)`, the same data reading only worker `index`'s share of the
  files, listed in its `train_files`.

Loader (the callable `data._target_` names): `check_options(options)`, as for a model.

Callback (any Keras callback in a run: configured, the model's own, or passed to `run`):

- `get_state()` / `set_state(state)`: what the callback must remember across a resume (JSON
  values or NumPy arrays); written into each resume checkpoint and put back after
  `on_train_begin` (`tapefit.checkpointing.callback_state`).
- `logged_names`: the epoch-log keys it adds, so a `monitor` or the `objective` may name them.
- `use_callbacks(callbacks)`: called once with the run's final callback list (for a callback
  that saves or signals the others).
- `use_intervals()`: the run validates every N steps, so its "epochs" are intervals.
- `stop_reason()`: why it set `model.stop_training`, for the run's log line.
- `on_interrupt(batch)`: a signal stops the run after this batch (None: at an epoch's end);
  flush what it holds.

A callback's `params` hold Keras' (`epochs`, `steps`, `verbose`) and `run_epochs`: the run's
epochs, where a resume trains the rest of an interrupted epoch in a `fit` of its own (whose
`epochs` ends with that epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol


class ModelHooks(Protocol):
    """The optional methods of a model a tapefit run uses (see the module docstring)."""

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None: ...

    @classmethod
    def default_objective(cls, data_config: Mapping[str, Any]) -> str: ...

    def compile_defaults(self) -> dict[str, Any]: ...

    def training_callbacks(self, data: Any) -> list[Any]: ...

    def report(self, data: Any, run_dir: Path) -> dict[str, Any]: ...

    def serving_endpoints(self) -> dict[str, tuple[Callable[..., Any], list[Any]]]: ...

    def prediction_columns(self, x: Any, y_pred: Any) -> dict[str, Any]: ...

    def encode(self, texts: Any, batch_size: int) -> Any: ...

    def similarity_to_label(self, similarities: Any) -> Any: ...


class PairLossHooks(Protocol):
    """What a `SiameseModel` reads on its loss (see the module docstring)."""

    uses_text_ids: bool
    uses_negatives: bool
    label_type: str | None

    def to_label_scale(self, similarities: Any) -> Any: ...


class DataHooks(Protocol):
    """The optional methods of a data object a tapefit run uses."""

    def model_arguments(self) -> dict[str, Any]: ...

    def rebuilt(self, batch_size: int) -> DataHooks: ...

    unlabelled: Mapping[str, str]

    def diagnose(self, error: Exception) -> Exception | None: ...

    def input_columns(self, split: str) -> Mapping[str, list[Any]]: ...

    splits: Mapping[str, Any]

    def inputs(self, split: str, batch_size: int = 256) -> Any: ...

    label_type: str

    def read_counts(self) -> dict[str, int]: ...

    train_files: list[Path]

    def sharded_by_file(self, workers: int, index: int) -> DataHooks: ...


class CallbackHooks(Protocol):
    """The optional methods and attributes of a callback a tapefit run uses."""

    logged_names: list[str]

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...

    def use_callbacks(self, callbacks: list[Any]) -> None: ...

    def use_intervals(self) -> None: ...

    def stop_reason(self) -> str: ...

    def on_interrupt(self, batch: int | None) -> None: ...


def hook(owner: Any, name: str) -> Callable[..., Any] | None:
    """`owner.<name>` when it is a callable hook, else None.

    Args:
        owner: A model, a model class, a data object or a loader.
        name: The hook's name, e.g. `"compile_defaults"`.

    Returns:
        The bound callable, or None when `owner` does not offer it.

    Examples:
        >>> hook(object(), "report") is None
        True
    """
    found = getattr(owner, name, None)
    return found if callable(found) else None
