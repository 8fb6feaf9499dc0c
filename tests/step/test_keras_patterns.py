"""TapeModel as a drop-in base for keras.Model: the patterns of public Keras examples that
override Keras' hooks, each written once and run with `keras.Model` (the control) and with
`tapefit.TapeModel` as the base class. Training ends with identical History and weights, and
saving ends the same way (a file that reloads to the same predictions, or Keras' save-time
refusal). Under MirroredStrategy, TapeModel keeps its loss contract: a hand-written
`reduce_mean` loss trains as on one device."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tests.step.keras_patterns import PATTERNS, outputs, train

SAVED_BETTER = ("distiller",)  # sub-models in the constructor: Keras cannot save, TapeModel can


def save_outcome(model, path):
    """`reloads` with the same predictions, or the exception type `save` raised."""
    try:
        model.save(path)
    except NotImplementedError:
        return "refused at save time"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras' own "compile() was not called" warning
        reloaded = keras.models.load_model(path)
    np.testing.assert_array_equal(outputs(reloaded), outputs(model))
    return "reloads"


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_tapemodel_trains_saves_and_reloads_as_keras_model_does(pattern, tmp_path):
    control, control_history = train(keras.Model, pattern)
    tape, tape_history = train(tapefit.TapeModel, pattern)
    assert tape_history == control_history
    for a, b in zip(control.get_weights(), tape.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    expected = save_outcome(control, tmp_path / "control.keras")
    if pattern in SAVED_BETTER:  # Keras refuses; TapeModel serialises the sub-models itself
        assert expected == "refused at save time"
        expected = "reloads"
    assert save_outcome(tape, tmp_path / "tape.keras") == expected


# Patterns whose loss reaches the optimizer through TapeModel's step (compiled, compute_loss,
# add_loss) train under two replicas as on one device: the loss contract. The others call
# optimizer.apply_gradients themselves, which Keras defines as summing the replicas'
# gradients; TapeModel leaves that as it is and equals keras.Model under the same strategy,
# or trains where keras.Model 3.15 cannot start (its symbolic build asks compute_loss for a
# loss such a model never compiled; TapeModel builds it through its test step or call).
THROUGH_THE_STEP = (
    "distiller",
    "add_loss",
    "network_attribute",
    "sample_weights",
    "unserialisable_argument",
)


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow  # every pattern on two replicas: make test-fast leaves it out
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_under_mirrored_strategy(pattern, mirrored_strategy):
    if pattern in THROUGH_THE_STEP:
        tape, tape_history = train(tapefit.TapeModel, pattern, mirrored_strategy)
        reference, reference_history = train(tapefit.TapeModel, pattern)
        tolerance = {"rtol": 1e-5, "atol": 1e-6}
    else:
        try:
            reference, reference_history = train(keras.Model, pattern, mirrored_strategy)
        except ValueError as error:
            assert "No loss to compute" in str(error)
            _, tape_history = train(tapefit.TapeModel, pattern, mirrored_strategy)
            losses = next(iter(tape_history.values()))
            assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]  # TapeModel trains
            return
        except tf.errors.InvalidArgumentError:
            # Keras' GAN example builds its own optimizers inside the replicated step, which
            # TensorFlow refuses; plain Keras and TapeModel fail alike (build them beforehand)
            with pytest.raises(tf.errors.InvalidArgumentError):
                train(tapefit.TapeModel, pattern, mirrored_strategy)
            return
        tape, tape_history = train(tapefit.TapeModel, pattern, mirrored_strategy)
        tolerance = {"rtol": 0, "atol": 0}
    for key, values in reference_history.items():
        np.testing.assert_allclose(tape_history[key], values, **tolerance)
    for a, b in zip(reference.get_weights(), tape.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, **tolerance)


def test_a_custom_compile_reloads_with_keras_warning(tmp_path):
    model, _ = train(tapefit.TapeModel, "custom_compile")
    model.save(tmp_path / "model.keras")
    with pytest.warns(UserWarning, match="compile\\(\\) was not called as part of loading"):
        reloaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(outputs(reloaded), outputs(model))


def test_the_run_directory_refuses_an_unloadable_model_in_one_line(tmp_path, monkeypatch):
    from tapefit.errors import TapefitError
    from tapefit.step import tape_model
    from tapefit.training import run_files
    from tapefit.training.run_files import save_model

    model, _ = train(tapefit.TapeModel, "unserialisable_argument")
    with pytest.raises(TapefitError, match=r"Scaled cannot be saved to \.keras") as error:
        save_model(model, tmp_path / "model.keras")
    message = str(error.value)
    assert "get_config()" in message and "\n" not in message
    assert message.endswith("or set trainer.save_model=false")  # the run's own way out
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    checks = []  # a model that saves is checked once per save, not by save_model and save both
    saveable, _ = train(tapefit.TapeModel, "add_loss")
    original = tape_model.check_rebuildable
    for module in (tape_model, run_files):
        monkeypatch.setattr(module, "check_rebuildable", lambda m: checks.append(original(m)))
    save_model(saveable, tmp_path / "model.keras")
    assert len(checks) == 1 and (tmp_path / "model.keras").is_file()


def test_the_one_name_tapefit_keeps_is_refused_at_construction_in_one_line():
    class Owner(tapefit.TapeModel):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.optimizers = [keras.optimizers.SGD()]

    with pytest.raises(tapefit.TapefitError, match=r"Owner\.optimizers is TapeModel's") as error:
        Owner()
    assert "another name" in str(error.value) and "\n" not in str(error.value)
