"""tapefit/models/classifier.py: the CNN's blocks and dense width are options, checked before
anything is built, saved with the model, and the default network is the tutorial's."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tapefit import Classifier
from tapefit.errors import TapefitError


def layer_kinds(model: Classifier) -> list[tuple[str, int | None]]:
    """(class name, filters or units) of each layer of the body, in order."""
    return [
        (type(layer).__name__, getattr(layer, "filters", getattr(layer, "units", None)))
        for layer in model.body.layers
    ]


def test_the_default_cnn_is_the_tutorials_network():
    kinds = layer_kinds(Classifier(image_shape=(28, 28, 1)))
    convolutions = [width for kind, width in kinds if kind == "Conv2D"]
    assert convolutions == [16, 32, 32, 64, 64, 64]
    assert [kind for kind, _ in kinds].count("BatchNormalization") == 4
    assert ("Dense", 256) in kinds


def test_conv_blocks_and_dense_units_size_the_cnn_and_survive_a_reload(tmp_path):
    model = Classifier(image_shape=(8, 8, 1), conv_blocks=[[8, 1], [12, 2]], dense_units=16)
    kinds = layer_kinds(model)
    assert [width for kind, width in kinds if kind == "Conv2D"] == [8, 12, 12]
    assert [kind for kind, _ in kinds].count("MaxPooling2D") == 2
    assert ("Dense", 16) in kinds
    model.save(tmp_path / "small.keras")
    reloaded = keras.models.load_model(tmp_path / "small.keras")
    assert reloaded.get_config()["conv_blocks"] == [[8, 1], [12, 2]]
    assert reloaded.dense_units == 16
    images = np.random.default_rng(0).random((4, 8, 8, 1), dtype=np.float32)
    np.testing.assert_array_equal(reloaded(images), model(images))


def test_a_file_saved_before_the_options_existed_loads_the_tutorials_network():
    config = Classifier(image_shape=(8, 8, 1)).get_config()
    del config["conv_blocks"], config["dense_units"]
    model = Classifier.from_config(config)
    assert model.conv_blocks == ((16, 1), (32, 2), (64, 3)) and model.dense_units == 256


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"conv_blocks": []}, r"model.conv_blocks=\[\] must list \[filters, convolutions\]"),
        ({"conv_blocks": [[8]]}, r"model.conv_blocks=\[\[8\]\] must list"),
        ({"conv_blocks": [[8, 0]]}, "pairs of positive integers"),
        ({"dense_units": 0}, "model.dense_units=0 must be at least 1"),
    ],
)
def test_a_cnn_size_no_network_can_have_is_one_line(options, message):
    with pytest.raises(TapefitError, match=message) as refused:
        Classifier(image_shape=(8, 8, 1), **options)
    assert "\n" not in str(refused.value)
