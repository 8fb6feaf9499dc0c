"""trainer.export_formats: ONNX, LiteRT and OpenVINO exports beside a run's SavedModel, each
loaded here in its own runtime and compared with `model.keras` on 32 test images, as the run
itself checked them (export/verify.json). Alone, refused or drifting: test_serving.py."""

import importlib.util
import json

import keras
import numpy as np
import pytest

from tests.training.export.runners import TOLERANCE, run_litert, run_onnx, run_openvino

pytestmark = pytest.mark.slow

OPENVINO = importlib.util.find_spec("openvino") is not None
# The CNN's run (conftest.py's) exports these beside its SavedModel.
CNN_FORMATS = ["onnx", "litert", *(["openvino"] if OPENVINO else [])]


RUNTIMES = {
    "onnx": ("onnx/serve.onnx", run_onnx),
    "litert": ("litert/serve.tflite", run_litert),
    "openvino": ("openvino/serve.xml", run_openvino),
}


def check_format(run_dir, images, name):
    """Run export/<format>/ in its runtime here and compare with model.keras and verify.json."""
    relative, run = RUNTIMES[name]
    expected = keras.models.load_model(run_dir / "model.keras").predict(images, verbose=0)
    got = run(run_dir / "export" / relative, images)
    assert got.shape == expected.shape == (32, 10)
    difference = float(np.max(np.abs(got.astype("float64") - expected)))
    assert difference <= TOLERANCE
    verify = json.loads((run_dir / "export" / "verify.json").read_text())
    assert verify["verified"] and verify["inputs"] == {"split": "test", "rows": 32}
    recorded = verify["formats"][name]
    assert recorded["endpoints"]["serve"]["file"] == relative
    assert recorded["max_abs_diff"] == pytest.approx(difference, abs=1e-6)
    return verify


# One run checks every format: the CNN's (conftest.py's), whose SavedModel test_export.py
# serves. (An MLP's run exported ONNX, LiteRT and OpenVINO apart before: a second run of the
# same converters; the CNN's convolution, BatchNorm and pooling are the harder model for them.)
@pytest.mark.parametrize("name", ["onnx", "litert", "openvino"])
def test_cnn_exports_match_keras_in_their_runtimes(cnn, images, name):
    if name == "openvino" and not OPENVINO:
        pytest.skip("openvino is not installed")
    run_dir, metrics = cnn
    verify = check_format(run_dir, images, name)
    assert metrics["export"] == "export"
    assert sorted(verify["formats"]) == sorted(["saved_model", *CNN_FORMATS])
    assert (run_dir / "export" / "saved_model.pb").is_file()  # the SavedModel stays at export/
    assert verify["formats"]["saved_model"]["max_abs_diff"] <= TOLERANCE
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".export")]
