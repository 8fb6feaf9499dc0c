"""A user's project fine-tunes a pretrained encoder they have on disk (a sentence-transformers
folder) on their own pair files, through the real CLI: the run completes, exports a SavedModel
serving strings, and evaluates and predicts after the checkpoint folder is gone."""

import csv
import json
import re
import sys

import numpy as np
import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")

from tests.helpers import run_cli, run_in
from tests.text.pretrained_checkpoints import WORDS, write_hf_folder


def write_pairs(path, count, seed):
    """Pairs of short sentences over the tiny checkpoint's words, scored by their overlap."""
    rng = np.random.default_rng(seed)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["sentence1", "sentence2", "score"])
        for _ in range(count):
            a = rng.choice(WORDS, size=5, replace=False)
            kept = a[: rng.integers(0, 6)]
            b = np.concatenate([kept, rng.choice(WORDS, size=5 - len(kept), replace=False)])
            writer.writerow([" ".join(a), " ".join(rng.permutation(b)), 5.0 * len(kept) / 5])


FILES = [
    "model=siamese_pretrained",
    "data=pairs_file",
    "data.tokenizer=pretrained",
    "model.encoder.preset=checkpoints/st",
    "data.train_path=data/train.csv",
    "data.validation_path=data/dev.csv",
    "data.test_path=data/test.csv",
    "data.text1_column=sentence1",
    "data.text2_column=sentence2",
    "data.label_column=score",
    "data.batch_size=16",
]


@pytest.fixture(scope="module")
def pretrained_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained_project")
    write_hf_folder(root / "checkpoints" / "st", pooling="mean", num_layers=1)
    (root / "data").mkdir()
    # four training batches of 16: a fine-tune's every step, not its quality, is the subject
    for name, count, seed in (("train", 64, 0), ("dev", 48, 1), ("test", 48, 2)):
        write_pairs(root / "data" / f"{name}.csv", count, seed)
    return root


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_a_users_checkpoint_fine_tunes_exports_and_serves_without_its_folder(pretrained_project):
    done = run_cli(
        *FILES,
        "trainer.epochs=1",
        "trainer.export=true",
        "hydra.run.dir=runs/ft",
        cwd=pretrained_project,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = pretrained_project / "runs" / "ft"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert -1.0 <= metrics["test_spearman"] <= 1.0 and metrics["samples"]["train"] == 64
    log = (run_dir / "tapefit.log").read_text()
    assert "pretrained encoder checkpoints/st: BertBackbone" in log and "mean pooling" in log
    report = json.loads((run_dir / "export" / "verify.json").read_text())
    assert report["formats"]["saved_model"]["endpoints"].keys() >= {"serve", "encode"}

    (pretrained_project / "checkpoints" / "st").rename(pretrained_project / "checkpoints" / "gone")
    try:
        serve = (
            "import json, sys, tensorflow as tf, tensorflow_text  # noqa: F401 (its ops)\n"
            "served = tf.saved_model.load('runs/ft/export')\n"
            "out = served.signatures['serve'](texts_a=tf.constant(['a cat sat']),"
            " texts_b=tf.constant(['the dog ran']))\n"
            "print(json.dumps({k: v.shape.as_list() for k, v in out.items()}))\n"
        )
        served = run_in(pretrained_project, [sys.executable, "-c", serve])
        evaluated = run_in(
            pretrained_project,
            [sys.executable, "-m", "tapefit.evaluate", "run=runs/ft"],
            timeout=300,
        )
        predicted = run_in(
            pretrained_project,
            [sys.executable, "-m", "tapefit.predict", "run=runs/ft", "output=preds.csv"],
            timeout=300,
        )
    finally:
        (pretrained_project / "checkpoints" / "gone").rename(
            pretrained_project / "checkpoints" / "st"
        )
    assert served.returncode == 0, served.stderr[-2000:]
    assert list(json.loads(served.stdout.strip().splitlines()[-1]).values()) == [[1]]
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    again = json.loads((run_dir / "eval" / "metrics.json").read_text())
    assert again["test_spearman"] == pytest.approx(metrics["test_spearman"], abs=1e-6)
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    rows = list(csv.DictReader((pretrained_project / "preds.csv").open()))
    assert len(rows) == 48 and set(rows[0]) == {"sentence1", "sentence2", "similarity"}

    # another run starts from the fine-tuned weights (init_from), not the checkpoint's; it
    # writes no model, checkpoints or TensorBoard logs, which the first run's files cover
    # (measured: 7 s against 10-14 s with them)
    lean = ["trainer.save_model=false", "trainer.checkpoints=false"]
    lean += ["callbacks.tensorboard.enabled=false"]
    warm = run_cli(
        *FILES,
        *("trainer.epochs=1", "init_from=runs/ft", *lean, "hydra.run.dir=runs/warm"),
        cwd=pretrained_project,
    )
    assert warm.returncode == 0, warm.stderr[-3000:]
    log = (pretrained_project / "runs" / "warm" / "tapefit.log").read_text()
    # every weight from runs/ft: none kept at its start value
    loaded = re.search(r"init_from=runs/ft: (\d+) weights loaded, 0 kept", log)
    assert loaded and int(loaded[1]) > 0, log[-2000:]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["data.tokenizer=word"],
            "tapefit: error: model.encoder.preset brings its own tokenizer and "
            "data.tokenizer=word would learn another: set data.tokenizer=pretrained",
        ),
        (
            ["model.encoder.preset=checkpoints/missing"],
            "tapefit: error: model.encoder.preset=checkpoints/missing: no such folder",
        ),
        (
            ["+model.encoder.units=64"],
            "tapefit: error: model.encoder.units means nothing beside model.encoder.preset",
        ),
        (
            ["trainer.export=true", "trainer.export_formats=[saved_model,onnx]"],
            "tapefit: error: trainer.export_formats: onnx cannot take SiameseModel: its "
            "endpoints take strings",
        ),
    ],
    ids=["learnt-vocabulary", "missing-folder", "scratch-key", "onnx"],
)
def test_a_wrong_setting_stops_before_training_in_one_line(pretrained_project, overrides, message):
    done = run_cli(*FILES, *overrides, "hydra.run.dir=runs/refused", cwd=pretrained_project)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert len(errors) == 1 and errors[0].startswith(message), done.stderr[-2000:]
    assert not (pretrained_project / "runs" / "refused" / "model.keras").exists()
