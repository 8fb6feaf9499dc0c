"""`tapefit.training.export.writers`: the SavedModel's endpoints; converters' stderr held back."""

import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from tapefit import Classifier
from tapefit.training.export.endpoints import serving_endpoints
from tapefit.training.export.writers import quietly, write_export

IMAGES = np.random.default_rng(0).uniform(size=(3, 4, 4, 1)).astype("float32")


def test_a_models_own_endpoints_are_the_saved_models_signatures(tmp_path):
    model = Classifier(image_shape=(4, 4, 1), num_classes=3, architecture="mlp", hidden_units=[4])
    model(IMAGES)
    write_export(model, tmp_path / "export", serving_endpoints(model))
    served = tf.saved_model.load(str(tmp_path / "export"))
    assert sorted(served.signatures) == ["serve", "serving_default"]
    default = served.signatures["serving_default"]
    assert list(default.structured_input_signature[1]) == ["images"]  # the spec's name
    [probabilities] = default(images=tf.constant(IMAGES)).values()
    np.testing.assert_allclose(probabilities, model(IMAGES), atol=1e-6)
    np.testing.assert_allclose(served.serve(IMAGES), model(IMAGES), atol=1e-6)


def test_a_model_without_endpoints_gets_keras_own_export(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    write_export(model, tmp_path / "export", serving_endpoints(model))
    served = tf.saved_model.load(str(tmp_path / "export"))
    x = np.ones((2, 3), "float32")
    np.testing.assert_allclose(served.serve(x), model(x), atol=1e-6)
    assert "serving_default" in served.signatures


def test_quietly_holds_back_native_stderr_and_python_warnings(capfd):
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with quietly("a converter") as held:
            os.write(2, b"converter noise\n")  # as C++ code writes it
            warnings.warn("a converter's warning", stacklevel=1)
            assert held == []  # filled once the block is left
    assert held == ["converter noise\n"] and warned == []
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
