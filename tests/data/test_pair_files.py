"""The pair-file reader: formats, columns, quoting, and a clear error for every bad line."""

import json

import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.data.pair_files import PairFileSpec, read_pair_file


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_header_and_quoted_fields(tmp_path):
    path = write(tmp_path / "p.csv", 'text1,text2,label\n"a, b",c d,4.5\nx,"y ""z""",0\n')
    rows = read_pair_file(path, PairFileSpec())
    assert list(rows.texts_a) == ["a, b", "x"] and list(rows.texts_b) == ["c d", 'y "z"']
    np.testing.assert_allclose(rows.labels, [4.5, 0.0])


def test_tsv_without_header_by_column_index_and_quoting_off(tmp_path):
    # STS-style TSV: stray quotes inside the text must be kept verbatim, hence quoting=none.
    path = write(tmp_path / "p.tsv", 'g1\t3.2\tsay "hi\tsay hello\ng2\t1\tone\ttwo\n')
    spec = PairFileSpec(
        header=False, quoting="none", text1_column="2", text2_column="3", label_column="1"
    )
    rows = read_pair_file(path, spec)
    assert list(rows.texts_a) == ['say "hi', "one"]
    np.testing.assert_allclose(rows.labels, [3.2, 1.0])


def test_named_columns_in_any_order_and_custom_delimiter(tmp_path):
    path = write(tmp_path / "p.txt", "score;left;right\n2;l1;r1\n")
    spec = PairFileSpec(
        format="csv", delimiter=";", text1_column="left", text2_column="right", label_column="score"
    )
    rows = read_pair_file(path, spec)
    assert (rows.texts_a[0], rows.texts_b[0], rows.labels[0]) == ("l1", "r1", 2.0)


def test_jsonl(tmp_path):
    lines = [{"text1": "a", "text2": "b", "label": 1}, {"text1": "c", "text2": "d", "label": "0.5"}]
    path = write(tmp_path / "p.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n\n")
    rows = read_pair_file(path, PairFileSpec(label_range=(0, 1)))
    np.testing.assert_allclose(rows.labels, [1.0, 0.5])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("ragged.csv", "text1,text2,label\na,b,1\na,b\n", r"ragged\.csv:3: 2 fields where 3"),
        (
            "label.csv",
            "text1,text2,label\na,b,1\na,b,high\n",
            r"label\.csv:3: label 'high' is not a number",
        ),
        (
            "range.csv",
            "text1,text2,label\na,b,7\n",
            r"range\.csv:2: label 7\.0 is outside data\.label_range=\[0\.0, 5\.0\]",
        ),
        ("nan.csv", "text1,text2,label\na,b,nan\n", r"nan\.csv:2: label nan is outside"),
        (
            "json.jsonl",
            '{"text1": "a", "text2": "b", "label": 1}\n{"text1": "a",\n',
            r"json\.jsonl:2: invalid JSON",
        ),
        (
            "keys.jsonl",
            '{"text1": "a", "label": 1}\n',
            r"keys\.jsonl:1: no key 'text2' in the record; it has \['label', 'text1'\] "
            r"\(set data\.text2_column to one of them\)",
        ),
        ("quote.csv", 'text1,text2,label\n"a,b,1\n', r"quote\.csv:2: unterminated quote"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, name, content, message):
    with pytest.raises(TapefitError, match=message) as caught:
        read_pair_file(write(tmp_path / name, content), PairFileSpec())
    assert "data.on_bad_line=skip" in str(caught.value)


def test_missing_column_lists_the_header_and_the_key_to_set(tmp_path):
    path = write(tmp_path / "p.csv", "sentence1,sentence2,score\na,b,1\n")
    with pytest.raises(
        TapefitError,
        match=r"no column 'text1' in the header; it has \['sentence1', 'sentence2', 'score'\]: "
        r"set data\.text1_column to one of them$",
    ):
        read_pair_file(path, PairFileSpec())
    unlabelled = write(tmp_path / "u.csv", "text1,text2\na,b\n")  # what predict is given
    with pytest.raises(TapefitError, match=r"no column 'label'.*data\.label_column=null: a file"):
        read_pair_file(unlabelled, PairFileSpec())
    rows = read_pair_file(unlabelled, PairFileSpec(label_column=None))  # as the message says
    assert rows.labels.tolist() == [5.0]


def test_jsonl_records_with_other_keys_name_them_and_the_keys_to_set(tmp_path):
    """The mistake a new user makes with STS-style JSON lines, with and without skipping."""
    lines = "".join(f'{{"sentence1": "a{i}", "sentence2": "b", "score": 1}}\n' for i in range(30))
    path = write(tmp_path / "sts.jsonl", lines)
    with pytest.raises(TapefitError) as refused:
        read_pair_file(path, PairFileSpec())
    assert str(refused.value) == (
        f"{path}:1: no key 'text1' in the record; it has ['score', 'sentence1', 'sentence2'] "
        "(set data.text1_column to one of them); fix the line or set data.on_bad_line=skip"
    )
    with pytest.raises(TapefitError) as skipped:
        read_pair_file(path, PairFileSpec(on_bad_line="skip"))
    message = str(skipped.value)
    assert "30 of 30 lines are bad (from line 1: no key 'text1'" in message
    assert "data.text1_column" in message and "unterminated quote" not in message
    spec = PairFileSpec(text1_column="sentence1", text2_column="sentence2", label_column="score")
    assert len(read_pair_file(path, spec).labels) == 30


@pytest.mark.parametrize("content", ["", "text1,text2,label\n"])
def test_empty_files_are_errors(tmp_path, content):
    with pytest.raises(TapefitError, match="holds no usable pairs"):
        read_pair_file(write(tmp_path / "p.csv", content), PairFileSpec())


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(TapefitError, match="does not exist"):
        read_pair_file(tmp_path / "absent.csv", PairFileSpec())
    with pytest.raises(
        TapefitError, match=r"set data\.format=csv, tsv, jsonl, json, parquet or hf_dataset"
    ):
        read_pair_file(write(tmp_path / "p.dat", "x"), PairFileSpec())


def test_skip_mode_counts_bad_lines(tmp_path):
    path = write(tmp_path / "p.csv", "text1,text2,label\na,b,1\nbad\nc,d,9\ne,f,2\n")
    rows = read_pair_file(path, PairFileSpec(on_bad_line="skip", max_skipped_fraction=0.5))
    assert list(rows.texts_a) == ["a", "e"]
    assert rows.skipped == 2 and rows.skipped_lines == [3, 4]


def test_binary_labels_must_be_zero_or_one(tmp_path):
    path = write(tmp_path / "p.csv", "text1,text2,label\na,b,1\nc,d,0.5\n")
    with pytest.raises(TapefitError, match=r"p\.csv:3: label 0\.5 is not 0 or 1"):
        read_pair_file(path, PairFileSpec(label_type="binary", label_range=(0, 1)))
