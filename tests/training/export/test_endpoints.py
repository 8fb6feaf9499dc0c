"""`tapefit.training.export.endpoints`: what an export serves, and the formats refused before it."""

import importlib.util

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import Classifier
from tapefit.errors import TapefitError
from tapefit.training.export.endpoints import (
    EndpointModel,
    ExportEndpoint,
    check_exportable,
    serving_endpoints,
)
from tapefit.training.export.formats import EXTRA, INFO


def tiny_classifier():
    model = Classifier(image_shape=(4, 4, 1), num_classes=3, architecture="mlp", hidden_units=[4])
    model(np.zeros((1, 4, 4, 1), "float32"))
    return model


class Texts(keras.Model):
    """Endpoints of strings, as the Siamese model's, with no text processing inside."""

    def serving_endpoints(self):
        def serve(texts_a, texts_b):
            return tf.strings.length(texts_a) - tf.strings.length(texts_b)

        def encode(texts):
            return tf.strings.length(texts)

        strings = tf.TensorSpec([None], tf.string)
        return {"serve": (serve, [strings, strings]), "encode": (encode, [strings])}


def specs(endpoint):
    return [(s.name, s.shape.as_list(), s.dtype.name) for s in endpoint.specs]


def test_a_classifier_serves_its_own_endpoint_of_named_float_images():
    model = tiny_classifier()
    [serve] = serving_endpoints(model)
    assert serve.name == "serve" and not serve.keras_default
    assert specs(serve) == [("images", [None, 4, 4, 1], "float32")]
    images = np.random.default_rng(0).uniform(size=(2, 4, 4, 1)).astype("float32")
    (argument,) = serve.arguments([images])
    np.testing.assert_allclose(serve.function(argument), model(images), atol=1e-6)


def test_a_model_without_endpoints_gets_keras_default_serve_shaped_by_the_batch():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8), keras.layers.Dropout(0.5)])
    [serve] = serving_endpoints(model)
    assert serve.name == "serve" and serve.keras_default and serve.specs == ()
    x = np.ones((5, 3), "float32")
    np.testing.assert_allclose(serve.function(x), model(x, training=False), atol=1e-6)
    shaped = serve.for_inputs({"a": np.zeros((5, 3), "float32"), "b": np.zeros((5,), "int64")})
    assert not shaped.keras_default and shaped.name == "serve"
    assert specs(shaped) == [("inputs_0", [None, 3], "float32"), ("inputs_1", [None], "int64")]
    assert shaped.arguments(["A", "B"]) == [{"a": "A", "b": "B"}]  # one dict argument


def test_an_endpoint_of_its_own_is_not_reshaped_by_the_batch():
    [serve] = serving_endpoints(tiny_classifier())
    assert serve.for_inputs(np.zeros((2, 9), "float32")) is serve


def test_spec_names_come_from_the_spec_or_the_parameters_with_a_suffix_for_nested_leaves():
    class Nested(keras.Model):
        def serving_endpoints(self):
            def pair(both, weights):
                return both[0] + both[1] * weights

            x = keras.InputSpec(shape=(None, 2), dtype="float32")
            named = tf.TensorSpec([None, 2], tf.float32, name="scale")
            return {"pair": (pair, [(x, x), named])}

    [pair] = serving_endpoints(Nested())
    assert [s.name for s in pair.specs] == ["both_0", "both_1", "scale"]
    packed = pair.arguments(["a", "b", "c"])
    assert len(packed) == 2 and list(packed[0]) == ["a", "b"] and packed[1] == "c"


def test_arguments_a_star_args_endpoint_takes_are_named_by_position():
    class Star(keras.Model):
        def serving_endpoints(self):
            def total(first, *rest):
                return first + sum(rest)

            x = tf.TensorSpec([None], tf.float32)
            return {"total": (total, [x, x, x])}

    [total] = serving_endpoints(Star())
    assert [s.name for s in total.specs] == ["first", "rest_0", "rest_1"]
    assert total.arguments([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]


def test_a_saved_model_takes_any_model_and_returns_its_endpoints():
    assert [e.name for e in check_exportable(Texts(), ["saved_model"])] == ["serve", "encode"]
    [serve] = check_exportable(tiny_classifier(), ["onnx", "litert", "openvino"])
    assert serve.specs[0].name == "images"


def test_a_format_whose_packages_are_missing_is_refused_in_one_line(monkeypatch):
    real = importlib.util.find_spec
    lacking = {"tf2onnx", "onnxruntime", "openvino"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in lacking else real(name, *a)
    )
    with pytest.raises(TapefitError) as refused:
        check_exportable(tiny_classifier(), ["saved_model", "onnx", "openvino"])
    assert str(refused.value) == (
        "trainer.export_formats: onnx needs tf2onnx, onnxruntime; openvino needs openvino, "
        f"which are not installed: {EXTRA}"
    )


def test_a_mixed_precision_model_is_refused_for_the_converted_formats():
    keras.mixed_precision.set_global_policy("mixed_float16")  # reset after each test
    model = tiny_classifier()
    assert check_exportable(model, ["saved_model"])[0].name == "serve"
    with pytest.raises(TapefitError) as refused:
        check_exportable(model, ["saved_model", "onnx", "litert"])
    message = str(refused.value)
    assert message.startswith(
        "trainer.export_formats: onnx and litert cannot take Classifier: it computes in "
        "float16 (mixed precision), and their converters need a float32 model"
    )
    assert message.endswith(
        "train with trainer.precision=float32 for them, or export it as saved_model"
    )
    assert "\n" not in message


def test_string_endpoints_are_refused_for_every_format_but_the_saved_model():
    with pytest.raises(TapefitError) as refused:
        check_exportable(Texts(), ["saved_model", "litert", "openvino"])
    assert str(refused.value) == (
        "trainer.export_formats: litert and openvino cannot take Texts: its endpoints take "
        "strings (serve: texts_a, texts_b; encode: texts), and the text processing inside has "
        f"{INFO['litert'].strings} and {INFO['openvino'].strings}; export it as saved_model, "
        "whose endpoints keep the text processing inside"
    )


def test_an_endpoint_model_calls_its_endpoint_on_flat_inputs():
    model = tiny_classifier()
    [serve] = serving_endpoints(model)
    wrapped = EndpointModel(model, serve)
    assert wrapped.name == "serve" and wrapped.built and wrapped.source is model
    images = np.ones((3, 4, 4, 1), "float32")
    np.testing.assert_allclose(wrapped(images), model(images), atol=1e-6)
    endpoint = ExportEndpoint("sum", lambda a, b: a + b, (None, None), ())
    assert float(EndpointModel(model, endpoint)(tf.constant(1.0), tf.constant(2.0))) == 3.0
