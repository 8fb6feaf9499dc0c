"""tapefit/step/functional.py: a functional TapeModel reaches its wrapped network's layers,
inputs and outputs, as `keras.Model` does."""

import keras

import tapefit
from tests.step.keras_patterns import functional_subclass


def test_the_functional_api_reaches_the_real_layers():
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(1)(keras.layers.Dense(4, name="hidden")(inputs))
    for base in (keras.Model, tapefit.TapeModel):
        model = base(inputs, outputs)
        assert [layer.name for layer in model.layers][1] == "hidden"
        assert model.get_layer("hidden").units == 4
        features = keras.Model(model.input, model.get_layer("hidden").output)
        assert features.output.shape == (None, 4) and model.output.shape == (None, 1)
        assert len(model.inputs) == 1 and len(model.outputs) == 1


def test_a_functional_subclass_reaches_its_layers_by_name():
    for base in (keras.Model, tapefit.TapeModel):
        model = functional_subclass(base)
        assert model.get_layer("hidden").units == 4 and model.get_layer("out").units == 1
        assert keras.Model(model.input, model.get_layer("hidden").output).output.shape == (
            None,
            4,
        )
