"""`tapefit.data.pair_file_loading`: the `pair_files` loader's splits read into memory or
streamed, the held-out files' lines counted, and graded labels checked against binary ones."""

import json

import numpy as np
import pytest

from tapefit.data.pair_file_loading import (
    HeldOutFractions,
    PairBatching,
    StreamLimits,
    check_label_type,
    in_memory_pair_files,
    streamed_pair_files,
)
from tapefit.data.pair_files import PairFileSpec
from tapefit.errors import TapefitError

BATCHING = PairBatching(batch_size=4, cache=False, seed=0)
FRACTIONS = HeldOutFractions(val_fraction=0.1, test_fraction=0.2)
LIMITS = StreamLimits(shuffle_buffer=8, vocabulary_pairs=5, max_held_out_pairs=10)


def tsv(path, labels, extra=""):
    """A pair file of one row per label (`a <path stem> <i>`, `b <i>`), then `extra` lines."""
    rows = [f"a {path.stem} {i}\tb {i}\t{label}\n" for i, label in enumerate(labels)]
    path.write_text("text1\ttext2\tlabel\n" + "".join(rows) + extra)
    return str(path)


def jsonl(path, labels):
    lines = [
        json.dumps({"text1": f"q{i}", "text2": f"d{i}", "label": x}) for i, x in enumerate(labels)
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_splits_without_a_file_are_held_out_of_the_training_pairs(tmp_path):
    train = tsv(tmp_path / "train.tsv", [i % 6 for i in range(20)], extra="one field only\n")
    val = jsonl(tmp_path / "val.jsonl", [0.5, 4.0, 2.5])
    data = in_memory_pair_files(
        {"train": train, "val": val, "test": None},
        PairFileSpec(on_bad_line="skip"),
        BATCHING,
        FRACTIONS,
    )
    assert data.sizes == {"train": 16, "test": 4, "val": 3}  # a fifth of 20 held out for test
    assert data.splits["val"].texts_a.tolist() == ["q0", "q1", "q2"]  # the file, not held out
    assert data.skipped_lines == 1 and data.read_counts() == {"skipped_lines": 1}
    assert (data.label_type, data.label_range, data.cache) == ("graded", (0.0, 5.0), False)
    (texts_a, _), labels = next(iter(data.train))
    assert texts_a.shape == (4,) and labels.shape == (4,)  # the batch size


def test_the_held_out_pairs_are_drawn_by_the_seed(tmp_path):
    train = tsv(tmp_path / "train.tsv", [i % 6 for i in range(20)])
    paths = {"train": train, "val": None, "test": None}

    def held_out(seed):
        batching = PairBatching(batch_size=4, cache=False, seed=seed)
        data = in_memory_pair_files(paths, PairFileSpec(), batching, FRACTIONS)
        return data.splits["test"].texts_a.tolist()

    assert held_out(0) == held_out(0) and held_out(0) != held_out(1)


def test_graded_labels_that_are_all_0_or_1_are_refused_across_every_split(tmp_path):
    train = tsv(tmp_path / "train.tsv", [i % 2 for i in range(20)])
    test = tsv(tmp_path / "test.tsv", [0, 1, 1])
    paths = {"train": train, "val": None, "test": test}
    with pytest.raises(TapefitError, match=r"every label in the pair files is 0 or 1") as error:
        in_memory_pair_files(paths, PairFileSpec(), BATCHING, FRACTIONS)
    assert "\n" not in str(error.value)
    graded_test = tsv(tmp_path / "graded.tsv", [0, 1, 3])  # one grade in another split
    data = in_memory_pair_files({**paths, "test": graded_test}, PairFileSpec(), BATCHING, FRACTIONS)
    assert data.sizes == {"train": 18, "test": 3, "val": 2}


@pytest.mark.parametrize(
    ("labels", "spec"),
    [
        ([0.0, 1.0, 1.0], PairFileSpec(label_type="binary")),
        ([0.0, 1.0, 1.0], PairFileSpec(label_range=[0, 1])),
        ([0.0, 0.5, 1.0], PairFileSpec()),
        ([2.0, 3.0], PairFileSpec()),
    ],
    ids=["binary", "grades_from_0_to_1", "a_grade_between", "higher_grades"],
)
def test_labels_that_fit_the_label_type_pass(labels, spec):
    check_label_type(np.array(labels), spec)


def test_the_refusal_names_both_fixes():
    with pytest.raises(TapefitError) as error:
        check_label_type(np.array([1.0, 1.0]), PairFileSpec())
    message = str(error.value)
    assert "set data.label_type=binary model.loss.name=contrastive" in message
    assert "data.label_range=[0, 1] if they really are grades" in message


def test_a_stream_reads_its_held_out_files_into_memory_and_counts_their_bad_lines(tmp_path):
    (tmp_path / "shards").mkdir()
    for shard in ("b", "a"):
        tsv(tmp_path / "shards" / f"{shard}.tsv", [i % 6 for i in range(6)])
    val = tsv(tmp_path / "val.tsv", [1, 2, 3], extra="bad\n")
    test = tsv(tmp_path / "test.tsv", [4, 5])
    data = streamed_pair_files(
        {"train": str(tmp_path / "shards" / "*.tsv"), "val": val, "test": test},
        PairFileSpec(on_bad_line="skip", max_skipped_fraction=0.5),
        BATCHING,
        LIMITS,
    )
    assert [path.name for path in data.train_files] == ["a.tsv", "b.tsv"]
    assert data.sizes == {"train": None, "val": 3, "test": 2}
    assert data.skipped_lines == 1
    assert len(data.vocabulary_sample[2]) == 5  # the limits' vocabulary sample
    assert (data.shuffle_buffer, data.batch_size, data.cache) == (8, 4, False)


def test_a_stream_without_a_training_file_names_the_option():
    with pytest.raises(TapefitError, match=r"^data=pairs_file needs data\.train_path="):
        streamed_pair_files(
            {"train": None, "val": "v.tsv", "test": None}, PairFileSpec(), BATCHING, LIMITS
        )


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ("train.tsv", r"^pair file \S+train\.tsv does not exist: check data\.train_path"),
        ("shards", r"^pair file \S+shards is a directory: point the path at a file in it$"),
    ],
    ids=["missing", "a_directory"],
)
def test_a_streams_training_paths_are_checked_before_reading(tmp_path, train, message):
    """Before the held-out files are read: a bad line in them is not what is reported."""
    (tmp_path / "shards").mkdir()
    val = tsv(tmp_path / "val.tsv", [1, 2], extra="a bad line\n")
    paths = {"train": str(tmp_path / train), "val": val, "test": None}
    with pytest.raises(TapefitError, match=message):
        streamed_pair_files(paths, PairFileSpec(), BATCHING, LIMITS)


