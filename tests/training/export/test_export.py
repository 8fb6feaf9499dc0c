"""`trainer.export=true`: `export/` is a SavedModel that a process without tapefit loads with
`tf.saved_model.load` and serves with the same outputs as `model.keras` loaded with tapefit;
a failed export through the CLI is one line and leaves no export. The runs are this folder's
conftest.py's, shared with test_export_formats.py and test_serving.py."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import run_cli, shared_once

# Loads each export named on the command line (`[name, export dir, inputs file, outputs file]`
# in JSON) in ONE fresh interpreter that never imports tapefit: calls each endpoint named in the
# export's inputs file (`<endpoint>.<argument>` arrays) and saves what they return. An export
# that fails is reported under its name with its traceback, and the others are still served, so
# each test fails only on its own export. After all of them: whether tapefit got imported.
SERVE = textwrap.dedent(
    """
    import json, sys, traceback
    import numpy as np
    import tensorflow as tf

    facts = {}
    for name, export_dir, inputs_file, outputs_file in json.loads(sys.argv[1]):
        try:
            served = tf.saved_model.load(export_dir)
            inputs = np.load(inputs_file)
            outputs = {}
            for endpoint in sorted({key.split(".")[0] for key in inputs.files}):
                names = sorted(key for key in inputs.files if key.startswith(endpoint + "."))
                outputs[endpoint] = getattr(served, endpoint)(
                    *(tf.constant(inputs[n]) for n in names)
                )
            np.savez(outputs_file, **{key: value.numpy() for key, value in outputs.items()})
            default = served.signatures["serving_default"]
            facts[name] = {"serving_default": {
                k: [s.dtype.name, s.shape.as_list()]
                for k, s in default.structured_input_signature[1].items()
            }}
        except Exception:
            facts[name] = {"error": traceback.format_exc()}
    for name in facts:
        facts[name]["tapefit_imported"] = "tapefit" in sys.modules
    print(json.dumps(facts))
    """
)


def cnn_inputs(run_dir) -> dict:
    """Six test images for the digits CNN's `serve`."""
    from tapefit.data.images import load_digits_splits

    return {"serve.0": load_digits_splits(0.15, 0.2, seed=0)["test"][0][:6]}


def siamese_inputs(run_dir) -> dict:
    """Pairs of texts for the Siamese model's `serve`, the first texts for its `encode`: words
    of its vocabulary, a word it never saw, a text against itself, case and punctuation."""
    words = keras.models.load_model(run_dir / "model.keras").vocabulary
    texts_a = [" ".join(words[:4]), words[5], f"{words[1]} unseenword {words[7]}", "UPPER case"]
    texts_b = [" ".join(words[3:0:-1]), words[5], words[9], "upper CASE, words!"]
    return {
        "serve.0": np.array(texts_a),
        "serve.1": np.array(texts_b),
        "encode.0": np.array(texts_a),
    }


@pytest.fixture(scope="session")
def served_exports(request, tmp_path_factory):
    """Both exports (conftest.py's CNN and Siamese runs) served in one process without tapefit,
    once a session (`shared_once`: one fresh interpreter importing TensorFlow, about 5 s, not
    one per test): name -> {"returncode", "stderr", "inputs", "outputs", "facts"}. An export
    whose run fails is left out (its test fails in its own fixture); one that fails to serve
    has its traceback in facts["error"]."""

    def serve_all(folder):
        exports, served = [], {}
        for name, inputs_of in (("cnn", cnn_inputs), ("siamese", siamese_inputs)):
            try:
                run_dir, _ = request.getfixturevalue(f"{name}_export")
                inputs = inputs_of(run_dir)
            except Exception:  # the test of this export fails on it itself
                continue
            np.savez(folder / f"{name}-inputs.npz", **inputs)
            served[name] = {"inputs": inputs}
            files = [str(folder / f"{name}-{kind}.npz") for kind in ("inputs", "outputs")]
            exports.append([name, str(run_dir / "export"), *files])
        result = subprocess.run(
            [sys.executable, "-c", SERVE, json.dumps(exports)],
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            capture_output=True,
            text=True,
            timeout=180,
        )
        facts = json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0 else {}
        for name, entry in served.items():
            entry.update(returncode=result.returncode, stderr=result.stderr[-3000:])
            entry["facts"] = facts.get(name, {})
            outputs = folder / f"{name}-outputs.npz"
            if outputs.exists():
                with np.load(outputs) as arrays:
                    entry["outputs"] = dict(arrays)
        return served

    return shared_once(tmp_path_factory, "served_exports", serve_all)


def serve(served_exports, name: str) -> tuple[dict, dict, dict]:
    """Export `name` as the process without tapefit served it: (inputs, outputs, facts)."""
    entry = served_exports.get(name)
    assert entry is not None, f"the {name} export was not served: its run or inputs failed"
    assert entry["returncode"] == 0, entry["stderr"]
    facts = entry["facts"]
    assert "error" not in facts, facts["error"]
    assert facts["tapefit_imported"] is False
    return entry["inputs"], entry["outputs"], facts


def test_classifier_export_serves_probabilities_without_tapefit(cnn_export, served_exports):
    run_dir, _ = cnn_export  # the digits CNN (a Classifier), its ONNX and LiteRT files beside
    assert (run_dir / "export" / "saved_model.pb").is_file()
    inputs, outputs, facts = serve(served_exports, "cnn")
    images = inputs["serve.0"]
    assert facts["serving_default"] == {"images": ["float32", [None, 8, 8, 1]]}
    expected = keras.models.load_model(run_dir / "model.keras").predict(images, verbose=0)
    assert outputs["serve"].shape == (6, 10)
    np.testing.assert_allclose(outputs["serve"].sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(outputs["serve"], expected, atol=1e-5)


def test_siamese_export_takes_raw_strings_without_tapefit(siamese_export, served_exports):
    run_dir, _ = siamese_export
    assert (run_dir / "export" / "saved_model.pb").is_file()
    model = keras.models.load_model(run_dir / "model.keras")
    inputs, outputs, facts = serve(served_exports, "siamese")
    texts_a, texts_b = inputs["serve.0"].tolist(), inputs["serve.1"].tolist()
    string = ["string", [None]]
    assert facts["serving_default"] == {"texts_a": string, "texts_b": string}
    np.testing.assert_allclose(outputs["serve"], model.similarity(texts_a, texts_b), atol=1e-5)
    predicted = model.predict((tf.constant(texts_a), tf.constant(texts_b)), verbose=0)
    np.testing.assert_allclose(outputs["serve"], predicted, atol=1e-5)
    np.testing.assert_allclose(outputs["encode"], model.encode(texts_a), atol=1e-5)
    assert outputs["serve"][1] == pytest.approx(1.0, abs=1e-5)  # a text against itself


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
