"""`python -m tapefit.compare`, installed with tapefit: the docs' candidate recipes on a
user's own pair files, ranked on validation only."""

from __future__ import annotations

import json
import sys

import pytest

from tapefit.data.synthetic_pairs import PairGenerator
from tests.helpers import run_in

pytestmark = pytest.mark.slow


def write_pairs(path, count, seed):
    texts_a, texts_b, labels = PairGenerator(seed=seed).pairs(count)
    rows = [f"{a}\t{b}\t{y:.3f}" for a, b, y in zip(texts_a, texts_b, labels, strict=True)]
    path.write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")


def test_two_candidates_run_on_the_users_files_and_rank_on_validation(tmp_path):
    write_pairs(tmp_path / "train.tsv", 256, 1)
    write_pairs(tmp_path / "dev.tsv", 64, 2)
    candidates = ["tutorial (LSTM last, cosine_mse)", "bag of embeddings mean, cosent"]
    result = run_in(
        tmp_path,
        [sys.executable, "-m", "tapefit.compare"],
        *("--train", "train.tsv", "--validation", "dev.tsv", "--out", "figures.json"),
        *("data.text1_column=sentence1", "data.text2_column=sentence2"),
        *("data.label_column=score", "trainer.epochs=1", "model.encoder.units=8"),
        *("--candidates", *candidates),  # after the overrides: it takes several values
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert list(figures) == candidates
    for figure in figures.values():  # without --test, pairs_file splits a test part off train
        assert -1 <= figure["val_spearman"] <= 1 and -1 <= figure["test_spearman"] <= 1
        assert figure["best_epoch"] == 1
    table = result.stdout.split("candidate", 1)[1].splitlines()[1:3]
    ranked = sorted(candidates, key=lambda name: -figures[name]["val_spearman"])
    assert [line[:34].strip() for line in table] == ranked


def test_a_missing_file_is_one_line_and_exit_code_2(tmp_path):
    result = run_in(
        tmp_path,
        [sys.executable, "-m", "tapefit.compare"],
        *("--train", "absent.tsv", "--validation", "dev.tsv"),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "tapefit: error: --train absent.tsv: no such file; give the corpus's pair files"
    )