def test_a_held_out_file_past_the_limit_is_refused(tmp_path):
    train = tsv(tmp_path / "train.tsv", [1, 2])
    test = tsv(tmp_path / "test.tsv", [1, 2, 3, 4, 5])
    paths = {"train": train, "val": tsv(tmp_path / "val.tsv", [1]), "test": test}
    limits = StreamLimits(shuffle_buffer=8, vocabulary_pairs=5, max_held_out_pairs=4)
    with pytest.raises(TapefitError, match=r"^data\.test_path holds more than data\.max_held_out"):
        streamed_pair_files(paths, PairFileSpec(), BATCHING, limits)


def test_a_streams_binary_looking_labels_are_refused(tmp_path):
    train = tsv(tmp_path / "train.tsv", [0, 1, 1, 0])
    paths = {"train": train, "val": tsv(tmp_path / "val.tsv", [1, 0]), "test": None}
    with pytest.raises(TapefitError, match=r"every label in the pair files is 0 or 1"):
        streamed_pair_files(paths, PairFileSpec(), BATCHING, LIMITS)


@pytest.mark.parametrize(
    ("train", "test"),
    [([0, 1, 1, 0], [2.5]), ([0, 1, 4, 0], None)],
    ids=["a_grade_in_the_test_file", "a_grade_in_the_training_sample"],
)
def test_a_streams_labels_are_checked_on_the_sample_and_the_held_out_files(tmp_path, train, test):
    paths = {
        "train": tsv(tmp_path / "train.tsv", train),
        "val": tsv(tmp_path / "val.tsv", [1, 0]),
        "test": None if test is None else tsv(tmp_path / "test.tsv", test),
    }
    data = streamed_pair_files(paths, PairFileSpec(), BATCHING, LIMITS)
    assert sorted(data.vocabulary_sample[2].tolist()) == sorted(map(float, train))


@pytest.mark.parametrize(("split", "key"), [("val", "validation_path"), ("test", "test_path")])
def test_a_missing_held_out_file_names_its_own_option(tmp_path, split, key):
    val = tsv(tmp_path / "val.tsv", [1, 2])
    paths = {"train": tsv(tmp_path / "train.tsv", [1, 2]), "val": val, "test": None}
    paths[split] = str(tmp_path / "dve.tsv")
    with pytest.raises(TapefitError) as refused:
        streamed_pair_files(paths, PairFileSpec(), BATCHING, LIMITS)
    missing = tmp_path / "dve.tsv"
    assert str(refused.value) == f"pair file {missing} does not exist: check data.{key}"
