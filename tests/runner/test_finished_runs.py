"""A finished run used again: `python -m tapefit.evaluate` reproduces its test metrics exactly
(also on other data given by the same keys), `python -m tapefit.predict` writes its
predictions, and a directory without a model is refused in one line."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from tapefit import evaluate, predict
from tests.helpers import REPO, run_in

pytestmark = pytest.mark.slow


def module(name: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m tapefit.NAME ARGS` in a fresh process."""
    return run_in(REPO, [sys.executable, "-m", f"tapefit.{name}"], *args)


def test_evaluate_reproduces_the_runs_test_metrics_exactly(classifier_run):
    run_dir, _ = classifier_run
    done = module("evaluate", f"run={run_dir}")
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    again = json.loads((run_dir / "eval" / "metrics.json").read_text())
    assert again == {k: metrics[k] for k in ("test_loss", "test_accuracy")}
    assert f"test_accuracy={metrics['test_accuracy']:.4f}" in done.stdout


def test_predict_writes_labels_and_probabilities_whose_accuracy_is_the_runs(
    classifier_run, tmp_path
):
    run_dir, _ = classifier_run
    out = tmp_path / "preds.csv"
    done = module("predict", f"run={run_dir}", f"output={out}")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader(out.open()))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert len(rows) == metrics["samples"]["test"]
    assert list(rows[0]) == ["label", *(f"prob_{i}" for i in range(10))]
    probabilities = np.array([[float(r[f"prob_{i}"]) for i in range(10)] for r in rows])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    labels = [int(r["label"]) for r in rows]
    assert labels == probabilities.argmax(axis=1).tolist()
    # the test split's labels, rebuilt by the loader from the run's seed
    from tapefit.runner.finished_runs import load_run

    _, data, _ = load_run(run_dir, [])
    gold = np.concatenate([y.numpy() for _, y in data.test])
    assert np.mean(gold == labels) == pytest.approx(metrics["test_accuracy"], abs=1e-6)


def test_a_siamese_run_evaluates_to_its_spearman_and_predicts_pair_similarities(
    siamese_run, tmp_path
):
    assert evaluate.main([f"run={siamese_run}"]) == 0
    metrics = json.loads((siamese_run / "metrics.json").read_text())
    again = json.loads((siamese_run / "eval" / "metrics.json").read_text())
    assert again["test_spearman"] == metrics["test_spearman"]
    assert (siamese_run / "eval" / "similarity.png").is_file()
    out = tmp_path / "pairs.csv"
    assert predict.main([f"run={siamese_run}", f"output={out}"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == ["text1", "text2", "similarity"] and len(rows) == 200
    assert all(-1.0 - 1e-6 <= float(r["similarity"]) <= 1.0 + 1e-6 for r in rows)
    # on the labels' scale: cosine_mse's rescaling from data.label_range onto the loss's
    # target range, inverted, and clipped to the label range
    scaled = tmp_path / "scaled.csv"
    assert predict.main([f"run={siamese_run}", f"output={scaled}", "scale=label"]) == 0
    labelled = list(csv.DictReader(scaled.open()))
    assert list(labelled[0]) == ["text1", "text2", "similarity", "predicted_label"]
    from tapefit.runner.finished_runs import load_run

    model = load_run(siamese_run, [])[2]  # the label range the data gave the model
    (low, high), (target_low, target_high) = model.label_range, model.loss.target_range
    similarity = np.array([float(r["similarity"]) for r in labelled])
    expected = low + (similarity - target_low) * (high - low) / (target_high - target_low)
    got = np.array([float(r["predicted_label"]) for r in labelled])
    np.testing.assert_allclose(got, np.clip(expected, low, high), atol=1e-5)
    assert got.min() >= low and got.max() <= high and len(set(got.round(3))) > 100


def test_evaluate_on_other_data_given_by_the_same_keys(siamese_run):
    from tapefit.evaluation.metrics import pair_metrics
    from tapefit.runner.finished_runs import load_run

    assert evaluate.main([f"run={siamese_run}", "data.test_size=120"]) == 0
    # other data: a folder of its own, the run's own test split's figures left as they are
    again = json.loads((siamese_run / "eval" / "data.test_size-120" / "metrics.json").read_text())
    _, data, model = load_run(siamese_run, ["data.test_size=120"])
    scores = model.predict(data.inputs("test"), verbose=0)
    expected = pair_metrics(scores, data.splits["test"][2], data.label_type)
    assert len(data.splits["test"][2]) == 120
    assert again["test_spearman"] == pytest.approx(expected["spearman"], abs=1e-6)
    original = json.loads((siamese_run / "metrics.json").read_text())
    assert again["test_spearman"] != original["test_spearman"]
    assert evaluate.main([f"run={siamese_run}", "name=../x", "data.test_size=120"]) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "run= is missing"),
        (["run=/nonexistent/run"], "is not a directory"),
        (["oops"], "is not key=value"),
    ],
)
def test_bad_arguments_are_one_line(args, message, capsys):
    assert evaluate.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tapefit: error:") and message in err[0]


@pytest.mark.parametrize(
    ("program", "args", "message"),
    [
        (predict, ["name=news"], "name= is not an argument of tapefit.predict: it takes run="),
        (evaluate, ["output=x.csv"], "output= is not an argument of tapefit.evaluate"),
        (evaluate, ["trainer.epochs=3"], "trainer.epochs=3: a finished run's model and training"),
        (predict, ["model.dropout=0"], "only its data changes here (data.* and seed"),
        (predict, ["scale=logits"], "scale=logits: choose one of similarity, label"),
        (predict, ["split=dev"], "split=dev: choose test, val or train"),
    ],
)
def test_an_argument_that_would_do_nothing_is_refused(program, args, message, tmp_path, capsys):
    base = [f"run={tmp_path}"] + ([f"output={tmp_path / 'p.csv'}"] if program is predict else [])
    assert program.main([*base, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_scale_label_needs_a_model_that_learnt_the_labels_scale(classifier_run, tmp_path, capsys):
    run_dir, _ = classifier_run
    out = tmp_path / "p.csv"
    assert predict.main([f"run={run_dir}", f"output={out}", "scale=label"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "tapefit: error: scale=label: the run's model (Classifier) has no label scale to map its "
        "outputs onto (a SiameseModel trained with model.loss.name=cosine_mse has); leave "
        "scale= out"
    ]
    assert not out.exists()


def test_predict_takes_a_kept_checkpoint(classifier_run, tmp_path):
    run_dir, _ = classifier_run
    out = tmp_path / "p.csv"
    assert predict.main([f"run={run_dir}", f"output={out}", "ckpt=model.keras"]) == 0
    assert predict.main([f"run={run_dir}", f"output={out}", "ckpt=nothing.keras"]) == 2


def test_a_run_directory_without_a_model_is_refused_in_one_line(tmp_path):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("seed: 0\nmodel: {_target_: x.Y}\n")
    done = module("predict", f"run={tmp_path}", f"output={tmp_path / 'p.csv'}")
    assert done.returncode == 2
    assert "has no model.keras" in done.stderr and "Traceback" not in done.stderr
