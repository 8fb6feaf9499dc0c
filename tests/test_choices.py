"""`tapefit.choices`: options as string Enums, an unknown value refused in one line."""

import pytest

from tapefit.choices import choice_enum, parse_choice
from tapefit.errors import TapefitError

Pooling = choice_enum("Pooling", ["mean", "max", "cls"])


def test_a_choice_enum_has_one_string_member_per_value_in_order():
    assert Pooling.__name__ == "Pooling"
    assert [(m.name, m.value) for m in Pooling] == [
        ("mean", "mean"),
        ("max", "max"),
        ("cls", "cls"),
    ]
    assert isinstance(Pooling.mean, str) and Pooling.mean == "mean"


def test_parse_choice_takes_a_member_or_its_string():
    assert parse_choice(Pooling, Pooling.max, "model.pooling") is Pooling.max
    assert parse_choice(Pooling, "mean", "model.pooling") is Pooling.mean


@pytest.mark.parametrize(
    ("value", "shown"), [("sum", "'sum'"), (None, "None"), (3, "3"), ("Mean", "'Mean'")]
)
def test_an_unknown_value_is_refused_naming_the_key_and_the_allowed_values(value, shown):
    with pytest.raises(TapefitError) as refused:
        parse_choice(Pooling, value, "model.encoder.pooling")
    assert (
        str(refused.value)
        == f"model.encoder.pooling={shown} is unknown: choose one of mean, max, cls"
    )
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
