"""The check of every export: a batch of real inputs (the first test batch, at most 32 rows)
through every endpoint of every format in its own runtime, against the Keras model."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.export.endpoints import ExportEndpoint
from tapefit.training.export.formats import VERIFY_ROWS
from tapefit.training.export.runtimes import RUNTIMES
from tapefit.training.export.writers import quietly

log = logging.getLogger("tapefit")


@dataclass(frozen=True)
class VerifyBatch:
    """The inputs every export is checked on: a split's first batch (`x` only, as a nested
    structure of arrays), at most `VERIFY_ROWS` rows."""

    split: str
    x: Any

    @property
    def rows(self) -> int:
        """The number of rows in the batch."""
        return int(np.shape(keras.tree.flatten(self.x)[0])[0])


def first_batch(data: Any, rows: int = VERIFY_ROWS) -> VerifyBatch | None:
    """The first batch of the test split (else validation, else training), `x` only.

    Args:
        data: The run's data object (`train`, `val`, `test` pipelines).
        rows: At most this many rows are kept.

    Returns:
        The batch, or `None` when the data has no split to take one from.
    """
    for split in ("test", "val", "train"):
        dataset = getattr(data, split, None)
        if dataset is None:
            continue
        try:
            element = next(iter(dataset))
        except StopIteration:
            continue
        x, _, _ = keras.utils.unpack_x_y_sample_weight(element)
        return VerifyBatch(split, keras.tree.map_structure(lambda t: np.asarray(t)[:rows], x))
    return None


def endpoint_inputs(endpoint: ExportEndpoint, batch: VerifyBatch) -> list[np.ndarray] | None:
    """The batch's arrays that fit an endpoint's flat specs, in order.

    All of them when they fit one for one (`serve`), else the first that fits each spec in
    turn (the Siamese `encode` takes the first text of each pair).

    Args:
        endpoint: The endpoint.
        batch: The verification batch.

    Returns:
        One array per spec, or `None` when the batch has nothing that fits.
    """
    arrays = [np.asarray(a) for a in keras.tree.flatten(batch.x)]
    if len(arrays) == len(endpoint.specs) and all(map(_fits, endpoint.specs, arrays)):
        return [_as_spec(spec, a) for spec, a in zip(endpoint.specs, arrays, strict=True)]
    chosen, start = [], 0
    for spec in endpoint.specs:
        index = next((i for i in range(start, len(arrays)) if _fits(spec, arrays[i])), None)
        if index is None:
            return None
        chosen.append(_as_spec(spec, arrays[index]))
        start = index + 1
    return chosen


def _fits(spec: tf.TensorSpec, array: np.ndarray) -> bool:
    """Whether `array` can be fed to `spec` (same kind of dtype, compatible shape)."""
    if not spec.shape.is_compatible_with(array.shape):
        return False
    if spec.dtype == tf.string:
        return array.dtype.kind in "OSU"
    kind = "f" if spec.dtype.is_floating else "iu" if spec.dtype.is_integer else "b"
    return array.dtype.kind in kind


def _as_spec(spec: tf.TensorSpec, array: np.ndarray) -> np.ndarray:
    """`array` in the spec's dtype (strings as they are)."""
    if spec.dtype == tf.string:
        return array
    return array.astype(spec.dtype.as_numpy_dtype, copy=False)


