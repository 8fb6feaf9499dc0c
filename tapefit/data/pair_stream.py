"""Pair files too large for memory: the training rows stream from disk through `tf.data`
(files in a seeded order each epoch, read a few at a time and interleaved, rows shuffled
through a bounded buffer); the vocabulary is adapted on a bounded, seeded sample; only the
validation and test files, which the whole-split metrics need, are held in memory."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf

from tapefit.data.pair_files import PairFileSpec, RowCount, pair_rows
from tapefit.data.pairs import PairData, PairSplit
from tapefit.data.pipeline import PREFETCH_BATCHES, pipeline_options
from tapefit.errors import TapefitError

CHUNK = (  # rows cross from Python to tf.data in chunks: one call per row costs ~1 ms
    tf.TensorSpec((None,), tf.string),
    tf.TensorSpec((None,), tf.string),
    tf.TensorSpec((None,), tf.float32),
)
CHUNK_ROWS = 512
OPEN_FILES = 4  # files read at a time, their rows interleaved


def _columns(rows: list[tuple[str, str, float]]) -> tuple[list[str], list[str], np.ndarray]:
    texts_a, texts_b, labels = zip(*rows, strict=True)
    return list(texts_a), list(texts_b), np.array(labels, dtype="float32")


class StreamReader:
    """The Python side of the stream: yields one file's checked rows for `tf.data` (in chunks,
    unbatched there), keeps each completely read file's counts, and the first error it raised
    (tf.data reports it as an opaque op error; `StreamedPairData.diagnose` gives it back in one
    line)."""

    def __init__(self, spec: PairFileSpec) -> None:
        self.spec = spec
        self.counts: dict[str, RowCount] = {}
        self.failure: TapefitError | None = None
        self.lock = threading.Lock()

    def chunks(self, name: bytes) -> Iterator[tuple[list[str], list[str], np.ndarray]]:
        """One file's checked rows, `CHUNK_ROWS` at a time, as (texts1, texts2, labels)."""
        path = name.decode()
        count = RowCount()
        chunk: list[tuple[str, str, float]] = []
        try:
            for row in pair_rows(path, self.spec, count):
                chunk.append(row)
                if len(chunk) == CHUNK_ROWS:
                    yield _columns(chunk)
                    chunk = []
        except TapefitError as error:
            with self.lock:
                self.failure = self.failure or error
            raise
        if chunk:
            yield _columns(chunk)
        with self.lock:
            self.counts[path] = count

    def dataset(self, files: Sequence[Path], seed: int, shuffle_buffer: int) -> tf.data.Dataset:
        """Unbatched `(text1, text2, label)` rows of `files`: the files in a new seeded order
        each epoch, `OPEN_FILES` at a time with their rows interleaved, then shuffled through a
        buffer of `shuffle_buffer` rows."""
        names = tf.data.Dataset.from_tensor_slices([str(f) for f in files])
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        rows = names.interleave(
            lambda name: tf.data.Dataset.from_generator(
                self.chunks, output_signature=CHUNK, args=(name,)
            ).unbatch(),
            cycle_length=min(OPEN_FILES, len(files)),
            block_length=1,
        )
        return rows.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)


