"""Small Keras models the readiness tests report on: one layer over (5, 3) inputs, compiled."""

import keras


def model_of(layer):
    inputs = keras.Input((5, 3))
    return keras.Model(inputs, layer(inputs))


def compiled(model, **compile_kwargs):
    model.compile(optimizer="adam", loss="mse", **compile_kwargs)
    return model
