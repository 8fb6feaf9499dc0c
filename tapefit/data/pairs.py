"""Text-pair data as `tf.data` pipelines: `pairs_synthetic` (the default) and `pairs_file`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from tapefit.data.pair_files import PairFileSpec, read_pair_file
from tapefit.data.pipeline import make_pipeline
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.errors import TapefitError

Split = tuple[np.ndarray, np.ndarray, np.ndarray]  # texts_a, texts_b, labels
LABEL_TYPES = ("graded", "binary")


@dataclass
class PairData:
    """Pipelines of `((texts_a, texts_b), label)` plus the raw splits the metrics need."""

    train: tf.data.Dataset
    val: tf.data.Dataset
    test: tf.data.Dataset
    splits: dict[str, Split]
    label_type: str
    label_range: tuple[float, float]
    sizes: dict[str, int]
    skipped_lines: int = 0

    def inputs(self, split: str, batch_size: int = 256) -> tf.data.Dataset:
        """Only the `(texts_a, texts_b)` of a split, for `predict` (a 1-tuple, so Keras does not
        take the pair for `(x, y)`)."""
        texts_a, texts_b, _ = self.splits[split]
        return (
            tf.data.Dataset.from_tensor_slices((texts_a, texts_b))
            .batch(batch_size)
            .map(lambda a, b: ((a, b),))
        )

    def training_texts(self) -> np.ndarray:
        """Every text of the training split, for adapting the vocabulary."""
        texts_a, texts_b, _ = self.splits["train"]
        return np.concatenate([texts_a, texts_b])


def synthetic_splits(cfg: Any, seed: int) -> dict[str, Split]:
    """Disjointly seeded train/val/test pairs from one shared lexicon."""
    generator = PairGenerator(seed=seed)
    splits = {}
    for name in ("train", "val", "test"):
        texts_a, texts_b, graded = generator.pairs(cfg[f"{name}_size"])
        labels = graded if cfg.label_type == "graded" else (graded >= 2.5).astype("float32")
        splits[name] = (texts_a, texts_b, labels)
    return splits


def _split_off(split: Split, fraction: float, seed: int) -> tuple[Split, Split]:
    order = np.random.default_rng(seed).permutation(len(split[2]))
    count = round(fraction * len(order))
    if count == 0 or count == len(order):
        raise TapefitError(
            f"a {fraction} split of {len(order)} pairs leaves a part empty: give more pairs, a "
            "different fraction, or separate files (data.validation_path/test_path)"
        )
    held, rest = order[:count], order[count:]
    return tuple(part[rest] for part in split), tuple(part[held] for part in split)


def file_splits(cfg: Any, seed: int) -> tuple[dict[str, Split], int]:
    """Read the configured files; split parts that have no file of their own off train."""
    if not cfg.train_path:
        raise TapefitError("data=pairs_file needs data.train_path=/path/to/train.{csv,tsv,jsonl}")
    spec = PairFileSpec(
        format=cfg.format,
        text1_column=str(cfg.text1_column),
        text2_column=str(cfg.text2_column),
        label_column=str(cfg.label_column),
        header=cfg.header,
        delimiter=cfg.delimiter,
        quoting=cfg.quoting,
        label_range=tuple(cfg.label_range),
        label_type=cfg.label_type,
        on_bad_line=cfg.on_bad_line,
    )
    splits, skipped = {}, 0
    for name, key in (("train", "train_path"), ("test", "test_path"), ("val", "validation_path")):
        if cfg[key]:
            rows = read_pair_file(cfg[key], spec)
            splits[name], skipped = (
                (rows.texts_a, rows.texts_b, rows.labels),
                skipped + rows.skipped,
            )
    if "test" not in splits:
        splits["train"], splits["test"] = _split_off(splits["train"], cfg.test_fraction, seed)
    if "val" not in splits:
        splits["train"], splits["val"] = _split_off(splits["train"], cfg.val_fraction, seed + 1)
    return splits, skipped


def pair_datasets(cfg: Any, seed: int) -> PairData:
    """Build the pair pipelines named by `cfg.name` (`pairs_synthetic` or `pairs_file`)."""
    if cfg.label_type not in LABEL_TYPES:
        raise TapefitError(f"data.label_type={cfg.label_type!r} must be one of {LABEL_TYPES}")
    if cfg.name == "pairs_synthetic":
        splits, skipped = synthetic_splits(cfg, seed), 0
        label_range = (0.0, 5.0) if cfg.label_type == "graded" else (0.0, 1.0)
    elif cfg.name == "pairs_file":
        splits, skipped = file_splits(cfg, seed)
        label_range = tuple(float(v) for v in cfg.label_range)
    else:
        raise TapefitError(
            f"data.name={cfg.name!r} is not pair data: use pairs_synthetic or pairs_file"
        )
    pipelines = {
        name: make_pipeline(
            ((texts_a.astype(str), texts_b.astype(str)), labels),
            cfg.batch_size,
            shuffle=name == "train",
            seed=seed,
            cache=cfg.cache,
        )
        for name, (texts_a, texts_b, labels) in splits.items()
    }
    return PairData(
        **pipelines,
        splits=splits,
        label_type=cfg.label_type,
        label_range=label_range,
        sizes={name: len(split[2]) for name, split in splits.items()},
        skipped_lines=skipped,
    )
