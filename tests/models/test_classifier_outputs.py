"""`tapefit.models.classifier_outputs`: what a classifier offers a run beside its network."""

import json

import keras
import numpy as np
import pytest

from tapefit import Classifier
from tapefit.models.classifier_outputs import ClassifierOutputs

PROBABILITIES = np.array([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1]], dtype="float32")


def classifier(class_names=None):
    return Classifier(
        image_shape=(4, 4, 1),
        num_classes=3,
        architecture="mlp",
        hidden_units=[4],
        class_names=class_names,
    )


def test_a_classifier_selects_on_validation_accuracy_and_compiles_with_crossentropy():
    assert Classifier.default_objective({"_target_": "any.loader"}) == "val_accuracy"
    assert classifier().compile_defaults() == {
        "loss": "sparse_categorical_crossentropy",
        "metrics": ["accuracy"],
    }


def test_the_report_writes_classes_json_only_when_the_classes_have_names(tmp_path):
    assert classifier().report(None, tmp_path) == {}
    assert list(tmp_path.iterdir()) == []
    assert classifier(["cat", "dog", "eel"]).report(None, tmp_path) == {}
    assert json.loads((tmp_path / "classes.json").read_text()) == ["cat", "dog", "eel"]


def test_serve_takes_float_images_of_the_trained_shape_and_returns_probabilities():
    model = classifier()
    [(name, (serve, [spec]))] = model.serving_endpoints().items()
    assert name == "serve" and spec.shape == (None, 4, 4, 1) and spec.dtype == "float32"
    images = np.random.default_rng(0).uniform(size=(2, 4, 4, 1)).astype("float32")
    probabilities = np.asarray(serve(images))
    assert probabilities.shape == (2, 3)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(probabilities, model(images, training=False), atol=1e-6)


def test_serve_calls_the_model_in_inference_mode():
    class Recording(ClassifierOutputs, keras.Model):
        """A classifier of the mixin alone, recording the `training` it is called with."""

        image_shape, num_classes, class_names = (2, 2, 1), 2, None

        def call(self, images, training=None):
            self.training_given = training
            return keras.ops.softmax(keras.ops.zeros((keras.ops.shape(images)[0], 2)))

    model = Recording()
    serve, _ = model.serving_endpoints()["serve"]
    np.testing.assert_allclose(serve(np.zeros((3, 2, 2, 1), "float32")), np.full((3, 2), 0.5))
    assert model.training_given is False


def test_prediction_columns_name_labels_and_probabilities_by_class_name():
    columns = classifier(["cat", "dog", "eel"]).prediction_columns(None, PROBABILITIES)
    assert list(columns) == ["label", "prob_cat", "prob_dog", "prob_eel"]
    assert columns["label"] == ["dog", "cat"]
    assert columns["prob_dog"] == pytest.approx([0.7, 0.3])


def test_prediction_columns_without_names_are_indices():
    columns = classifier().prediction_columns(None, PROBABILITIES)
    assert list(columns) == ["label", "prob_0", "prob_1", "prob_2"]
    assert columns["label"] == [1, 0] and all(type(i) is int for i in columns["label"])
    assert columns["prob_2"] == pytest.approx([0.2, 0.1])
