"""tapefit/step/constructor_config.py: the constructor's arguments are saved as passed (a sub-model
passed twice reloads shared), and one no config can hold is refused naming it."""

import keras
import numpy as np
import pytest

import tapefit
from tests.step.regressor import regressor


def test_an_argument_no_config_can_hold_is_refused_naming_it(tmp_path):
    class Seeded(tapefit.TapeModel):
        def __init__(self, rng):
            super().__init__()
            self.out = keras.layers.Dense(1)

        def call(self, x):
            return self.out(x)

    with pytest.raises(NotImplementedError, match=r"argument 'rng' \(Generator\)") as error:
        regressor(Seeded, np.random.default_rng(0)).save(tmp_path / "seeded.keras")
    assert "\n" not in str(error.value)


def test_a_shared_sub_model_reloads_shared(tmp_path):
    class Twins(tapefit.TapeModel):  # one encoder passed twice, as Siamese models do
        def __init__(self, left, right, **kwargs):
            super().__init__(**kwargs)
            self.left, self.right = left, right

        def call(self, x):
            return self.left(x) - self.right(x * 2.0)

    encoder = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model = regressor(Twins, encoder, encoder)
    model.save(tmp_path / "twins.keras")
    reloaded = keras.models.load_model(tmp_path / "twins.keras", custom_objects={"Twins": Twins})
    assert reloaded.left is reloaded.right
    x = np.ones((3, 4), "float32")
    np.testing.assert_array_equal(reloaded.predict(x, verbose=0), model.predict(x, verbose=0))
