"""`tapefit.runner.mined_files`: a pair file written again with a run's mined negatives."""

import csv
import json

import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

from tapefit.errors import TapefitError
from tapefit.evaluation.mining import MiningOptions
from tapefit.runner import mined_files
from tapefit.runner.mined_files import mine_run, pair_spec

# Unit vectors: a1 is nearer p2 (0.8) than p1 (0.6), a2 nearer p3 (0.8) than p2 (0.6), and a3
# is orthogonal to every positive.
VECTORS = {
    "p1": [1.0, 0.0, 0.0, 0.0],
    "p2": [0.0, 1.0, 0.0, 0.0],
    "p3": [0.0, 0.0, 1.0, 0.0],
    "a1": [0.6, 0.8, 0.0, 0.0],
    "a2": [0.0, 0.6, 0.8, 0.0],
    "a3": [0.0, 0.0, 0.0, 1.0],
}
ROWS = [("a1", "p1", "4"), ("a1", "p2", "3"), ("a2", "p3", "5"), ("a3", "p1", "1")]


class Encoder:
    def encode(self, texts):
        return np.array([VECTORS[text] for text in texts], "float32")


def finished_run(monkeypatch, data_node, model):
    """A finished run whose config's `data` is `data_node` and whose model is `model`."""
    cfg = OmegaConf.create({"data": data_node})
    monkeypatch.setattr(mined_files, "config_and_model_file", lambda *args: (cfg, "model.keras"))
    monkeypatch.setattr(keras.models, "load_model", lambda path: model)


def write_tsv(path, rows, header=None):
    with path.open("w", newline="") as file:
        writer = csv.writer(file, delimiter="\t")
        writer.writerows([header, *rows] if header else rows)
    return path


def test_the_input_is_read_with_the_runs_pair_keys_but_never_its_negatives():
    node = {"text1_column": "query", "negative_column": "hard", "batch_size": 8, "header": False}
    spec = pair_spec(node)
    assert (spec.text1_column, spec.text2_column, spec.header) == ("query", "text2", False)
    assert spec.negative_column is None


def test_no_positive_of_an_anchor_nor_the_anchor_is_its_negative(monkeypatch, tmp_path):
    node = {"text1_column": "query", "text2_column": "answer", "label_column": "score"}
    finished_run(monkeypatch, node, Encoder())
    source = write_tsv(tmp_path / "pairs.tsv", ROWS, ["query", "answer", "score"])
    done = mine_run("run", source, tmp_path / "mined.tsv", [], MiningOptions(margin=0.1))
    with (tmp_path / "mined.tsv").open(newline="") as file:
        written = list(csv.reader(file, delimiter="\t"))
    assert written == [
        ["query", "answer", "score", "negative", "positive_rank", "positive_score",
         "negative_score"],
        ["a1", "p1", "4.0", "p3", "2", "0.6", "0.0"],  # p2 is a1's positive too: never its negative
        ["a1", "p2", "3.0", "p3", "1", "0.8", "0.0"],
        ["a2", "p3", "5.0", "p2", "1", "0.8", "0.6"],
    ]  # fmt: skip
    # a3's candidates all score 0, not below its positive's 0 by the margin: left out, counted
    assert done == {"rows": 3, "anchors": 4, "without_negative": 1, "median_positive_rank": 1.0}


def test_columns_given_by_index_are_named_text1_and_text2_in_jsonl(monkeypatch, tmp_path):
    node = {"text1_column": "0", "text2_column": "1", "label_column": None, "header": False}
    finished_run(monkeypatch, node, Encoder())
    source = write_tsv(tmp_path / "pairs.tsv", [row[:2] for row in ROWS[2:]])
    options = MiningOptions(num_negatives=2)
    done = mine_run("run", source, tmp_path / "mined.jsonl", [], options)
    lines = (tmp_path / "mined.jsonl").read_text().splitlines()
    # the corpus is this file's positives, p3 and p1: one candidate per anchor, not two
    assert [json.loads(line) for line in lines] == [
        {"text1": "a2", "text2": "p3", "negative": "p1", "positive_rank": 1,
         "positive_score": 0.8, "negative_score": 0.0},
        {"text1": "a3", "text2": "p1", "negative": "p3", "positive_rank": 1,
         "positive_score": 0.0, "negative_score": 0.0},
    ]  # fmt: skip
    assert (done["rows"], done["without_negative"]) == (2, 0)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("mined.txt", r"^output=.*mined.txt: write .tsv, .csv or .jsonl$"),
        ("nowhere/mined.tsv", r"^output=.*mined.tsv: the folder .*nowhere does not exist$"),
    ],
)
def test_an_output_it_cannot_write_is_refused_before_the_run_is_read(
    monkeypatch, tmp_path, output, message
):
    monkeypatch.setattr(mined_files, "config_and_model_file", lambda *a: pytest.fail("read"))
    with pytest.raises(TapefitError, match=message):
        mine_run("run", tmp_path / "pairs.tsv", tmp_path / output, [], MiningOptions())


def test_a_model_without_encode_is_refused_naming_its_class(monkeypatch, tmp_path):
    class Classifier:
        pass

    finished_run(monkeypatch, {}, Classifier())
    source = write_tsv(tmp_path / "pairs.tsv", ROWS, ["text1", "text2", "label"])
    with pytest.raises(TapefitError, match=r"\(Classifier\) has no encode\(texts\): mining needs"):
        mine_run("run", source, tmp_path / "mined.csv", [], MiningOptions())
    assert not (tmp_path / "mined.csv").exists()
