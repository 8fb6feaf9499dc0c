"""Pair files as globs and lists, and streamed from disk (`data.stream=true`): every training row
once per epoch in a new seeded order, a bounded vocabulary sample, counts in metrics.json,
the file:line rules kept, and a resumed run that sees the uninterrupted run's batches."""

import json
import signal
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapefitError
from tapefit.runner.train import build_data, run
from tests.checkpointing.driver import drive, weights
from tests.helpers import SMALL_SIAMESE

HEADER = "text1\ttext2\tlabel\n"


def write_shards(folder, shards=3, rows=40, seed=0):
    """`shard-N.tsv` files of distinct pairs; returns every (text1, text2, label) written."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)]
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shard in range(shards):
        lines = [HEADER]
        for row in range(rows):
            a = " ".join(rng.choice(words, 4)) + f" s{shard}r{row}"
            b = " ".join(rng.choice(words, 4))
            label = float(rng.integers(0, 6))
            lines.append(f"{a}\t{b}\t{label}\n")
            written.append((a, b, label))
        (folder / f"shard-{shard}.tsv").write_text("".join(lines))
    return written


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    rows = write_shards(root / "train")
    write_shards(root / "held", shards=1, rows=30, seed=1)
    (root / "held" / "shard-0.tsv").rename(root / "val.tsv")
    write_shards(root / "held", shards=1, rows=20, seed=2)
    (root / "held" / "shard-0.tsv").rename(root / "test.tsv")
    return root, rows


def pair_overrides(root, *extra, stream=True):
    return [
        "experiment=siamese",
        "data=pairs_file",
        f"data.train_path={root / 'train' / 'shard-*.tsv'}",
        f"data.validation_path={root / 'val.tsv'}",
        f"data.test_path={root / 'test.tsv'}",
        f"data.stream={str(stream).lower()}",
        "data.batch_size=16",
        "data.shuffle_buffer=32",
        "data.vocabulary_pairs=50",
        *extra,
    ]


def epoch_rows(train):
    return [
        (a.decode(), b.decode(), float(y))
        for (texts_a, texts_b), labels in train.as_numpy_iterator()
        for a, b, y in zip(texts_a, texts_b, labels, strict=True)
    ]


def test_a_glob_or_a_list_of_files_is_read_whole_without_stream(corpus, compose):
    root, _ = corpus
    data = build_data(compose(pair_overrides(root, stream=False)))
    assert data.sizes == {"train": 120, "val": 30, "test": 20}
    listed = [str(root / "train" / f"shard-{i}.tsv") for i in (2, 0, 1)]
    data = build_data(compose(pair_overrides(root, f"data.train_path=[{','.join(listed)}]")))
    assert epoch_rows(data.train) and len(data.train_files) == 3


def test_a_stream_reads_every_row_once_per_epoch_in_a_new_seeded_order(corpus, compose):
    root, rows = corpus
    cfg = compose(pair_overrides(root))
    data = build_data(cfg)
    assert data.train.cardinality() == tf.data.UNKNOWN_CARDINALITY
    assert data.sizes == {"train": None, "val": 30, "test": 20}
    assert "train" not in data.splits  # the training pairs are never held
    sample_a, _, _ = data.vocabulary_sample
    assert len(sample_a) == 50  # data.vocabulary_pairs, not the corpus
    first, second = epoch_rows(data.train), epoch_rows(data.train)
    expected = Counter((a, b, y) for a, b, y in rows)
    assert Counter(first) == expected == Counter(second)
    assert first != second  # reshuffled each epoch
    assert epoch_rows(build_data(cfg).train) == first  # from the seed
    assert epoch_rows(data.rebuilt(16).train) == first  # a sweep's trial sees a fresh run's
    assert data.read_counts() == {"train_rows_read": 120, "skipped_lines": 0}


def test_a_streamed_run_reports_rows_read_and_lines_skipped(corpus, compose, tmp_path):
    root, _ = corpus
    bad = tmp_path / "train"
    write_shards(bad, shards=2, rows=30)
    with (bad / "shard-1.tsv").open("a") as file:
        file.write("only one field\n")
    cfg = compose(
        [
            *pair_overrides(root, "data.on_bad_line=skip", "trainer.epochs=1"),
            f"data.train_path={bad / '*.tsv'}",
            "trainer.verbose=0",
            *SMALL_SIAMESE,  # the stream's counts are the subject, not the encoder
        ]
    )
    metrics = run(cfg, tmp_path / "run")
    assert metrics["train_rows_read"] == 60 and metrics["skipped_lines"] == 1
    assert metrics["samples"]["train"] is None and "test_spearman" in metrics


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("bad_line", r"shard-1\.tsv:4: 1 fields where 3 were expected; fix the line or set"),
        ("no_match", r"data.train_path: no file matches '.*/nothing-\*\.tsv': check the folder"),
        ("no_validation", r"data.stream=true reads validation pairs from their own files"),
        ("held_out_too_big", r"data.validation_path holds more than data.max_held_out_pairs=10"),
    ],
)
def test_stream_errors_are_one_line(corpus, compose, tmp_path, change, message):
    root, _ = corpus
    extra = ["trainer.epochs=1", "trainer.verbose=0", *SMALL_SIAMESE]
    if change == "bad_line":
        write_shards(tmp_path / "train", shards=2, rows=10)
        path = tmp_path / "train" / "shard-1.tsv"
        lines = path.read_text().splitlines(keepends=True)
        lines[3] = "broken line\n"
        path.write_text("".join(lines))
        extra += [f"data.train_path={tmp_path / 'train' / '*.tsv'}", "data.vocabulary_pairs=5"]
    elif change == "no_match":
        extra.append(f"data.train_path={root / 'nothing-*.tsv'}")
    elif change == "no_validation":
        extra.append("data.validation_path=null")
    else:
        extra.append("data.max_held_out_pairs=10")
    with pytest.raises(TapefitError, match=message) as raised:
        run(compose(pair_overrides(root, *extra)), tmp_path / "run")
    assert "\n" not in str(raised.value)
    assert json.loads((tmp_path / "run" / "status.json").read_text())["state"] == "failed"


def test_a_streamed_run_resumed_mid_epoch_equals_the_uninterrupted_run(corpus, tmp_path):
    """SIGKILL at step 13 (epoch 2 of 3, 5 steps in; 8 steps an epoch, checkpoints every 3
    steps): the resume replays the finished epoch's order, skips the checkpointed steps and
    ends with the uninterrupted run's weights and History, bit for bit."""
    root, _ = corpus
    overrides = [
        *pair_overrides(root),
        "data.batch_size=15",
        *SMALL_SIAMESE,  # the stream's replay is tested, not the encoder
        "trainer.epochs=3",
        "trainer.deterministic=true",
        "trainer.steps_per_execution=1",
        "trainer.verbose=0",
        "trainer.checkpoint_every_steps=3",
    ]
    full = drive(tmp_path / "full", overrides=overrides)
    assert full.returncode == 0, full.stderr[-3000:]
    killed = drive(tmp_path / "run", "step:13", overrides=overrides)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = drive(tmp_path / "run", "none", "resume=true", overrides=overrides)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "after epoch 1 and 4 steps" in resumed.stderr
    for expected, actual in zip(weights(tmp_path / "full"), weights(tmp_path / "run"), strict=True):
        np.testing.assert_array_equal(actual, expected)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert history == json.loads((tmp_path / "full" / "history.json").read_text())
