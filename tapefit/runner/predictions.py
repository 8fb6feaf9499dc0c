"""A finished run's predictions as CSV, for `python -m tapefit.predict`.

One row per example of a split of the run's data (or of the data the overrides give): the
columns the data's `input_columns(split)` give (an image's file or table cell, named as the
input names it), then those the model's `prediction_columns(x, y_pred)` names, the input's own
names kept for a pair file's text columns; for a Siamese run trained to regress its labels
(`cosine_mse`), `scale=label` adds the similarity mapped back onto the labels' scale.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np

from tapefit.errors import TapefitError
from tapefit.files import atomic_write
from tapefit.protocols import hook
from tapefit.runner.finished_runs import load_run

SCALES = ("similarity", "label")  # predict's scale= choices
LABEL_SCALE_COLUMN = "predicted_label"


def prediction_columns(model: Any, x: Any, y_pred: Any) -> dict[str, np.ndarray]:
    """The columns a prediction file gets for one batch: the model's own
    `prediction_columns(x, y_pred)` when it has one, else each output as `output` or
    `output_<i>`.

    Examples:
        >>> sorted(prediction_columns(object(), None, np.zeros((2, 3))))
        ['output_0', 'output_1', 'output_2']
    """
    own = hook(model, "prediction_columns")
    if own is not None:
        return {name: np.asarray(values) for name, values in own(x, y_pred).items()}
    values = np.asarray(y_pred)
    values = values.reshape(len(values), -1)
    if values.shape[1] == 1:
        return {"output": values[:, 0]}
    return {f"output_{i}": values[:, i] for i in range(values.shape[1])}


def label_scale(model: Any) -> Any:
    """The model's map from its outputs onto the labels' scale (`scale=label`), or a refusal
    naming what would give one.

    Raises:
        TapefitError: the model has no such map (not a Siamese model), or its loss learnt
            none (any loss but `cosine_mse` ranks pairs without regressing the labels).
    """
    to_labels = getattr(model, "similarity_to_label", None)
    if not callable(to_labels):
        raise TapefitError(
            f"scale=label: the run's model ({type(model).__name__}) has no label scale to map "
            "its outputs onto (a SiameseModel trained with model.loss.name=cosine_mse has); "
            "leave scale= out"
        )
    to_labels(np.zeros(1))  # refuses here, before any prediction, a loss that learnt no scale
    return to_labels


def predict_run(
    run_dir: str | Path,
    output: str | Path,
    overrides: Sequence[str] = (),
    split: str = "test",
    ckpt: str = "tested",
    scale: str = "similarity",
) -> Path:
    """Write the run's model's predictions on a split of its data as CSV.

    Args:
        run_dir: A finished run directory.
        output: The CSV file to write (its folder must exist).
        overrides: Data changes as `key=value` (`data.test_path=new_pairs.tsv`).
        split: `test` (default), `val` or `train`.
        ckpt: Which model (`tested`, `best`, `last`, an epoch, or a `.keras` file).
        scale: `similarity` (the model's outputs) or `label`: also `predicted_label`, a
            Siamese model's similarity on the labels' scale (`data.label_range`), for a run
            trained with `cosine_mse`.

    Returns:
        The CSV's path.

    Raises:
        TapefitError: no such split or scale, a model without a label scale for
            `scale=label`, a missing output folder, or as `load_run`.
    """
    if scale not in SCALES:
        raise TapefitError(f"scale={scale}: choose one of {', '.join(SCALES)}")
    if split not in ("test", "val", "train"):
        raise TapefitError(f"split={split}: choose test, val or train")
    output = Path(output)
    if not output.parent.is_dir():
        raise TapefitError(f"output={output}: the folder {output.parent} does not exist")
    cfg, data, model = load_run(run_dir, overrides, ckpt)
    to_labels = label_scale(model) if scale == "label" else None
    dataset = getattr(data, split, None)
    if dataset is None:
        raise TapefitError(
            f"split={split}: the run's data has no {split} split: give one (data.test_path="
            "<file> for files) or predict on split=val"
        )
    columns: dict[str, list] = {}
    for batch in dataset:
        x = keras.utils.unpack_x_y_sample_weight(batch)[0]
        y_pred = model.predict_on_batch(x)
        batch_columns = prediction_columns(model, x, y_pred)
        if to_labels is not None:
            batch_columns[LABEL_SCALE_COLUMN] = to_labels(np.asarray(y_pred).reshape(-1))
        for name, values in batch_columns.items():
            columns.setdefault(name, []).extend(np.asarray(values).tolist())
    columns = {**named_inputs(data, split, columns), **columns}
    renamed = input_column_names(cfg.data)
    names = list(columns)
    rows = zip(*(columns[name] for name in names), strict=True)
    names = [renamed.get(name, name) for name in names]
    atomic_write(output, lambda file: _write_csv(file, names, rows))
    return output


def named_inputs(data: Any, split: str, columns: dict[str, list]) -> dict[str, list]:
    """The columns naming each row's input, first in the file: the data's own
    `input_columns(split)` (an image table's image column, an image folder's files), if any.

    Raises:
        TapefitError: the data name another number of rows than the predictions have.
    """
    own = hook(data, "input_columns")
    if own is None:
        return {}
    inputs = {name: list(values) for name, values in own(split).items()}
    rows = len(next(iter(columns.values()), []))
    for name, values in inputs.items():
        if len(values) != rows:
            raise TapefitError(
                f"the data's input_columns({split!r}) gives {len(values)} values of {name!r} "
                f"for {rows} predicted rows: give one per row, in the split's order"
            )
    return {name: values for name, values in inputs.items() if name not in columns}


def input_column_names(data_node: Any) -> dict[str, str]:
    """The input's own names for a pair file's text columns (`data.text1_column=sentence1`), so
    predictions keep them; a column given by index (a file without header) keeps `text1`.

    Examples:
        >>> input_column_names({"text1_column": "sentence1", "text2_column": "2"})
        {'text1': 'sentence1'}
    """
    names = {}
    for column in ("text1", "text2"):
        given = data_node.get(f"{column}_column") if hasattr(data_node, "get") else None
        if isinstance(given, str) and given and not given.isdigit():
            names[column] = given
    return names


def _write_csv(file: Any, names: list[str], rows: Any) -> None:
    writer = csv.writer(file)
    writer.writerow(names)
    for row in rows:
        writer.writerow([_cell(value) for value in row])


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value
