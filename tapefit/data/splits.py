"""A user loader's splits as tapefit's data object: what a `data._target_` callable returns
(a mapping of `train`, optional `validation` and `test`, each a `tf.data.Dataset` or arrays in
any form `fit` takes) turned into train/val/test pipelines.

Arrays are batched, shuffled (training split, reshuffled each epoch from the run's seed),
cached and prefetched by tapefit; a `tf.data.Dataset` is used as the loader built it (batch it
yourself). A missing validation split is split off the training arrays by `val_fraction`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from tapefit.data.pipeline import make_pipeline
from tapefit.errors import TapefitError

SPLIT_NAMES = ("train", "validation", "test")
ALIASES = {"val": "validation"}


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """How tapefit turns arrays into pipelines (the `data` keys tapefit owns)."""

    batch_size: int = 32
    shuffle: bool = True
    cache: bool = True
    val_fraction: float = 0.1


@dataclasses.dataclass
class Splits:
    """The data object of a run over a user loader: pipelines and split sizes.

    `val` and `test` are None when there is no such split. `arrays` keeps the array splits so
    a sweep can rebuild the pipelines for another batch size (`rebuilt`).
    """

    train: tf.data.Dataset
    val: tf.data.Dataset | None
    test: tf.data.Dataset | None
    sizes: dict[str, int | None]
    arrays: dict[str, Any]
    options: PipelineOptions
    seed: int

    def rebuilt(self, batch_size: int) -> Splits:
        """The same splits with fresh pipelines of `batch_size` (datasets stay as they are)."""
        options = dataclasses.replace(self.options, batch_size=batch_size)
        pipelines = _pipelines(self.arrays, self.given, options, self.seed)
        return dataclasses.replace(self, options=options, **pipelines)

    @property
    def given(self) -> dict[str, tf.data.Dataset]:
        """The splits the loader returned as datasets."""
        return {
            name: split
            for name, split in (("train", self.train), ("val", self.val), ("test", self.test))
            if name not in self.arrays and split is not None
        }


def splits_from_loader(returned: Any, loader: str, options: PipelineOptions, seed: int) -> Splits:
    """Check what `loader` returned and build its pipelines (one-line errors otherwise)."""
    parts = _named_splits(returned, loader)
    arrays, datasets = {}, {}
    for name, split in parts.items():
        if isinstance(split, tf.data.Dataset):
            datasets[name] = split
        else:
            arrays[name] = _as_arrays(split, f"{loader} returned {name!r}")
    if "val" not in parts and options.val_fraction > 0:
        if "train" in datasets:
            raise TapefitError(
                f"{loader} returned no 'validation' split and its 'train' is a tf.data.Dataset, "
                "which tapefit cannot split: return a 'validation' dataset too, or set "
                "data.val_fraction=0 to train without validation"
            )
        arrays["train"], arrays["val"] = _split_off(
            arrays["train"], options.val_fraction, seed, loader
        )
    sizes = {name: _length(arrays[name]) for name in arrays}
    sizes.update({name: None for name in datasets})  # a dataset's sample count is unknown
    pipelines = _pipelines(arrays, datasets, options, seed)
    return Splits(**pipelines, sizes=sizes, arrays=arrays, options=options, seed=seed)


def _named_splits(returned: Any, loader: str) -> dict[str, Any]:
    if not isinstance(returned, Mapping):
        raise TapefitError(
            f"{loader} returned {type(returned).__name__}, not a mapping of splits: return "
            "{'train': ..., 'validation': ..., 'test': ...} (validation and test optional)"
        )
    parts: dict[str, Any] = {}
    for key, split in returned.items():
        name = ALIASES.get(key, key)
        if name not in SPLIT_NAMES:
            raise TapefitError(
                f"{loader} returned a split named {key!r}: name them train, validation, test"
            )
        if split is not None:
            parts["val" if name == "validation" else name] = split
    if "train" not in parts:
        raise TapefitError(f"{loader} returned no 'train' split: return {{'train': ..., ...}}")
    return parts


def _as_arrays(split: Any, where: str) -> Any:
    """`x`, `(x, y)`, `(x, y, sample_weight)` or a dict of inputs, as NumPy arrays of one
    length."""
    if isinstance(split, list):
        split = tuple(split)
    if isinstance(split, tuple) and not 1 <= len(split) <= 3:
        raise TapefitError(
            f"{where} is a tuple of {len(split)}: give x, (x, y) or (x, y, sample_weight)"
        )
    try:
        arrays = tf.nest.map_structure(np.asarray, split)
    except Exception as error:
        raise TapefitError(f"{where} cannot be read as arrays: {error}") from None
    leaves = tf.nest.flatten(arrays)
    if not leaves or any(leaf.ndim == 0 for leaf in leaves):
        raise TapefitError(
            f"{where} holds no arrays with a sample axis: give a tf.data.Dataset, x, (x, y), "
            "(x, y, sample_weight) or a dict of input arrays"
        )
    strings = [leaf for leaf in leaves if leaf.dtype == object and _all_strings(leaf)]
    if strings:
        raise TapefitError(
            f"{where} holds strings in an object array (e.g. {strings[0].flat[0]!r}): give "
            "labels as numbers (class indices), and text inputs as np.array(values, dtype=str)"
        )
    if any(leaf.dtype == object for leaf in leaves):
        raise TapefitError(
            f"{where} holds ragged or mixed-type values (an object array): give arrays of one "
            "shape and type"
        )
    lengths = {len(leaf) for leaf in leaves}
    if len(lengths) > 1:
        raise TapefitError(
            f"{where} holds arrays of different lengths {sorted(lengths)}: every input, label "
            "and weight needs one row per sample"
        )
    if lengths == {0}:
        raise TapefitError(f"{where} is empty")
    return tuple(arrays) if isinstance(arrays, list) else arrays


def _length(arrays: Any) -> int:
    return len(tf.nest.flatten(arrays)[0])


def _split_off(arrays: Any, fraction: float, seed: int, loader: str) -> tuple[Any, Any]:
    """A seeded random `fraction` of the samples as validation, the rest as training."""
    count = _length(arrays)
    held = round(count * fraction)
    if held < 1 or held >= count:
        raise TapefitError(
            f"{loader} returned {count} training samples: data.val_fraction={fraction} leaves "
            f"{'no validation' if held < 1 else 'no training'} samples: change it, or return "
            "a 'validation' split"
        )
    order = np.random.default_rng(seed).permutation(count)
    take = lambda rows: tf.nest.map_structure(lambda a: a[rows], arrays)  # noqa: E731
    return take(np.sort(order[held:])), take(np.sort(order[:held]))


def _pipelines(
    arrays: dict[str, Any], datasets: dict[str, Any], options: PipelineOptions, seed: int
) -> dict[str, Any]:
    built = dict(datasets)
    for name, split in arrays.items():
        built[name] = make_pipeline(
            split,
            options.batch_size,
            shuffle=options.shuffle and name == "train",
            seed=seed,
            cache=options.cache,
        )
    return {name: built.get(name) for name in ("train", "val", "test")}


def _all_strings(values: np.ndarray) -> bool:
    """Whether an object array holds only Python strings (a pandas column of text)."""
    return values.size > 0 and all(isinstance(value, str) for value in values.flat)