def verify_exports(
    model: keras.Model,
    endpoints: Sequence[ExportEndpoint],
    root: Path,
    files: dict[str, dict[str, str]],
    batch: VerifyBatch | None,
    tolerance: float,
) -> dict[str, Any]:
    """Load every export in its own runtime and compare its outputs with the Keras model's.

    Args:
        model: The trained Keras model (named in the refusal).
        endpoints: Its endpoints.
        root: The export folder being written (the SavedModel is `root` itself).
        files: `{format: {endpoint: file path relative to root}}`.
        batch: The inputs to compare on; `None` records the exports as unverified.
        tolerance: The largest absolute difference allowed.

    Returns:
        What `verify.json` holds: the tolerance, the inputs, and per format its runtime, the
        largest absolute difference over its endpoints and each endpoint's file and difference.

    Raises:
        TapefitError: an export whose outputs differ by more than `tolerance` (or are not
            finite, or have other shapes), in one line.
    """
    report: dict[str, Any] = {
        "tolerance": tolerance,
        "verified": batch is not None,
        "inputs": None if batch is None else {"split": batch.split, "rows": batch.rows},
        "formats": {},
    }
    if batch is not None:
        endpoints = [e.for_inputs(batch.x) for e in endpoints]
    inputs: dict[str, list[np.ndarray] | None] = {}
    expected: dict[str, list[np.ndarray] | None] = {}
    for endpoint in endpoints:
        flat = None if batch is None else endpoint_inputs(endpoint, batch)
        if batch is not None and flat is None:
            log.warning(
                "export: endpoint %s is not verified: nothing in the first %s batch fits %s",
                endpoint.name,
                batch.split,
                ", ".join(f"{s.name}: {s.dtype.name} {s.shape}" for s in endpoint.specs),
            )
        inputs[endpoint.name] = flat
        expected[endpoint.name] = None if flat is None else _reference(endpoint, flat)
    for name, paths in files.items():
        runtime, run = RUNTIMES[name]()
        checked: dict[str, dict[str, Any]] = {}
        for endpoint in endpoints:
            flat, want = inputs[endpoint.name], expected[endpoint.name]
            difference = None
            if flat is not None and want is not None:
                with quietly(runtime):
                    got = run(root / paths[endpoint.name], endpoint, flat)
                difference = _difference(name, model, endpoint, want, got, tolerance, batch)
            checked[endpoint.name] = {"file": paths[endpoint.name], "max_abs_diff": difference}
        known = [e["max_abs_diff"] for e in checked.values() if e["max_abs_diff"] is not None]
        report["formats"][name] = {
            "runtime": runtime,
            "max_abs_diff": max(known) if known else None,
            "endpoints": checked,
        }
    return report


def _reference(endpoint: ExportEndpoint, flat: list[np.ndarray]) -> list[np.ndarray]:
    """The Keras model's outputs for the endpoint, run eagerly."""
    with warnings.catch_warnings():  # e.g. a functional model given a tuple for its list
        warnings.simplefilter("ignore")
        outputs = endpoint.function(*endpoint.arguments([tf.constant(a) for a in flat]))
    return [np.asarray(o) for o in keras.tree.flatten(outputs)]


def _difference(
    name: str,
    model: keras.Model,
    endpoint: ExportEndpoint,
    expected: list[np.ndarray],
    got: list[np.ndarray],
    tolerance: float,
    batch: VerifyBatch | None,
) -> float:
    """The largest absolute difference between the export's and the model's outputs."""
    where = f"the {name} export of {type(model).__name__} (endpoint {endpoint.name!r})"
    shapes = [np.shape(a) for a in expected], [np.shape(a) for a in got]
    if shapes[0] != shapes[1]:
        raise TapefitError(
            f"trainer.export_formats: {where} returns outputs of shapes {shapes[1]} where the "
            f"Keras model returns {shapes[0]}; nothing was exported; leave {name} out"
        )
    gaps = [
        np.max(np.abs(want.astype("float64") - np.asarray(have).astype("float64")))
        for want, have in zip(expected, got, strict=True)
        if want.size
    ]
    worst = float(np.max(gaps)) if gaps else 0.0  # NaN stays NaN (Python's max would drop it)
    if not math.isfinite(worst) or worst > tolerance:
        raise TapefitError(
            f"trainer.export_formats: {where} differs from the Keras model by {worst:.3g} on "
            f"the first {getattr(batch, 'split', 'test')} batch, more than "
            f"trainer.export_tolerance={tolerance:g}; nothing "
            f"was exported; leave {name} out of trainer.export_formats or raise the tolerance"
        )
    return worst
