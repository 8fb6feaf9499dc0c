"""`tapefit.training.export.serving`: `export_for_serving` writes Keras' default export of a
`_target_` model and replaces an earlier one, writes only the formats asked for, and refuses in
one line, leaving no export behind, a model a format cannot take or an export that drifts."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tests.training.export.runners import TOLERANCE, run_onnx


def test_target_model_gets_keras_default_export(tmp_path):
    import tapefit
    from tapefit.training.export import export_for_serving

    class Wave(tapefit.TapeModel):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.hidden = keras.layers.Dense(4, activation="tanh")
            self.out = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.out(self.hidden(x))

    x = np.linspace(-1, 1, 64, dtype="float32")[:, None]
    model = Wave()
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, np.sin(x), epochs=1, verbose=0)
    path = export_for_serving(model, tmp_path / "run" / "export")
    (path / "stale").write_text("from an earlier export")
    export_for_serving(model, path)  # a second export replaces the first
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["export"]
    assert not (path / "stale").exists()
    served = tf.saved_model.load(str(path))  # here, in-process: the other tests load without
    np.testing.assert_allclose(served.serve(x[:5]), model.predict(x[:5], verbose=0), atol=1e-6)


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
