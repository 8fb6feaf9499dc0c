"""`tapefit.config.targets`: what a `_target_` names, imported with an error that says what to put
on the path, its arguments checked against its signature, then built in one line's failure."""

import sys
import textwrap

import keras
import pytest
from omegaconf import OmegaConf

from tapefit.config.targets import (
    KERAS_BASE_ARGUMENTS,
    accepted_arguments,
    check_arguments,
    checked_target,
    instantiate,
    locate,
)
from tapefit.errors import TapefitError

USER_MODULE = """
import keras

from tapefit.errors import TapefitError


def scaled(x, factor: int = 2):
    return x * factor


def fussy(x):
    if x < 0:
        raise ValueError(f"x={x} is negative\\nsecond line")
    raise TapefitError(f"x={x}: fussy refuses it itself")


def anything(x, **options):
    return x, options


class Needs:
    def __init__(self, width, depth=1):
        self.width, self.depth = width, depth


class Ranged:
    def __init__(self, rate=0.5):
        self.rate = rate

    @staticmethod
    def check_options(arguments):
        if not 0 < arguments.get("rate", 0.5) < 1:
            raise TapefitError(f"rate={arguments['rate']} must lie in (0, 1)")


class Block(keras.layers.Layer):
    def __init__(self, width=4, **kwargs):
        super().__init__(**kwargs)
        self.width = width


LIMIT = 3
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """`targets_user` (USER_MODULE) importable from `tmp_path`, a package `targets_pkg` whose
    module imports a package that is not installed, and a module that fails as it imports."""
    (tmp_path / "targets_user.py").write_text(textwrap.dedent(USER_MODULE))
    (tmp_path / "targets_pkg").mkdir()
    (tmp_path / "targets_pkg" / "__init__.py").write_text("")
    (tmp_path / "targets_pkg" / "nets.py").write_text("import targets_not_installed\n")
    (tmp_path / "targets_raising.py").write_text("RATIO = 1 / 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("targets_user", "targets_pkg", "targets_pkg.nets", "targets_raising"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return "targets_user"


def test_a_dotted_path_gives_the_object_it_names(user_module):
    assert locate("keras.layers.Dense", "model._target_") is keras.layers.Dense
    assert locate("targets_user.scaled", "data._target_")(3) == 6


# A module that fails to import is named (not the object it holds), then the cause.
@pytest.mark.parametrize(
    ("path", "fragments"),
    [
        ("targets..Net", ["model._target_='targets..Net' must be a dotted path such as"]),
        (
            "targets_nowhere.Net",
            [
                "model._target_=targets_nowhere.Net: no module named 'targets_nowhere'; run from "
                "the folder that holds targets_nowhere/ (or targets_nowhere.py), or install it"
            ],
        ),
        (
            "targets_user.scaledd",
            [
                "model._target_=targets_user.scaledd: targets_user has no 'scaledd' (did you "
                "mean targets_user.scaled?)"
            ],
        ),
        (
            "targets_pkg.nest.Net",  # a module of the package not imported yet is suggested
            ["targets_pkg has no 'nest' (did you mean targets_pkg.nets?)"],
        ),
        (
            "targets_pkg.nets.Net",
            [
                "model._target_=targets_pkg.nets.Net: importing targets_pkg.nets failed: No "
                "module named 'targets_not_installed'; install that package",
            ],
        ),
        (
            "targets_raising.Net",
            [
                "model._target_=targets_raising.Net: importing targets_raising raised "
                "ZeroDivisionError: division by zero",
            ],
        ),
    ],
    ids=["empty part", "no module", "no attribute", "no submodule", "broken import", "raising"],
)
def test_a_path_that_names_nothing_says_what_to_fix_in_one_line(user_module, path, fragments):
    with pytest.raises(TapefitError) as refused:
        locate(path, "model._target_")
    message = str(refused.value)
    assert all(fragment in message for fragment in fragments) and "\n" not in message


def test_the_accepted_arguments_of_functions_keras_classes_and_subclasses(user_module):
    import targets_user

    assert accepted_arguments(targets_user.scaled) == (["x", "factor"], False)
    assert accepted_arguments(targets_user.anything) == (["x"], True)
    names, takes_any = accepted_arguments(keras.layers.Dense)
    assert {"units", "activation", *KERAS_BASE_ARGUMENTS} <= set(names) and not takes_any
    # **kwargs passed on to keras.layers.Layer: the Layer's few base arguments, nothing more
    assert accepted_arguments(targets_user.Block) == (["width", *KERAS_BASE_ARGUMENTS], False)


def test_an_unknown_argument_is_refused_with_the_closest_name_and_a_missing_one_named(
    user_module,
):
    import targets_user

    with pytest.raises(TapefitError) as unknown:
        check_arguments(targets_user.Needs, ["width", "dept"], "model")
    assert str(unknown.value) == (
        "model.dept: Needs takes no argument 'dept' (did you mean model.depth?); it takes "
        "width, depth"
    )
    with pytest.raises(TapefitError, match=r"^model: Needs needs width: set model\.width=\.\.\.$"):
        check_arguments(targets_user.Needs, ["depth"], "model")
    check_arguments(targets_user.Needs, ["depth"], "model", supplied=["width"])  # tapefit's
    check_arguments(targets_user.anything, ["x", "whatever"], "data")  # **options takes it


def test_a_checked_target_must_be_callable_and_pass_its_own_option_check(user_module):
    node = OmegaConf.create({"_target_": "targets_user.LIMIT"})
    with pytest.raises(TapefitError, match=r"^model\._target_=targets_user\.LIMIT is not callable"):
        checked_target(node, "model")
    ranged = OmegaConf.create({"_target_": "targets_user.Ranged", "rate": 0.3})
    assert checked_target(ranged, "model").__name__ == "Ranged"
    ranged.rate = 1.5
    with pytest.raises(TapefitError, match=r"^rate=1\.5 must lie in \(0, 1\)$"):
        checked_target(ranged, "model")


def test_instantiate_builds_with_the_extra_arguments_and_without_the_excluded_keys(user_module):
    node = OmegaConf.create({"_target_": "targets_user.scaled", "factor": 3, "enabled": True})
    assert instantiate(node, "data", exclude=("enabled",), x=2) == 6
    with pytest.raises(TapefitError, match=r"^data\.enabled: scaled takes no argument 'enabled'"):
        instantiate(node, "data", x=2)


def test_what_the_target_raises_is_one_line_naming_it_and_its_own_refusal_is_kept(user_module):
    node = OmegaConf.create({"_target_": "targets_user.fussy"})
    with pytest.raises(TapefitError) as failed:
        instantiate(node, "data", x=-1)
    assert str(failed.value) == "data: fussy(...) raised ValueError: x=-1 is negative"
    with pytest.raises(TapefitError) as refused:
        instantiate(node, "data", x=1)
    assert str(refused.value) == "x=1: fussy refuses it itself"
