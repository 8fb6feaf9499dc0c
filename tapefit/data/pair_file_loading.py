"""What the `pair_files` loader does below its signature: its arguments grouped by what they
set (batching, held-out fractions, stream limits), the pairs read into memory or streamed,
and the labels checked against the configured label type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tapefit.data.pair_files import PairFileSpec
from tapefit.data.pair_paths import checked_file, expand_paths
from tapefit.data.pair_stream import StreamedPairData, streamed_pair_data
from tapefit.data.pairs import PairData, file_splits, pair_data, read_pair_files
from tapefit.errors import TapefitError


@dataclass(frozen=True)
class PairBatching:
    """How the pairs become batches.

    Attributes:
        batch_size: Pairs per batch.
        cache: Keep the in-memory pipelines' elements after the first epoch.
        seed: The run's seed: splits, shuffles and the vocabulary sample.

    Examples:
        >>> PairBatching(batch_size=64, cache=True, seed=0).batch_size
        64
    """

    batch_size: int
    cache: bool
    seed: int


@dataclass(frozen=True)
class HeldOutFractions:
    """The shares of the training pairs held out when a split has no file of its own.

    Attributes:
        val_fraction: Share held out for validation.
        test_fraction: Share held out for the test split.

    Examples:
        >>> HeldOutFractions(val_fraction=0.1, test_fraction=0.2).test_fraction
        0.2
    """

    val_fraction: float
    test_fraction: float


@dataclass(frozen=True)
class StreamLimits:
    """How much a stream of training pairs holds or reads at once.

    Attributes:
        shuffle_buffer: Rows in the shuffle buffer.
        vocabulary_pairs: The seeded sample of pairs the vocabulary learns.
        max_held_out_pairs: Validation/test files are read up to this.

    Examples:
        >>> StreamLimits(shuffle_buffer=10, vocabulary_pairs=100, max_held_out_pairs=50)
        StreamLimits(shuffle_buffer=10, vocabulary_pairs=100, max_held_out_pairs=50)
    """

    shuffle_buffer: int
    vocabulary_pairs: int
    max_held_out_pairs: int


def in_memory_pair_files(
    paths: dict[str, Any], spec: PairFileSpec, batching: PairBatching, fractions: HeldOutFractions
) -> PairData:
    """Every split read into memory, those without a file split off the training pairs.

    Args:
        paths: `train`, `val` and `test`: each a file, a glob or a list of them, or None.
        spec: How the files are read.
        batching: Batch size, cache and seed.
        fractions: The shares held out for the splits without a file.

    Returns:
        `PairData` over the splits, with the number of skipped lines.

    Raises:
        TapefitError: no training file, a file is missing or unreadable, a line is bad, or
            graded labels are all 0/1.

    Examples:
        >>> from pathlib import Path
        >>> rows = [f"a cat {i}\\ta dog {i}\\t{i % 6}" for i in range(20)]
        >>> _ = Path("pairs.tsv").write_text("\\n".join(["text1\\ttext2\\tlabel", *rows]))
        >>> data = in_memory_pair_files(
        ...     {"train": "pairs.tsv", "val": None, "test": None},
        ...     PairFileSpec(),
        ...     PairBatching(batch_size=4, cache=False, seed=0),
        ...     HeldOutFractions(val_fraction=0.1, test_fraction=0.1),
        ... )
        >>> data.sizes["train"], data.sizes["val"], data.sizes["test"]
        (16, 2, 2)
    """
    splits, skipped = file_splits(
        paths, spec, fractions.val_fraction, fractions.test_fraction, batching.seed
    )
    check_label_type(np.concatenate([split.labels for split in splits.values()]), spec)
    return pair_data(
        splits,
        spec.label_type,
        tuple(spec.label_range),
        batch_size=batching.batch_size,
        seed=batching.seed,
        cache=batching.cache,
        skipped_lines=skipped,
    )


def streamed_pair_files(
    paths: dict[str, Any], spec: PairFileSpec, batching: PairBatching, limits: StreamLimits
) -> StreamedPairData:
    """The training files as a stream; validation (required) and test files in memory, up to
    `limits.max_held_out_pairs` each.

    Args:
        paths: `train`, `val` (both required) and `test`: each a file, a glob or a list of
            them, or None.
        spec: How the files are read.
        batching: Batch size and seed (a stream is not cached).
        limits: The shuffle buffer, the vocabulary sample and the held-out files' cap.

    Returns:
        `StreamedPairData`, its labels checked on the vocabulary sample and held-out splits.

    Raises:
        TapefitError: no training or validation file, a file is missing or unreadable, or
            graded labels are all 0/1.

    Examples:
        >>> streamed_pair_files(
        ...     {"train": "train.tsv", "val": None, "test": None},
        ...     PairFileSpec(),
        ...     PairBatching(batch_size=4, cache=False, seed=0),
        ...     StreamLimits(shuffle_buffer=10, vocabulary_pairs=100, max_held_out_pairs=50),
        ... )
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: data.stream=true reads validation pairs from their own ...
    """
    if not paths["train"]:
        raise TapefitError(
            "data=pairs_file needs data.train_path=/path/to/train.{csv,tsv,jsonl,json,parquet}"
        )
    if not paths["val"]:
        raise TapefitError(
            "data.stream=true reads validation pairs from their own files: give "
            "data.validation_path (a held-out file or glob)"
        )
    train_files = [
        checked_file(f, key="train_path") for f in expand_paths(paths["train"], "train_path")
    ]
    held_out, skipped = {}, 0
    for name, key in (("val", "validation_path"), ("test", "test_path")):
        if paths[name]:
            held_out[name], lost = read_pair_files(
                expand_paths(paths[name], key), spec, limits.max_held_out_pairs, key
            )
            skipped += lost
    data = streamed_pair_data(
        train_files,
        held_out,
        spec,
        batch_size=batching.batch_size,
        seed=batching.seed,
        held_out_skipped=skipped,
        shuffle_buffer=limits.shuffle_buffer,
        vocabulary_pairs=limits.vocabulary_pairs,
    )
    labels = np.concatenate([data.vocabulary_sample[2], *(s[2] for s in data.splits.values())])
    check_label_type(labels, spec)
    return data


def check_label_type(labels: np.ndarray, spec: PairFileSpec) -> None:
    """Refuse graded labels that are all 0 or 1: they are binary labels read as grades.

    Args:
        labels: Every label read.
        spec: How the files are read (the configured label type and range).

    Raises:
        TapefitError: naming both fixes (binary labels, or a [0, 1] grade range).

    Examples:
        >>> check_label_type(np.array([0.0, 1.0, 1.0]), PairFileSpec(label_type="binary"))
        >>> check_label_type(np.array([0.0, 1.0, 1.0]), PairFileSpec())
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: every label in the pair files is 0 or 1, but ...
    """
    binary_looking = set(np.unique(labels)) <= {0.0, 1.0} and spec.label_range[1] > 1.0
    if spec.label_type.value == "graded" and binary_looking:
        raise TapefitError(
            "every label in the pair files is 0 or 1, but data.label_type=graded would read them "
            "as grades: set data.label_type=binary model.loss.name=contrastive (or "
            "data.label_range=[0, 1] if they really are grades)"
        )
