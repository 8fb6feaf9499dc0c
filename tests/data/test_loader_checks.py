"""`tapefit.data.loader_checks`: a loader's option check, its defaults, `data.<key>` refusals."""

import pytest

from tapefit.data.loader_checks import at_least_or_null, checked_by, with_defaults
from tapefit.errors import TapefitError


def test_checked_by_attaches_the_check_and_returns_the_loader_itself():
    seen = []

    def check(options):
        seen.append(dict(options))

    def loader(size=8):
        return size * 2

    decorated = checked_by(check)(loader)
    assert decorated is loader and decorated(size=3) == 6
    decorated.check_options({"size": 5})
    assert seen == [{"size": 5}]


def test_with_defaults_fills_in_only_parameters_with_defaults_and_given_values_win():
    def loader(path, batch_size=32, *, cache=True, seed=0, **extra):
        return path

    assert with_defaults(loader, {}) == {"batch_size": 32, "cache": True, "seed": 0}
    given = {"batch_size": 8, "seed": None, "train_limit": 100}  # None given stays None
    assert with_defaults(loader, given) == {
        "batch_size": 8,
        "cache": True,
        "seed": None,
        "train_limit": 100,
    }


def test_at_least_or_null_accepts_the_minimum_and_null_where_allowed():
    at_least_or_null(1, 1, "batch_size", null=False)  # the minimum itself
    at_least_or_null(10**9, 1, "train_limit")
    at_least_or_null(None, 1, "train_limit")  # null allowed by default


@pytest.mark.parametrize(
    ("value", "null", "message"),
    [
        (0, True, "data.train_limit=0 must be at least 1 or null"),
        (-3, False, "data.train_limit=-3 must be at least 1"),
        (None, False, "data.train_limit=None must be at least 1"),
    ],
)
def test_at_least_or_null_refuses_in_one_line_naming_the_data_key(value, null, message):
    with pytest.raises(TapefitError) as refused:
        at_least_or_null(value, 1, "train_limit", null=null)
    assert str(refused.value) == message
