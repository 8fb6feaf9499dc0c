"""tapefit/config/typecheck.py: a `_target_`'s arguments are checked against its type hints,
and only against them (a default's type is no promise)."""

from __future__ import annotations

import pytest

from tapefit.config.typecheck import check_arguments_types, parameter_types
from tapefit.errors import TapefitError


class Backbone:
    """Written as `keras.applications` are: no hints, a string default that may be None."""

    def __init__(self, weights="imagenet", alpha=1.0, include_top=True):
        self.weights, self.alpha, self.include_top = weights, alpha, include_top


class Typed(Backbone):
    def __init__(self, units: int, rate: float | None = None, **kwargs):
        super().__init__(**kwargs)


@pytest.mark.parametrize(
    "arguments",
    [{"weights": None}, {"weights": "path/to.weights.h5"}, {"alpha": "0.5"}, {"include_top": 0}],
)
def test_an_argument_without_a_hint_takes_any_value(arguments):
    check_arguments_types(Backbone, arguments, "model")  # Backbone judges them when built


def test_hinted_arguments_are_checked_along_the_forwarded_kwargs():
    assert parameter_types(Typed) == {"units": int, "rate": float | None}
    check_arguments_types(Typed, {"units": 3, "rate": None, "weights": None}, "model")
    with pytest.raises(TapefitError, match=r"^model\.units='three' must be an integer$"):
        check_arguments_types(Typed, {"units": "three"}, "model")
    with pytest.raises(TapefitError, match=r"^model\.rate='fast' must be"):
        check_arguments_types(Typed, {"units": 3, "rate": "fast"}, "model")


def test_keras_own_classes_are_read_from_their_numeric_and_boolean_defaults():
    import keras

    types_of = parameter_types(keras.optimizers.Adam)
    assert types_of["beta_1"] is float and types_of["amsgrad"] is bool
    assert "clipnorm" not in types_of  # default None: no type to read
    with pytest.raises(TapefitError, match=r"^optimizer\.beta_1='abc' must be a number$"):
        check_arguments_types(keras.optimizers.Adam, {"beta_1": "abc"}, "optimizer")
