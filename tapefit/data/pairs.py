"""Text-pair data as `tf.data` pipelines: generated pairs and pairs read from files."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tapefit.data.pair_files import LabelType, PairFileSpec, PairRows, read_pair_file
from tapefit.data.pair_paths import checked_file, expand_paths
from tapefit.data.pipeline import make_pipeline
from tapefit.data.synthetic_pairs import (
    BINARY_RANGE,
    GRADED_RANGE,
    PairGenerator,
    binary_labels,
)
from tapefit.errors import TapefitError
from tapefit.text.vocabulary import adapt_vocabulary
from tapefit.text.wordpiece import learn_wordpiece_vocabulary


class PairSplit(NamedTuple):
    """One split of text pairs, by name (it unpacks as `texts_a, texts_b, labels`).

    Example:
        >>> split = PairSplit(np.array(["a"]), np.array(["b"]), np.array([1.0]))
        >>> split.labels.tolist(), len(split.take(np.array([0])).texts_a)
        ([1.0], 1)
    """

    texts_a: np.ndarray
    texts_b: np.ndarray
    labels: np.ndarray

    @property
    def texts(self) -> tuple[np.ndarray, ...]:
        """The model's text inputs: both sides."""
        return (self.texts_a, self.texts_b)

    def take(self, rows: np.ndarray) -> PairSplit:
        """The same split with only `rows` (indices), in their order."""
        return type(self)(*(part[rows] for part in self))


class TripletSplit(NamedTuple):
    """A split of text pairs with each row's hard negative text (`data.negative_column`).

    Example:
        >>> split = TripletSplit(*(np.array([x]) for x in ("a", "b", 1.0, "c")))
        >>> split.texts[2].tolist()
        ['c']
    """

    texts_a: np.ndarray
    texts_b: np.ndarray
    labels: np.ndarray
    negatives: np.ndarray

    @property
    def texts(self) -> tuple[np.ndarray, ...]:
        """The model's text inputs: both sides, then the negatives."""
        return (self.texts_a, self.texts_b, self.negatives)

    def take(self, rows: np.ndarray) -> TripletSplit:
        """The same split with only `rows` (indices), in their order."""
        return type(self)(*(part[rows] for part in self))


Split = PairSplit | TripletSplit


def split_of(rows: PairRows) -> Split:
    """A file's pairs as the split they make: a `TripletSplit` when the file brings a hard
    negative per row (`data.negative_column`), else a `PairSplit`."""
    if rows.negatives is None:
        return PairSplit(rows.texts_a, rows.texts_b, rows.labels)
    return TripletSplit(rows.texts_a, rows.texts_b, rows.labels, rows.negatives)


