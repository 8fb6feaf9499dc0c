"""`trainer.export=true`: `export/` is a SavedModel that a process without tapefit loads with
`tf.saved_model.load` and serves with the same outputs as `model.keras` loaded with tapefit;
a failed export through the CLI is one line and leaves no export. The runs are this folder's
conftest.py's, shared with test_export_formats.py."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import run_cli

# Loads export/ in a fresh interpreter that never imports tapefit, calls each endpoint named in
# the inputs file (`<endpoint>.<argument>` arrays), and saves what they return.
SERVE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf

    served = tf.saved_model.load(sys.argv[1])
    inputs = np.load(sys.argv[2])
    outputs = {}
    for endpoint in sorted({key.split(".")[0] for key in inputs.files}):
        names = sorted(key for key in inputs.files if key.startswith(endpoint + "."))
        outputs[endpoint] = getattr(served, endpoint)(*(tf.constant(inputs[n]) for n in names))
    np.savez(sys.argv[3], **{name: value.numpy() for name, value in outputs.items()})
    default = served.signatures["serving_default"]
    print(json.dumps({
        "tapefit_imported": "tapefit" in sys.modules,
        "serving_default": {k: [s.dtype.name, s.shape.as_list()]
                            for k, s in default.structured_input_signature[1].items()},
    }))
    """
)


def serve(export_dir, tmp_path, inputs: dict) -> tuple[dict, dict]:
    """Call `export_dir`'s endpoints in a process without tapefit: (outputs, facts)."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    result = subprocess.run(
        [sys.executable, "-c", SERVE, str(export_dir), tmp_path / "inputs.npz", tmp_path / "out"],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["tapefit_imported"] is False
    with np.load(tmp_path / "out.npz") as outputs:
        return dict(outputs), facts


def test_classifier_export_serves_probabilities_without_tapefit(cnn_export, tmp_path):
    from tapefit.data.images import load_digits_splits

    run_dir, _ = cnn_export  # the digits CNN (a Classifier), its ONNX and LiteRT files beside
    assert (run_dir / "export" / "saved_model.pb").is_file()
    images = load_digits_splits(0.15, 0.2, seed=0)["test"][0][:6]
    outputs, facts = serve(run_dir / "export", tmp_path, {"serve.0": images})
    assert facts["serving_default"] == {"images": ["float32", [None, 8, 8, 1]]}
    expected = keras.models.load_model(run_dir / "model.keras").predict(images, verbose=0)
    assert outputs["serve"].shape == (6, 10)
    np.testing.assert_allclose(outputs["serve"].sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(outputs["serve"], expected, atol=1e-5)


def test_siamese_export_takes_raw_strings_without_tapefit(siamese_export, tmp_path):
    run_dir, _ = siamese_export
    assert (run_dir / "export" / "saved_model.pb").is_file()
    model = keras.models.load_model(run_dir / "model.keras")
    words = model.vocabulary
    texts_a = [" ".join(words[:4]), words[5], f"{words[1]} unseenword {words[7]}", "UPPER case"]
    texts_b = [" ".join(words[3:0:-1]), words[5], words[9], "upper CASE, words!"]
    inputs = {"serve.0": np.array(texts_a), "serve.1": np.array(texts_b)}
    inputs["encode.0"] = np.array(texts_a)
    outputs, facts = serve(run_dir / "export", tmp_path, inputs)
    string = ["string", [None]]
    assert facts["serving_default"] == {"texts_a": string, "texts_b": string}
    np.testing.assert_allclose(outputs["serve"], model.similarity(texts_a, texts_b), atol=1e-5)
    predicted = model.predict((tf.constant(texts_a), tf.constant(texts_b)), verbose=0)
    np.testing.assert_allclose(outputs["serve"], predicted, atol=1e-5)
    np.testing.assert_allclose(outputs["encode"], model.encode(texts_a), atol=1e-5)
    assert outputs["serve"][1] == pytest.approx(1.0, abs=1e-5)  # a text against itself


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


NO_CALL = '''
import keras
import numpy as np
import tensorflow as tf

import tapefit


@keras.saving.register_keras_serializable(package="no_call")
class NoCall(tapefit.TapeModel):
    """Trains through `forward` and never calls itself: Keras' export has nothing to trace."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1)

    def call(self, x, training=False):
        raise NotImplementedError("NoCall has no forward pass of its own")

    def forward(self, data, training):
        x, y = data
        y_pred = self.dense(x)
        return tapefit.StepOutput(tf.reduce_mean(tf.square(y - y_pred)), y, y_pred)


def load(seed=0):
    x = np.random.default_rng(seed).uniform(-1, 1, (64, 1)).astype("float32")
    return {"train": (x, np.sin(x))}
'''

NO_CALL_EXPERIMENT = """# @package _global_
defaults:
  - override /model: null
  - override /data: null
  - override /search_space: null
experiment_name: no_call
model: {_target_: no_call.NoCall}
data: {_target_: no_call.load}
trainer: {epochs: 1, steps_per_execution: 1, verbose: 0, save_model: false}
"""


def test_a_failed_export_is_one_line_and_leaves_no_export(tmp_path):
    (tmp_path / "no_call.py").write_text(NO_CALL)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "no_call.yaml").write_text(NO_CALL_EXPERIMENT)
    run_dir = tmp_path / "run"
    overrides = ["experiment=no_call", "trainer.export=true", f"hydra.run.dir={run_dir}"]
    result = run_cli("--config-dir", "conf", *overrides, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert f"trainer.export=true: writing the SavedModel {run_dir / 'export'} failed" in errors[0]
    assert "NoCall.call" in errors[0] and "resume=true" in errors[0]
    assert not [p.name for p in run_dir.iterdir() if "export" in p.name]
    assert not (run_dir / "model.keras").exists() and not (run_dir / "metrics.json").exists()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["error"] == errors[0].split(": error: ", 1)[1]
