"""tapefit/step/rebuild_check.py: a model whose saved config would not rebuild it is refused at
`save`, in one line, before anything is written."""

import keras
import numpy as np
import pytest

import tapefit
from tapefit.errors import TapefitError, UnsaveableModelError
from tests.step.regressor import regressor


def test_a_get_config_that_leaves_out_a_passed_value_is_refused(tmp_path):
    class Scaled(tapefit.TapeModel):
        def __init__(self, units, scale=1.0, **kwargs):
            super().__init__(**kwargs)
            self.units, self.scale = units, scale
            self.out = keras.layers.Dense(units)

        def call(self, x):
            return self.out(x) * self.scale

        def get_config(self):
            return {**super().get_config(), "units": self.units}  # scale forgotten

    regressor(Scaled, 2).save(tmp_path / "default_scale.keras")  # the default: nothing lost
    with pytest.raises(UnsaveableModelError, match=r"leaves out 'scale' \(passed 3\.0"):
        regressor(Scaled, 2, scale=3.0).save(tmp_path / "scaled.keras")
    assert not (tmp_path / "scaled.keras").exists()


def test_a_config_key_the_constructor_cannot_take_is_refused(tmp_path):
    class Narrow(tapefit.TapeModel):
        def __init__(self, units):
            super().__init__()
            self.units = units
            self.out = keras.layers.Dense(units)

        def call(self, x):
            return self.out(x)

        def get_config(self):
            return {**super().get_config(), "units": self.units}  # adds name, trainable, dtype

    with pytest.raises(TapefitError, match=r"holds 'name', which Narrow.__init__ does not take"):
        regressor(Narrow, 1).save(tmp_path / "narrow.keras")
    assert list(tmp_path.iterdir()) == []


def test_a_config_without_a_required_argument_is_refused(tmp_path):
    class Forgetful(tapefit.TapeModel):
        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.out = keras.layers.Dense(units)

        def call(self, x):
            return self.out(x)

        def get_config(self):
            return super().get_config()

    with pytest.raises(TapefitError, match=r"leaves out 'units', which Forgetful.__init__"):
        regressor(Forgetful, 1).save(tmp_path / "forgetful.keras")


def test_a_model_whose_call_cannot_build_it_is_refused(tmp_path):
    """Keras would write it and reload it without weights, after a warning."""

    class NoCall(tapefit.TapeModel):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(1)

        def call(self, x, training=False):
            raise NotImplementedError("NoCall has no forward pass of its own")

        def forward(self, data, training):
            x, y = data
            y_pred = self.dense(x)
            return tapefit.StepOutput(keras.ops.mean(keras.ops.square(y - y_pred)), y, y_pred)

    x = np.linspace(-1, 1, 32, dtype="float32")[:, None]
    model = NoCall()
    model.compile(optimizer="sgd")
    model.fit(x, np.sin(x), verbose=0)
    with pytest.raises(UnsaveableModelError, match="a reloaded NoCall would have no weights"):
        model.save(tmp_path / "no_call.keras")
    assert list(tmp_path.iterdir()) == []


def test_an_unchanged_model_is_rebuilt_once_and_a_changed_one_again(tmp_path, monkeypatch):
    """The rebuild (a second model) runs once per model and config: a run checks before
    training and again when it saves; a config that changed in between is checked anew."""

    class Sized(tapefit.TapeModel):
        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.out = keras.layers.Dense(units)

        def call(self, x):
            return self.out(x)

        def get_config(self):
            return {**super().get_config(), "units": self.units}

    rebuilt = []
    original = Sized.from_config.__func__
    monkeypatch.setattr(
        Sized, "from_config", classmethod(lambda c, cfg: rebuilt.append(1) or original(c, cfg))
    )
    model = regressor(Sized, 2)
    model.save(tmp_path / "first.keras")
    model.save(tmp_path / "second.keras")
    assert len(rebuilt) == 1
    model.units = 3  # the config no longer matches the weights: checked again, and refused
    with pytest.raises(UnsaveableModelError, match=r"rebuilds a model with other weights"):
        model.save(tmp_path / "changed.keras")
    assert len(rebuilt) == 2
    assert not (tmp_path / "changed.keras").exists()
