"""`tapefit.errors`: the error types tapefit raises for input it refuses."""

import pytest

import tapefit
from tapefit.errors import TapefitError, UnsaveableModelError


def test_an_unsaveable_model_error_is_caught_as_keras_refusal_and_as_tapefits():
    message = "model.keras would not load again: fix the model's get_config"
    with pytest.raises(NotImplementedError, match="would not load again") as as_keras:
        raise UnsaveableModelError(message)
    with pytest.raises(tapefit.TapefitError) as as_tapefit:
        raise tapefit.UnsaveableModelError(message)
    assert str(as_keras.value) == str(as_tapefit.value) == message


def test_a_plain_refusal_is_not_taken_for_an_unimplemented_feature():
    """Code that catches Keras' save-time `NotImplementedError` lets bad input through."""
    with pytest.raises(TapefitError, match=r"^data.val_fraction=1.5 must lie") as refused:
        try:
            raise TapefitError("data.val_fraction=1.5 must lie strictly between 0 and 1")
        except NotImplementedError:
            pytest.fail("a TapefitError was caught as a NotImplementedError")
    assert not isinstance(refused.value, ValueError | NotImplementedError)
