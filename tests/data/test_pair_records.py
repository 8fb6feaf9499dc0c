"""tapefit/data/pair_records.py: the formats people have (Parquet, a JSON array, JSON lines
named .json) read as CSV is, with the same one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tapefit import TapefitError
from tapefit.data.pair_files import PairFileSpec, RowCount, pair_rows, read_pair_file
from tapefit.data.synthetic_pairs import PairGenerator

STS = PairFileSpec(text1_column="sentence1", text2_column="sentence2", label_column="score")


def sts_records(count: int, seed: int = 0) -> list[dict]:
    """Pairs with the STS benchmark's names, as `datasets` and pandas write them."""
    texts_a, texts_b, labels = PairGenerator(seed=seed).pairs(count)
    return [
        {"idx": i, "sentence1": a, "sentence2": b, "score": float(y)}
        for i, (a, b, y) in enumerate(zip(texts_a, texts_b, labels, strict=True))
    ]


def write_parquet(path, records, row_group_size=64):
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=row_group_size)
    return path


def test_parquet_json_array_and_json_lines_read_alike(tmp_path):
    records = sts_records(300)
    parquet = write_parquet(tmp_path / "train.parquet", records)  # 5 row groups
    assert pq.ParquetFile(parquet).num_row_groups == 5
    array = tmp_path / "train.json"
    array.write_text(json.dumps(records, indent=2))
    lines = tmp_path / "lines.json"  # JSON lines under a .json name
    lines.write_text("".join(json.dumps(r) + "\n" for r in records))
    read = [read_pair_file(path, STS) for path in (parquet, array, lines)]
    for rows in read:
        assert list(rows.texts_a) == [r["sentence1"] for r in records]
        assert list(rows.texts_b) == [r["sentence2"] for r in records]
        np.testing.assert_array_equal(rows.labels, np.float32([r["score"] for r in records]))


def test_parquet_streams_row_group_by_row_group(tmp_path, monkeypatch):
    """Only the needed columns, one batch at a time: the stream never holds the whole file."""
    path = write_parquet(tmp_path / "big.parquet", sts_records(256), row_group_size=32)
    asked = []
    original = pq.ParquetFile.iter_batches

    def recorded(self, *args, **kwargs):
        asked.append(kwargs.get("columns"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recorded)
    count = RowCount()
    rows = pair_rows(path, STS, count)
    first = next(rows)
    assert first[0] == sts_records(1)[0]["sentence1"] and count.rows == 1
    assert asked == [["sentence1", "sentence2", "score"]]  # not "idx"
    assert len(list(rows)) == 255 and count.lines == 256


@pytest.mark.parametrize("kind", ["parquet", "json"])
def test_a_file_naming_its_columns_otherwise_says_which_key_to_set(tmp_path, kind):
    records = sts_records(20)
    path = tmp_path / f"pairs.{kind}"
    if kind == "parquet":
        write_parquet(path, records)
    else:
        path.write_text(json.dumps(records))
    with pytest.raises(TapefitError) as refused:
        read_pair_file(path, PairFileSpec())
    message = str(refused.value)
    assert "'text1'" in message and "sentence1" in message and "score" in message
    assert "set data.text1_column to one of them" in message and "\n" not in message


def test_bad_records_name_their_position_and_skip_like_lines(tmp_path):
    records = sts_records(40)
    records[6]["score"] = 9.0  # outside [0, 5]
    records[9] = {"sentence1": "only one"}
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(records))
    with pytest.raises(TapefitError, match=r"pairs\.json:7: label 9\.0 is outside"):
        read_pair_file(path, STS)
    rows = read_pair_file(path, PairFileSpec(**{**STS.__dict__, "on_bad_line": "skip"}))
    assert len(rows.labels) == 38 and rows.skipped_lines == [7, 10]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.parquet", b"PAR1 not really", r"broken\.parquet is not a readable Parquet file"),
        ("broken.json", b'[{"sentence1": "a",', r"broken\.json:1: invalid JSON .*JSON array"),
    ],
)
def test_unreadable_files_are_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TapefitError, match=message) as refused:
        read_pair_file(path, STS)
    assert "\n" not in str(refused.value)