def batched(rows: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """`((text1, text2), label)` batches of `rows`, prefetched."""
    pairs = rows.map(lambda a, b, label: ((a, b), label))
    return pairs.batch(batch_size).prefetch(PREFETCH_BATCHES).with_options(pipeline_options())


def sample_rows(rows: tf.data.Dataset, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first `size` rows of a shuffled stream, as arrays (texts decoded)."""
    texts_a, texts_b, labels = [], [], []
    for a, b, label in rows.take(size).batch(4096).as_numpy_iterator():
        texts_a += [t.decode() for t in a]
        texts_b += [t.decode() for t in b]
        labels.append(label)
    return (
        np.array(texts_a, dtype=object),
        np.array(texts_b, dtype=object),
        np.concatenate(labels) if labels else np.zeros(0, "float32"),
    )


@dataclass
class StreamedPairData(PairData):
    """`PairData` whose training split streams from `train_files`; `splits` hold only the
    validation and test pairs (the whole-split metrics need them) and `vocabulary_sample` the
    training pairs the vocabulary is adapted on."""

    reader: StreamReader | None = None
    train_files: list[Path] = field(default_factory=list)
    shuffle_buffer: int = 10_000
    vocabulary_sample: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    batch_size: int = 64

    def training_texts(self) -> np.ndarray:
        """The texts of the vocabulary sample (not the whole stream), to adapt on."""
        texts_a, texts_b, _ = self.vocabulary_sample
        return np.concatenate([texts_a, texts_b])

    def rebuilt(self, batch_size: int) -> StreamedPairData:
        """A new stream over the same files, another batch size; the sample is drawn again,
        so the stream's order is the one a fresh run sees (a sweep's trial = its re-run)."""
        rebuilt = streamed_pair_data(
            self.train_files,
            dict(self.splits),
            self.reader.spec,
            batch_size=batch_size,
            seed=self.seed,
            shuffle_buffer=self.shuffle_buffer,
            vocabulary_pairs=len(self.vocabulary_sample[2]),
            held_out_skipped=self.skipped_lines,
        )
        return dataclasses.replace(rebuilt, text_options=self.text_options)

    def sharded_by_file(self, workers: int, index: int) -> StreamedPairData:
        """The training stream over this worker's share of the files (every `workers`-th,
        from `index`), for `trainer.shard_policy=file`."""
        mine = self.train_files[index::workers]
        if not mine:
            raise TapefitError(
                f"trainer.shard_policy=file: {len(self.train_files)} training files cannot feed "
                f"{workers} workers: split the data into at least {workers} files, or use "
                "trainer.shard_policy=data"
            )
        rows = self.reader.dataset(mine, self.seed, self.shuffle_buffer)
        return dataclasses.replace(self, train=batched(rows, self.batch_size), train_files=mine)

    def read_counts(self) -> dict[str, int]:
        """For `metrics.json`: training rows in the files read to their end, and bad lines
        skipped there and in the held-out files."""
        counts = [
            self.reader.counts[str(f)] for f in self.train_files if str(f) in self.reader.counts
        ]
        return {
            "train_rows_read": sum(count.rows for count in counts),
            "skipped_lines": self.skipped_lines + sum(len(c.skipped) for c in counts),
        }

    def diagnose(self, error: Exception) -> TapefitError | None:
        """The reader's own one-line error behind a failed pipeline, if it raised one."""
        return self.reader.failure if self.reader is not None else None


def streamed_pair_data(
    train_files: list[Path],
    held_out: dict[str, PairSplit],
    spec: PairFileSpec,
    *,
    batch_size: int,
    seed: int,
    shuffle_buffer: int,
    vocabulary_pairs: int = 100_000,
    held_out_skipped: int = 0,
) -> StreamedPairData:
    """The training stream over `train_files`, in-memory pipelines over `held_out` (val, and
    test if given), and the vocabulary sample: the stream's first `vocabulary_pairs` rows."""
    reader = StreamReader(spec)
    rows = reader.dataset(train_files, seed, shuffle_buffer)
    failure = None
    try:
        vocabulary_sample = sample_rows(rows, vocabulary_pairs)
    except tf.errors.OpError:
        if reader.failure is None:
            raise
        failure = reader.failure
    if failure is not None:  # the reader's own one-line error, not tf.data's wrapping
        raise failure
    pipelines = {
        name: batched(
            tf.data.Dataset.from_tensor_slices((a.astype(str), b.astype(str), labels)),
            batch_size,
        )
        for name, (a, b, labels) in held_out.items()
    }
    return StreamedPairData(
        train=batched(rows, batch_size),
        val=pipelines["val"],
        test=pipelines.get("test"),
        splits=dict(held_out),
        label_type=spec.label_type.value,
        label_range=(float(spec.label_range[0]), float(spec.label_range[1])),
        sizes={"train": None, **{name: len(split.labels) for name, split in held_out.items()}},
        seed=seed,
        cache=False,
        reader=reader,
        train_files=list(train_files),
        shuffle_buffer=shuffle_buffer,
        vocabulary_sample=vocabulary_sample,
        batch_size=batch_size,
        skipped_lines=held_out_skipped,
    )
