"""tapefit's own datasets as loader functions, named by `_target_` in `conf/data/*.yaml` exactly
as a user's loader is: each takes plain, typed arguments (checked against this signature
before anything runs) and the run's `seed`, and returns a data object with `train`, `val`,
`test` pipelines and `sizes`.

What a loader's data tell the model (image shape, classes, vocabulary, label facts) is its
data object's `model_arguments()`; value checks a signature cannot state are the loader's
`check_options(arguments)`, run before anything is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tapefit.data.image_folders import (
    CHANNELS,
    FolderImageData,
    check_image_files_options,
    class_folder,
    folder_data,
    held_out_folder,
)
from tapefit.data.image_folders import split_off as split_off_files
from tapefit.data.images import (
    ImageData,
    check_fraction,
    image_data,
    load_digits_splits,
    load_mnist_splits,
)
from tapefit.data.loader_checks import at_least_or_null, checked_by, with_defaults
from tapefit.data.pair_file_loading import (
    HeldOutFractions,
    PairBatching,
    StreamLimits,
    in_memory_pair_files,
    streamed_pair_files,
)
from tapefit.data.pair_files import PairFileSpec
from tapefit.data.pairs import PairData, pair_data, synthetic_splits
from tapefit.data.text_options import check_text_options, with_text_options
from tapefit.errors import TapefitError

LabelTypeName = Literal["graded", "binary"]
TokenizerName = Literal["word", "wordpiece", "pretrained"]
PairPaths = str | list[str] | None  # a file, a glob ('shards/*.tsv') or a list of them


def _check_image_arrays(given: Mapping[str, Any]) -> None:
    options = with_defaults(digits, given)
    check_fraction("val_fraction", options["val_fraction"])
    check_fraction("test_fraction", options["test_fraction"])
    at_least_or_null(options["train_limit"], 1, "train_limit")
    at_least_or_null(options["batch_size"], 1, "batch_size")


@checked_by(_check_image_arrays)
def digits(
    batch_size: int = 32,
    val_fraction: float = 0.15,
    test_fraction: float = 0.2,
    train_limit: int | None = None,
    cache: bool = True,
    seed: int = 0,
) -> ImageData:
    """scikit-learn's bundled 8x8 handwritten digits (1,797 images): real data, no network.

    The default dataset of `python -m tapefit`: small enough to train in seconds on a CPU,
    so a first run, a test or a sweep needs no download. The test split is stratified.

    Args:
        batch_size: Images per batch.
        val_fraction: Share of the non-test images held out for validation.
        test_fraction: Share of all images held out for the test split.
        train_limit: Keep only the first N training images (quick runs); None keeps all.
        cache: Keep the pipelines' elements in memory after the first epoch.
        seed: The run's seed: the splits and the per-epoch shuffle.

    Returns:
        `ImageData` whose `model_arguments()` give the image shape and the number of classes.

    Raises:
        TapefitError: a fraction outside (0, 1).

    Examples:
        >>> from tapefit.data.loaders import digits
        >>> data = digits(batch_size=64, train_limit=100)
        >>> data.sizes["train"], data.image_shape, data.num_classes
        (100, (8, 8, 1), 10)
    """
    splits = load_digits_splits(val_fraction, test_fraction, seed)
    return image_data(
        splits, batch_size=batch_size, seed=seed, cache=cache, train_limit=train_limit
    )


def _check_mnist(given: Mapping[str, Any]) -> None:
    options = with_defaults(mnist, given)
    check_fraction("val_fraction", options["val_fraction"])
    at_least_or_null(options["train_limit"], 1, "train_limit")
    at_least_or_null(options["batch_size"], 1, "batch_size", null=False)


@checked_by(_check_mnist)
def mnist(
    path: str | None = None,
    batch_size: int = 64,
    val_fraction: float = 0.1,
    train_limit: int | None = None,
    cache: bool = True,
    seed: int = 0,
) -> ImageData:
    """MNIST's 28x28 digits from a local `mnist.npz`, or downloaded by `keras.datasets`.

    The dataset of the MNIST tutorials; `path` lets an offline machine use a copy fetched
    elsewhere. Pixels are scaled to [0, 1] and get a channel axis.

    Args:
        path: A local `mnist.npz` (keys x_train, y_train, x_test, y_test); None downloads it.
        batch_size: Images per batch.
        val_fraction: Share of MNIST's training images held out for validation.
        train_limit: Keep only the first N training images; None keeps all.
        cache: Keep the pipelines' elements in memory after the first epoch.
        seed: The run's seed: the validation split and the per-epoch shuffle.

    Returns:
        `ImageData` with MNIST's own test split.

    Raises:
        TapefitError: the download fails, or `path` is missing, not an MNIST archive or
            holds bad arrays (NaN, wrong shapes, labels outside 0..9).

    Examples:
        >>> from tapefit.data.loaders import mnist
        >>> data = mnist(path="mnist.npz")  # doctest: +SKIP
        >>> data.image_shape, data.sizes["test"]  # doctest: +SKIP
        ((28, 28, 1), 10000)
    """
    splits = load_mnist_splits(path, val_fraction, seed)
    return image_data(
        splits, batch_size=batch_size, seed=seed, cache=cache, train_limit=train_limit
    )


def _check_image_folder(given: Mapping[str, Any]) -> None:
    check_image_files_options(with_defaults(image_folder, given))


@checked_by(_check_image_folder)
def image_folder(
    train_path: str,
    validation_path: str | None = None,
    test_path: str | None = None,
    image_size: Sequence[int] = (64, 64),
    color_mode: Literal["grayscale", "rgb", "rgba"] = "rgb",
    batch_size: int = 32,
    val_fraction: float = 0.15,
    cache: bool = False,
    seed: int = 0,
) -> FolderImageData:
    """Labelled image folders, one subfolder per class, decoded in the pipeline.

    Your own images with no code: the class names are the subfolders' names (sorted, saved
    with the model as `class_names`), and files are decoded and resized a few batches ahead
    of the step, so the images need not fit in memory.

    Args:
        train_path: A folder with one subfolder of images per class (`cat/`, `dog/`, ...).
        validation_path: The same for validation; None holds out `val_fraction` of training.
        test_path: The same for the test split; None: no test split (no `test_*` metrics).
            A folder of images with no class subfolders is unlabelled: new images for
            `python -m tapefit.predict`, which training and `tapefit.evaluate` refuse.
        image_size: `[height, width]` every image is resized to.
        color_mode: Channels images are decoded to: grayscale, rgb or rgba.
        batch_size: Images per batch.
        val_fraction: Share of training images held out when there is no validation folder.
        cache: Keep decoded images in memory after the first epoch.
        seed: The run's seed: the held-out split and the per-epoch shuffle.

    Returns:
        `FolderImageData`; `model_arguments()` add the class names (the subfolders).

    Raises:
        TapefitError: a path is not a folder, a class folder holds no images, or a
            validation/test class is not one of the training classes.

    Examples:
        Two classes of four 8x8 PNG images each:

        >>> from pathlib import Path
        >>> import numpy as np, tensorflow as tf
        >>> from tapefit.data.loaders import image_folder
        >>> for label in ("cat", "dog"):
        ...     Path("train", label).mkdir(parents=True)
        ...     for i in range(4):
        ...         png = tf.io.encode_png(np.full((8, 8, 3), 40 * i, "uint8"))
        ...         _ = Path("train", label, f"{i}.png").write_bytes(png.numpy())
        >>> data = image_folder("train", image_size=(8, 8), val_fraction=0.25)
        >>> data.class_names, data.sizes
        (['cat', 'dog'], {'train': 6, 'val': 2})
    """
    train, classes = class_folder(train_path, "train_path")
    if validation_path is None:
        train, val = split_off_files(train, check_fraction("val_fraction", val_fraction), seed)
    else:
        val, _ = class_folder(validation_path, "validation_path", classes)
    splits = {"train": train, "val": val}
    unlabelled = {}
    if test_path is not None:
        splits["test"] = held_out_folder(test_path, classes)
        if splits["test"].labels is None:
            unlabelled["test"] = (
                f"data.test_path={test_path} has no class subfolders (put each class's images "
                "in a subfolder named after the class)"
            )
    return folder_data(
        splits,
        classes,
        batch_size=batch_size,
        seed=seed,
        size=list(image_size),
        channels=CHANNELS[color_mode],
        cache=cache,
        unlabelled=unlabelled,
    )


def _check_synthetic_pairs(given: Mapping[str, Any]) -> None:
    options = with_defaults(synthetic_pairs, given)
    check_text_options(options)
    for split in ("train", "val", "test"):
        at_least_or_null(options[f"{split}_size"], 1, f"{split}_size", null=False)


@checked_by(_check_synthetic_pairs)
def synthetic_pairs(
    label_type: LabelTypeName = "graded",
    batch_size: int = 64,
    sequence_length: int = 16,
    max_tokens: int | None = 20000,
    tokenizer: TokenizerName = "word",
    wordpiece_vocabulary_size: int = 8000,
    cache: bool = True,
    train_size: int = 8000,
    val_size: int = 500,
    test_size: int = 500,
    seed: int = 0,
) -> PairData:
    """Generated sentence pairs (seeded), labelled by how many concepts they share.

    Text-pair data with no download and a known answer, for the Siamese tutorial and fast
    tests: the graded label is 5 * the concept overlap of the two sentences, the binary
    label is overlap >= 0.5.

    Args:
        label_type: `graded` (0-5 scores) or `binary` (0/1 same/different).
        batch_size: Pairs per batch.
        sequence_length: Tokens (words or pieces) per text after vectorisation (padded or
            cut).
        max_tokens: Vocabulary size cap, adapted on the training texts; None: no cap.
        tokenizer: `word` (whole words; an unseen word is one OOV id) or `wordpiece`
            (subwords learnt on the training texts; an unseen word is split into known
            pieces; needs `pip install 'tapefit[text]'`).
        wordpiece_vocabulary_size: With `wordpiece`: the most entries of the vocabulary.
        cache: Keep the pipelines' elements in memory after the first epoch.
        train_size: Training pairs generated.
        val_size: Validation pairs generated.
        test_size: Test pairs generated.
        seed: The run's seed: the generated pairs and the per-epoch shuffle.

    Returns:
        `PairData` whose `model_arguments()` give the vocabulary, the sequence length and
        the label facts a pair loss needs.

    Examples:
        >>> from tapefit.data.loaders import synthetic_pairs
        >>> data = synthetic_pairs(train_size=64, val_size=16, test_size=16)
        >>> data.sizes
        {'train': 64, 'val': 16, 'test': 16}
    """
    sizes = {"train": train_size, "val": val_size, "test": test_size}
    splits, label_range = synthetic_splits(sizes, label_type, seed)
    data = pair_data(splits, label_type, label_range, batch_size=batch_size, seed=seed, cache=cache)
    return with_text_options(
        data, sequence_length, max_tokens, tokenizer, wordpiece_vocabulary_size
    )


def _check_pair_files(given: Mapping[str, Any]) -> None:
    options = with_defaults(pair_files, given)
    check_text_options(options)
    for key in ("val_fraction", "test_fraction"):
        if not 0.0 <= options[key] < 1.0:
            raise TapefitError(f"data.{key}={options[key]} must lie in [0, 1)")
    if not 0.0 <= options["max_skipped_fraction"] <= 1.0:
        raise TapefitError(
            f"data.max_skipped_fraction={options['max_skipped_fraction']} must lie in [0, 1]"
        )
    if options["val_fraction"] + options["test_fraction"] >= 1.0:
        total = options["val_fraction"] + options["test_fraction"]
        raise TapefitError(
            f"data.val_fraction + data.test_fraction = {total} leaves no training pairs: keep "
            "their sum below 1"
        )
    for key in ("shuffle_buffer", "vocabulary_pairs", "max_held_out_pairs"):
        at_least_or_null(options[key], 1, key, null=False)
    negative = options["negative_column"]
    if negative is not None and options["stream"]:
        raise TapefitError(
            "data.negative_column is read into memory: set data.stream=false, or leave the "
            "negatives out (data.negative_column=null) to stream the pairs"
        )
    texts = {"text1_column": options["text1_column"], "text2_column": options["text2_column"]}
    for key, column in texts.items():
        if negative is not None and str(negative) == str(column):
            raise TapefitError(
                f"data.negative_column={negative} is also data.{key}: name the column that "
                "holds each row's hard negative"
            )
    low_high = [float(value) for value in options["label_range"]]
    if len(low_high) != 2 or not low_high[0] < low_high[1]:
        raise TapefitError(
            f"data.label_range={low_high} must be two numbers [low, high] with low < high, "
            "e.g. data.label_range=[0,5]"
        )


@checked_by(_check_pair_files)
def pair_files(
    train_path: PairPaths = None,
    validation_path: PairPaths = None,
    test_path: PairPaths = None,
    format: Literal["auto", "csv", "tsv", "jsonl", "json", "parquet"] = "auto",
    text1_column: str | int = "text1",
    text2_column: str | int = "text2",
    label_column: str | int | None = "label",
    negative_column: str | int | None = None,
    header: bool = True,
    delimiter: str | None = None,
    quoting: Literal["minimal", "none", "all", "nonnumeric"] = "minimal",
    label_type: LabelTypeName = "graded",
    label_range: Sequence[float] = (0.0, 5.0),
    on_bad_line: Literal["error", "skip"] = "error",
    max_skipped_fraction: float = 0.1,
    encoding: str = "utf-8",
    batch_size: int = 64,
    sequence_length: int = 32,
    max_tokens: int | None = 20000,
    tokenizer: TokenizerName = "word",
    wordpiece_vocabulary_size: int = 8000,
    cache: bool = True,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    stream: bool = False,
    shuffle_buffer: int = 10000,
    vocabulary_pairs: int = 100000,
    max_held_out_pairs: int = 1000000,
    seed: int = 0,
) -> PairData:
    """Your own text pairs from CSV, TSV or JSON-lines files.

    Missing validation/test parts are split off the training file, or the training rows
    stream from disk (`stream`) for files larger than memory. Bad lines stop the run with
    the file and line, or are skipped and counted (`on_bad_line`).

    Args:
        train_path: The training pairs: a file, a glob ('shards/*.tsv') or a list of them.
        validation_path: Validation pairs (required with `stream`); None: split off training.
        test_path: Test pairs; None: split off training (or none, with `stream`).
        format: csv, tsv, jsonl, json (an array of objects) or parquet; `auto` goes by each
            file's extension.
        text1_column: The first text's column: a header name, or a 0-based index without one.
        text2_column: The second text's column.
        label_column: The label's column; None: every row is a positive pair (its label the
            top of `label_range`, or 1 for binary labels).
        negative_column: A third text per row, a hard negative of the first text, which the
            `in_batch_negatives` and `triplet` losses rank below the second; None: none.
        header: Whether CSV/TSV files start with a header line.
        delimiter: The field separator; None: "," for csv, tab for tsv.
        quoting: CSV quoting, as Python's csv module names it.
        label_type: `graded` scores or `binary` 0/1 labels.
        label_range: `[low, high]` of graded labels (a loss rescales them from it).
        on_bad_line: `error` stops at a malformed line (naming it); `skip` drops it.
        max_skipped_fraction: With `skip`: refuse a file that loses more of its lines.
        encoding: The files' text encoding (a UTF-8 byte-order mark is dropped).
        batch_size: Pairs per batch.
        sequence_length: Tokens (words or pieces) per text after vectorisation (padded or
            cut).
        max_tokens: Vocabulary size cap, adapted on the training texts; None: no cap.
        tokenizer: `word` (whole words; an unseen word is one OOV id) or `wordpiece`
            (subwords learnt on the training texts, with `stream` on the vocabulary sample;
            needs `pip install 'tapefit[text]'`).
        wordpiece_vocabulary_size: With `wordpiece`: the most entries of the vocabulary.
        cache: Keep the in-memory pipelines' elements after the first epoch.
        val_fraction: Share of training pairs held out when there is no validation file.
        test_fraction: Share of training pairs held out when there is no test file.
        stream: Stream training rows from disk (never all in memory).
        shuffle_buffer: With `stream`: rows in the shuffle buffer.
        vocabulary_pairs: With `stream`: the seeded sample of pairs the vocabulary learns.
        max_held_out_pairs: With `stream`: validation/test files are read up to this.
        seed: The run's seed: splits, shuffles and the vocabulary sample.

    Returns:
        `PairData` (`StreamedPairData` with `stream`).

    Raises:
        TapefitError: a file is missing or unreadable, a column is not found, a line is bad
            (with `on_bad_line="error"`) or too many are, or graded labels are all 0/1.

    Examples:
        A TSV file with a header, validation and test pairs split off:

        >>> from pathlib import Path
        >>> from tapefit.data.loaders import pair_files
        >>> rows = [f"a cat {i}\\ta dog {i}\\t{i % 6}" for i in range(40)]
        >>> text = "\\n".join(["text1\\ttext2\\tlabel", *rows]) + "\\n"
        >>> _ = Path("train.tsv").write_text(text)
        >>> data = pair_files("train.tsv", val_fraction=0.1, test_fraction=0.1)
        >>> data.sizes["train"], data.sizes["val"], data.sizes["test"]
        (32, 4, 4)
    """
    spec = PairFileSpec(
        format=format,
        text1_column=text1_column,
        text2_column=text2_column,
        label_column=label_column,
        negative_column=negative_column,
        header=header,
        delimiter=delimiter,
        quoting=quoting,
        label_range=list(label_range),
        label_type=label_type,
        on_bad_line=on_bad_line,
        max_skipped_fraction=max_skipped_fraction,
        encoding=encoding,
    )
    paths = {"train": train_path, "val": validation_path, "test": test_path}
    batching = PairBatching(batch_size=batch_size, cache=cache, seed=seed)
    if stream:
        limits = StreamLimits(shuffle_buffer, vocabulary_pairs, max_held_out_pairs)
        data = streamed_pair_files(paths, spec, batching, limits)
    else:
        fractions = HeldOutFractions(val_fraction, test_fraction)
        data = in_memory_pair_files(paths, spec, batching, fractions)
    return with_text_options(
        data, sequence_length, max_tokens, tokenizer, wordpiece_vocabulary_size
    )