def test_a_hugging_face_dataset_folder_reads_as_its_parquet_twin(tmp_path):
    """`save_to_disk` folders, as sentence-transformers users have STS-b and NLI: one split's
    folder reads like a file; a DatasetDict folder is refused, naming its splits."""
    datasets = pytest.importorskip("datasets")
    records = sts_records(300)
    split = datasets.Dataset.from_list(records)
    split.save_to_disk(tmp_path / "sts" / "train")
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(tmp_path / "sts_dict")
    parquet = write_parquet(tmp_path / "train.parquet", records)
    from_folder = read_pair_file(tmp_path / "sts" / "train", STS)
    from_parquet = read_pair_file(parquet, STS)
    assert list(from_folder.texts_a) == list(from_parquet.texts_a)
    np.testing.assert_array_equal(from_folder.labels, from_parquet.labels)
    with pytest.raises(TapefitError) as refused:
        read_pair_file(tmp_path / "sts_dict", STS)
    assert str(refused.value) == (
        f"pair file {tmp_path / 'sts_dict'} is a Hugging Face DatasetDict with splits test, "
        f"train: point each path at one split's folder ({tmp_path / 'sts_dict' / 'test'})"
    )
    with pytest.raises(TapefitError, match=r"no column 'text1'; it has \['idx', 'sentence1'"):
        read_pair_file(tmp_path / "sts" / "train", PairFileSpec())


@pytest.mark.slow  # a run through the CLI
def test_a_users_parquet_dataset_folder_and_jsonl_files_train_from_the_cli(tmp_path):
    """From the user's folder, as they have the files: the training pairs streamed from
    Parquet, validation a Hugging Face dataset folder, test JSON lines, columns named as in
    STS-b."""
    from tests.helpers import SMALL_SIAMESE, run_cli, run_cli_batch

    datasets = pytest.importorskip("datasets")
    write_parquet(tmp_path / "train.parquet", sts_records(512, seed=1))
    datasets.Dataset.from_list(sts_records(96, seed=2)).save_to_disk(tmp_path / "val")
    (tmp_path / "test.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in sts_records(96, seed=3))
    )
    result = run_cli(
        "experiment=siamese",
        "data=pairs_file",
        "data.train_path=train.parquet",
        "data.validation_path=val",
        "data.test_path=test.jsonl",
        "data.stream=true",
        "data.text1_column=sentence1",
        "data.text2_column=sentence2",
        "data.label_column=score",
        *SMALL_SIAMESE,  # the files are the subject, not the encoder
        "trainer.epochs=1",
        "trainer.verbose=0",
        "hydra.run.dir=run",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["samples"]["val"] == 96 and metrics["samples"]["test"] == 96
    assert -1 <= metrics["test_spearman"] <= 1
    # predictions keep the input's column names; another test file gets its own eval folder
    write_parquet(tmp_path / "news.parquet", sts_records(64, seed=4))
    predicted, evaluated = run_cli_batch(
        [
            ("tapefit.predict", ["run=run", "output=predictions.csv"]),
            ("tapefit.evaluate", ["run=run", "data.test_path=news.parquet"]),
        ],
        cwd=tmp_path,
    )
    assert predicted.returncode == 0 and evaluated.returncode == 0, evaluated.stderr[-3000:]
    header = (tmp_path / "predictions.csv").read_text().splitlines()[0]
    assert header == "sentence1,sentence2,similarity"
    news = json.loads((tmp_path / "run" / "eval" / "news" / "metrics.json").read_text())
    assert -1 <= news["test_spearman"] <= 1


def test_a_missing_optional_package_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    path = write_parquet(tmp_path / "pairs.parquet", sts_records(4))
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)  # not installed
    with pytest.raises(TapefitError) as refused:
        read_pair_file(path, STS)
    assert str(refused.value) == (
        f"{path}: reading it as Parquet needs pyarrow: pip install 'tapefit[data]'"
    )
