"""Runs with `trainer.export=true` for the export tests, each trained once a session, and the
test images their exports are run on."""

import importlib.util
import os

import pytest

import tapefit
from tapefit.data.images import load_digits_splits
from tests.helpers import SMALL_CNN, shared_once


@pytest.fixture(scope="session")
def export_run(tmp_path_factory):
    """`export_run(name, *overrides)`: (run directory, metrics) of a tiny in-process run with
    `trainer.export=true`, one epoch; a name is trained once a session, and its export was
    renamed into place (no `.export*` left beside it)."""

    def trained(name: str, *overrides: str):
        def train(run_dir):
            cfg = tapefit.compose(
                ["trainer.epochs=1", "trainer.verbose=0", "trainer.export=true", *overrides]
            )
            environment = dict(os.environ)
            metrics = tapefit.run(cfg, run_dir)
            assert metrics["export"] == "export"
            # the converters' changes (tf2onnx sets TF_CPP_MIN_LOG_LEVEL=3) are undone
            assert dict(os.environ) == environment
            assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".export")]
            return run_dir, metrics

        return shared_once(tmp_path_factory, f"export_run-{name}", train)

    return trained


@pytest.fixture(scope="session")
def siamese_export(export_run):
    """The Siamese model's export (a SavedModel serving `serve` and `encode`): test_export.py
    serves it in a process without tapefit, test_serving.py reads its verify.json."""
    return export_run(
        "siamese",
        "experiment=siamese",
        "data.train_size=64",
        "data.val_size=32",
        "data.test_size=32",
    )


# ONNX and LiteRT exports need the `export` extra (tf2onnx converts, the run checks each file in
# onnxruntime and LiteRT's interpreter); without it the CNN's run exports the SavedModel alone.
EXPORT_EXTRA = all(
    importlib.util.find_spec(name) for name in ("tf2onnx", "onnxruntime", "ai_edge_litert")
)
OPENVINO = importlib.util.find_spec("openvino") is not None
# The CNN's formats beside its SavedModel: every format is checked on this one run (the MLP's
# run that exported ONNX, LiteRT and OpenVINO apart was a second run of the same files).
CNN_FORMATS = [*(["onnx", "litert"] if EXPORT_EXTRA else []), *(["openvino"] if OPENVINO else [])]


@pytest.fixture(scope="session")
def cnn_export(export_run):
    """The digits CNN's export (one block: convolution, BatchNorm, pooling, Dropout;
    `SMALL_CNN`), three steps of training: test_export.py serves its SavedModel in a process
    without tapefit, test_export_formats.py runs its ONNX, LiteRT and OpenVINO files,
    test_serving.py exports its model again. One run for the three files (two CNN runs were
    traced before: most of each run's cost)."""
    formats = ["saved_model", *CNN_FORMATS]
    return export_run(
        "cnn",
        "model.architecture=cnn",
        *SMALL_CNN,
        "trainer.steps_per_epoch=3",
        f"trainer.export_formats=[{','.join(formats)}]",
    )


@pytest.fixture(scope="session")
def cnn(cnn_export):
    """`cnn_export` where onnxruntime is installed (test_export_formats.py and test_serving.py
    run its ONNX file), skipped where it is not."""
    pytest.importorskip("onnxruntime")
    return cnn_export


@pytest.fixture(scope="module")
def images():
    """The first test batch of the digits run (data.batch_size=32, the test split in order)."""
    return load_digits_splits(0.15, 0.2, seed=0)["test"][0][:32]