@dataclass
class PairData:
    """Pipelines of `((texts_a, texts_b), label)` plus what the metrics and losses need.

    With hard negatives (a fourth array in each split), the pipelines' inputs are
    `(texts_a, texts_b, negatives)`.

    What the pair loaders return. Whole-split metrics (correlation, AUC) read the raw
    splits; a pair loss is picked and scaled by the labels' facts.

    Attributes:
        train: Batches of `((texts_a, texts_b), labels)`, reshuffled each epoch from `seed`.
        val: Validation batches, in order.
        test: Test batches, in order; None when the data have no test split.
        splits: `PairSplit`s (or `TripletSplit`s, with negatives) by split name.
        label_type: `graded` or `binary`.
        label_range: `(low, high)` of graded labels.
        sizes: Pairs per split, by split name.
        seed: The seed of the training shuffle.
        cache: Whether the pipelines keep their elements after the first epoch.
        skipped_lines: Bad lines skipped while reading the files.
        text_options: How texts become tokens in the model (`sequence_length`,
            `max_tokens`, `tokenizer`, `wordpiece_vocabulary_size`).
    """

    train: tf.data.Dataset
    val: tf.data.Dataset
    test: tf.data.Dataset | None
    splits: dict[str, Split]
    label_type: str
    label_range: tuple[float, float]
    sizes: dict[str, int]
    seed: int
    cache: bool
    skipped_lines: int = 0
    # How texts become tokens in the model: sequence_length, max_tokens, tokenizer and
    # wordpiece_vocabulary_size (the loader's keys).
    text_options: dict[str, Any] = field(default_factory=dict)

    def rebuilt(self, batch_size: int) -> PairData:
        """The same pairs in new pipelines: a first epoch's shuffle again, another batch size.

        Args:
            batch_size: Pairs per batch of the new pipelines.

        Returns:
            New data over the same pairs.
        """
        rebuilt = pair_data(
            self.splits,
            self.label_type,
            self.label_range,
            batch_size=batch_size,
            seed=self.seed,
            cache=self.cache,
            skipped_lines=self.skipped_lines,
        )
        return dataclasses.replace(rebuilt, text_options=self.text_options)

    def model_arguments(self) -> dict[str, Any]:
        """What a pair model built for these data is told about them.

        The vocabulary learnt on the training texts (words capped by `max_tokens`, or with
        `tokenizer=wordpiece` a WordPiece vocabulary of at most `wordpiece_vocabulary_size`
        entries, and then `tokenizer="wordpiece"` too), the sequence length, and the labels'
        type and range (which pick and scale the pair loss): a run passes them to the model's
        constructor, so the config need not repeat them.

        Returns:
            Keyword arguments for `SiameseModel` (a subclass takes them too).

        Raises:
            TapefitError: `tokenizer=wordpiece` without keras-hub installed.
        """
        options = {"sequence_length": 32, "max_tokens": 20000, **self.text_options}
        wordpiece = options.get("tokenizer", "word") == "wordpiece"
        if options.get("tokenizer") == "pretrained":  # the model's encoder brings its own
            vocabulary = None
        elif wordpiece:
            size = options.get("wordpiece_vocabulary_size", 8000)
            vocabulary = learn_wordpiece_vocabulary(self.training_texts(), size)
        else:
            vocabulary = adapt_vocabulary(self.training_texts(), options["max_tokens"])
        arguments = {
            "vocabulary": vocabulary,
            "sequence_length": options["sequence_length"],
            "label_type": self.label_type,
            "label_range": list(self.label_range),
        }
        if vocabulary is None:  # a pretrained encoder's: nothing to pass
            del arguments["vocabulary"]
            arguments["tokenizer"] = "pretrained"
        if wordpiece:
            arguments["tokenizer"] = "wordpiece"
        if self.has_negatives:
            arguments["hard_negatives"] = True
        return arguments

    @property
    def has_negatives(self) -> bool:
        """Whether each training pair comes with a hard negative text (a third input)."""
        return isinstance(self.splits.get("train"), TripletSplit)  # a stream has none

    def inputs(self, split: str, batch_size: int = 256) -> tf.data.Dataset:
        """Only the `(texts_a, texts_b)` of a split, for `predict`.

        Each element is a 1-tuple, so that Keras does not take the pair for `(x, y)`.

        Args:
            split: `train`, `val` or `test`.
            batch_size: Pairs per batch.

        Returns:
            A dataset of `((texts_a, texts_b),)` batches, in order.
        """
        texts_a, texts_b = self.splits[split].texts[:2]
        return (
            tf.data.Dataset.from_tensor_slices((texts_a, texts_b))
            .batch(batch_size)
            .map(_as_model_inputs)
        )

    def read_counts(self) -> dict[str, int]:
        """For `metrics.json`: bad lines skipped while reading the files.

        Returns:
            `{"skipped_lines": n}`.
        """
        return {"skipped_lines": self.skipped_lines}

    def training_texts(self) -> np.ndarray:
        """Every text of the training split, for adapting the vocabulary.

        Returns:
            Both sides' texts (and the hard negatives), concatenated.
        """
        return np.concatenate(self.splits["train"].texts)


def synthetic_splits(
    sizes: dict[str, int], label_type: str, seed: int
) -> tuple[dict[str, Split], tuple[float, float]]:
    """Train/val/test pairs drawn in turn by one seeded generator from one shared lexicon, and
    the range their labels span."""
    label_type = LabelType(label_type)
    drawn = _drawn_pairs(tuple(sizes[name] for name in ("train", "val", "test")), seed)
    splits = {}
    for name, (texts_a, texts_b, graded) in zip(("train", "val", "test"), drawn, strict=True):
        labels = graded if label_type == LabelType.graded else binary_labels(graded)
        splits[name] = PairSplit(texts_a.copy(), texts_b.copy(), labels.copy())
    return splits, GRADED_RANGE if label_type == LabelType.graded else BINARY_RANGE


