"""trainer.export_formats: ONNX, LiteRT and OpenVINO exports, beside the SavedModel or alone,
each loaded here in its own runtime and compared with `model.keras` on 32 test images, as the
run itself checked them (export/verify.json); a model they cannot take, or an export that
drifts, is refused in one line and leaves no export behind."""

import importlib.util
import json

import keras
import numpy as np
import pytest
from hydra.errors import ConfigCompositionException

import tapefit
from tapefit.data.images import load_digits_splits

pytestmark = pytest.mark.slow

OPENVINO = importlib.util.find_spec("openvino") is not None
TOLERANCE = 1e-5
# The CNN's run (conftest.py's) exports these beside its SavedModel.
CNN_FORMATS = ["onnx", "litert", *(["openvino"] if OPENVINO else [])]


@pytest.fixture(scope="session")
def cnn(cnn_export):
    pytest.importorskip("onnxruntime")
    return cnn_export


@pytest.fixture(scope="module")
def images():
    """The first test batch of the digits run (data.batch_size=32, the test split in order)."""
    return load_digits_splits(0.15, 0.2, seed=0)["test"][0][:32]


def run_onnx(path, images):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["images"]
    return session.run(None, {"images": images})[0]


def run_litert(path, images):
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path)).get_signature_runner()
    assert list(runner.get_input_details()) == ["images"]
    return runner(images=images)["output_0"]


def run_openvino(path, images):
    import openvino as ov

    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([images])[compiled.outputs[0]]


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


def test_a_format_alone_writes_no_saved_model(cnn, images, tmp_path):
    """`trainer.export_formats=[onnx]` (what the run hands `export_for_serving`): the
    SavedModel is written only when asked for; the ONNX file (the quickest to convert) is
    checked and renamed into place, nothing left beside it."""
    from tapefit.training.export import VerifyBatch, export_for_serving

    model = keras.models.load_model(cnn[0] / "model.keras")
    path = export_for_serving(model, tmp_path / "export", ["onnx"], VerifyBatch("test", images))
    assert [p.name for p in tmp_path.iterdir()] == ["export"]
    assert not (path / "saved_model.pb").exists()  # not asked for
    assert sorted(p.name for p in path.iterdir()) == ["onnx", "verify.json"]
    verify = json.loads((path / "verify.json").read_text())
    assert verify["verified"] and sorted(verify["formats"]) == ["onnx"]
    got = run_onnx(path / "onnx" / "serve.onnx", images)
    expected = model.predict(images, verbose=0)
    assert float(np.max(np.abs(got - expected))) <= TOLERANCE


def test_an_export_that_drifts_is_refused_and_leaves_nothing(cnn, images, tmp_path, monkeypatch):
    from tapefit.training.export import VerifyBatch, export_for_serving, runtimes

    onnx_runtime = runtimes.RUNTIMES["onnx"]

    def drifting():
        label, run = onnx_runtime()
        return label, lambda *args: [o + 1e-3 for o in run(*args)]

    monkeypatch.setitem(runtimes.RUNTIMES, "onnx", drifting)
    model = keras.models.load_model(cnn[0] / "model.keras")
    batch = VerifyBatch("test", images)
    with pytest.raises(tapefit.TapefitError) as refused:
        export_for_serving(model, tmp_path / "export", ["saved_model", "onnx"], batch)
    message = str(refused.value)
    assert "\n" not in message
    assert "the onnx export of Classifier (endpoint 'serve') differs" in message
    assert "trainer.export_tolerance=0.0001" in message
    assert list(tmp_path.iterdir()) == []


def test_siamese_exports_saved_model_and_refuses_string_formats_in_one_line(
    siamese_export, tmp_path, capfd
):
    from tapefit.training.export import export_for_serving

    run_dir, _ = siamese_export
    verify = json.loads((run_dir / "export" / "verify.json").read_text())
    endpoints = verify["formats"]["saved_model"]["endpoints"]
    assert sorted(endpoints) == ["encode", "serve"]  # the pair scorer and the text encoder
    assert all(e["max_abs_diff"] <= TOLERANCE for e in endpoints.values())

    model = keras.models.load_model(run_dir / "model.keras")
    capfd.readouterr()
    with pytest.raises(tapefit.TapefitError) as refused:
        export_for_serving(model, tmp_path / "export", ["saved_model", "onnx", "litert"])
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("trainer.export_formats: onnx and litert cannot take SiameseModel")
    assert "take strings (serve: texts_a, texts_b; encode: texts)" in message
    assert "Traceback" not in capfd.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_format_or_tolerance_is_refused():
    from tapefit.training.export.formats import normalize_formats, resolve_tolerance

    with pytest.raises(ConfigCompositionException) as refused:
        tapefit.compose(["trainer.export=true", "trainer.export_formats=[pickle]"])
    assert "expected one of [saved_model, onnx, litert, openvino]" in str(refused.value.__cause__)
    with pytest.raises(tapefit.TapefitError, match="unknown format 'pickle'; choose from"):
        normalize_formats(["onnx", "pickle"])
    with pytest.raises(tapefit.TapefitError, match=r"export_formats=\[\] exports nothing"):
        normalize_formats([])
    assert normalize_formats(["onnx", "onnx", "saved_model"]) == ["onnx", "saved_model"]
    dense = keras.layers.Dense(1)
    assert resolve_tolerance(dense, None) == 1e-4
    assert resolve_tolerance(keras.layers.Dense(1, dtype="mixed_bfloat16"), None) == 1e-2
    assert resolve_tolerance(dense, 0.5) == 0.5
    with pytest.raises(tapefit.TapefitError, match="export_tolerance=-1 must be a number"):
        resolve_tolerance(dense, -1)
