"""`python -m tapefit` end to end: the run directory, and one-line errors for bad input."""

import json

import keras
import numpy as np
import pytest

from tests.helpers import built_once_per_session, run_cli_batch, scalar_tags


def test_run_directory_holds_every_artefact(classifier_run):
    run_dir, _ = classifier_run
    for name in ("history.json", "metrics.json", "model.keras", "curves.png", "history.csv"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    assert (run_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(run_dir.glob(".*.tmp*")), "temporary files were left behind"


def test_history_and_metrics_files(classifier_run):
    run_dir, result = classifier_run
    history = json.loads((run_dir / "history.json").read_text())
    assert set(history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(values) == 2 for values in history.values())
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["epochs_run"] == 2
    assert metrics["wall_time_s"] > metrics["train_time_s"] > 0
    assert metrics["samples"] == {"train": 1221, "val": 216, "test": 360}
    assert 0.8 < metrics["test_accuracy"] <= 1.0  # two epochs of the CNN, far above chance
    assert f"test_accuracy={metrics['test_accuracy']:.4f}" in result.stdout


def test_saved_model_reloads_with_the_same_predictions(classifier_run):
    from tapefit.data.images import load_digits_splits
    from tapefit.models import Classifier

    run_dir, _ = classifier_run
    model = keras.models.load_model(run_dir / "model.keras")
    assert isinstance(model, Classifier) and model.architecture == "cnn"
    x_test, y_test = load_digits_splits(0.15, 0.2, seed=0)["test"]
    predictions = model.predict(x_test, verbose=0)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    accuracy = float(np.mean(predictions.argmax(axis=1) == y_test))
    assert accuracy == pytest.approx(metrics["test_accuracy"], abs=1e-6)


def test_tensorboard_has_train_and_validation_scalars_per_epoch(classifier_run):
    run_dir, _ = classifier_run
    for split in ("train", "validation"):
        scalars = scalar_tags(run_dir / "tensorboard" / split)
        assert len(scalars["epoch_loss"]) == 2 and len(scalars["epoch_accuracy"]) == 2
    history = json.loads((run_dir / "history.json").read_text())
    validation = scalar_tags(run_dir / "tensorboard" / "validation")
    np.testing.assert_allclose(validation["epoch_loss"], history["val_loss"], rtol=1e-6)


@pytest.fixture(scope="session")
@built_once_per_session
def refused(tmp_path_factory):
    """A misspelt key and a missing data file, both in one fresh process (one TensorFlow
    start-up, not two): (run directory, result) each. Exit code 2 from a process of its own is
    tested by tests/runner/test_bad_input.py::
    test_the_cli_prints_one_error_line_without_a_traceback."""
    misspelt, missing = tmp_path_factory.mktemp("misspelt"), tmp_path_factory.mktemp("missing")
    results = run_cli_batch(
        [
            ["trainer.epocs=3", f"hydra.run.dir={misspelt}"],
            ["experiment=mnist", f"data.path={missing}/nowhere.npz", f"hydra.run.dir={missing}"],
        ]
    )
    return {"misspelt": (misspelt, results[0]), "missing": (missing, results[1])}


def test_misspelt_key_fails_before_training(refused):
    tmp_path, result = refused["misspelt"]
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert errors == [line for line in errors if "did you mean trainer.epochs?" in line] != []
    assert "+trainer.epocs" not in result.stderr  # not Hydra's advice to append the key
    assert not (tmp_path / "history.json").exists()


def test_a_refused_run_leaves_no_empty_folders_of_the_default_layout(tmp_path):
    (tmp_path / "outputs" / "kept").mkdir(parents=True)  # a folder of the user's stays
    (result,) = run_cli_batch([["experiment=mnist", "data.path=nowhere.npz"]], cwd=tmp_path)
    assert result.returncode == 2 and "nowhere.npz" in result.stderr.splitlines()[-1]
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")] == [
        "outputs",
        "outputs/kept",
    ]


def test_bad_input_is_one_clear_line(refused):
    _, result = refused["missing"]
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert len(errors) == 1 and "does not exist: point it at mnist.npz" in errors[0]
    assert "Traceback" not in result.stderr


# Runs the command's entry point in a process whose collector starts with nothing frozen (the
# fork's parent froze its own imports), then says how many objects the command froze.
FREEZE_CHECK = """
import gc, sys
gc.unfreeze()
sys.argv = ["tapefit", "trainer.epochs=0", f"hydra.run.dir={sys.argv[1]}"]
from tapefit.__main__ import main
try:
    main()
except SystemExit as stop:
    print("exit", stop.code, "frozen", gc.get_freeze_count())
"""


def test_the_command_freezes_its_start_up_objects_before_the_run(tmp_path):
    import os
    import sys

    from tests import processes

    done = processes.run(
        [sys.executable, "-c", FREEZE_CHECK, str(tmp_path / "run")],
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    words = done.stdout.strip().splitlines()[-1].split()
    assert words[:2] == ["exit", "2"], done.stderr[-2000:]  # refused in the run, after the freeze
    assert int(words[3]) > 100_000  # TensorFlow's, Keras' and Hydra's import-time objects