@functools.lru_cache(maxsize=4)
def _drawn_pairs(sizes: tuple[int, ...], seed: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """The generator's draws for splits of `sizes`, once per process (a notebook's or a
    search's later runs reuse them; `synthetic_splits` hands out copies)."""
    generator = PairGenerator(seed=seed)
    return tuple(generator.pairs(size) for size in sizes)


def _split_off(split: Split, fraction: float, seed: int) -> tuple[Split, Split]:
    order = np.random.default_rng(seed).permutation(len(split.labels))
    count = round(fraction * len(order))
    if count == 0 or count == len(order):
        raise TapefitError(
            f"a {fraction} split of {len(order)} pairs leaves a part empty: give more pairs, a "
            "different fraction, or separate files (data.validation_path/test_path)"
        )
    held, rest = order[:count], order[count:]
    return split.take(rest), split.take(held)


def file_splits(
    paths: dict[str, str | None],
    spec: PairFileSpec,
    val_fraction: float,
    test_fraction: float,
    seed: int,
) -> tuple[dict[str, Split], int]:
    """Read `paths` (`train`, `val`, `test`; only `train` is required); split parts without a
    file of their own off train. Returns the splits and the number of skipped lines."""
    if not paths.get("train"):
        raise TapefitError(
            "data=pairs_file needs data.train_path=/path/to/train.{csv,tsv,jsonl,json,parquet}"
        )
    splits, skipped = {}, 0
    keys = {"train": "train_path", "test": "test_path", "val": "validation_path"}
    for name in ("train", "test", "val"):
        if paths.get(name):
            files = expand_paths(paths[name], keys[name])
            splits[name], lost = read_pair_files(files, spec, None, keys[name])
            skipped += lost
    if "test" not in splits:
        splits["train"], splits["test"] = _split_off(splits["train"], test_fraction, seed)
    if "val" not in splits:
        splits["train"], splits["val"] = _split_off(splits["train"], val_fraction, seed + 1)
    return splits, skipped


def read_pair_files(
    files: list[Path], spec: PairFileSpec, max_pairs: int | None, key: str
) -> tuple[Split, int]:
    """The pairs of `files`, concatenated in their order, and the bad lines skipped; more than
    `max_pairs` pairs is a one-line error naming `data.<key>`."""
    parts, skipped = [], 0
    for file in files:
        rows = read_pair_file(checked_file(file, key=key), spec)
        parts.append(split_of(rows))
        skipped += rows.skipped
        held = sum(len(part.labels) for part in parts)
        if max_pairs is not None and held > max_pairs:
            raise TapefitError(
                f"data.{key} holds more than data.max_held_out_pairs={max_pairs} pairs (at "
                f"{file}): the whole-split metrics keep them in memory; use a smaller held-out "
                "set or raise the limit"
            )
    kind = type(parts[0])  # every file read with the same columns
    split = kind(*(np.concatenate(arrays) for arrays in zip(*parts, strict=True)))
    return split, skipped


def pair_data(
    splits: dict[str, Split],
    label_type: str,
    label_range: tuple[float, float],
    *,
    batch_size: int,
    seed: int,
    cache: bool = True,
    skipped_lines: int = 0,
) -> PairData:
    """Batched pipelines over `splits` (training reshuffled each epoch from `seed`)."""
    pipelines = {
        name: make_pipeline(
            (tuple(texts.astype(str) for texts in split.texts), split.labels),
            batch_size,
            shuffle=name == "train",
            seed=seed,
            cache=cache,
        )
        for name, split in splits.items()
    }
    return PairData(
        **pipelines,
        splits=splits,
        label_type=LabelType(label_type).value,
        label_range=(float(label_range[0]), float(label_range[1])),
        sizes={name: len(split.labels) for name, split in splits.items()},
        seed=seed,
        cache=cache,
        skipped_lines=skipped_lines,
    )


def _as_model_inputs(texts_a: tf.Tensor, texts_b: tf.Tensor) -> tuple:
    """`(a, b)` -> `((a, b),)`: a batch of pairs as `predict`'s one input (a named function,
    which AutoGraph converts without the warning a lambda inside a chain gets)."""
    return ((texts_a, texts_b),)
