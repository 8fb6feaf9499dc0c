"""The Python API reference cannot lose its text: what it shows keeps a full docstring.

`docs/reference/api.md` is generated from docstrings (mkdocstrings, Google style). Every
object `tapefit.__all__` exports, every object the page names with a `::: path` directive,
and the public methods and properties of those classes (TapeModel's included) must have:

- a summary line: one line, ending in a full stop, then a blank line or nothing;
- an `Args:` entry for every parameter the callable takes (`*args` and `**kwargs` by those
  names), and no entry for a parameter it does not take (classes: their `__init__`'s; the
  fields of a dataclass or NamedTuple may be documented under `Attributes:` instead);
- a `Returns:` section when the annotation says it returns something other than None.

Keras callback hooks (`on_train_begin`, ...) are Keras' to document and are not checked.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tapefit
from tests.helpers import REPO

API_PAGE = REPO / "docs" / "reference" / "api.md"
DIRECTIVE = re.compile(r"^:::\s+(?P<path>[\w.]+)\s*$", re.M)
SECTION = re.compile(r"^(?P<title>[A-Z][A-Za-z ]*):\s*$")
ITEM = re.compile(r"^    (?P<name>\*{0,2}\w+)\s*(?:\([^)]*\))?:")


def resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise LookupError(path)


def page_paths() -> list[str]:
    """The dotted paths of the API page's `::: path` directives, in page order."""
    return DIRECTIVE.findall(API_PAGE.read_text(encoding="utf-8"))


def sections(doc: str) -> dict[str, list[str]]:
    """A cleaned docstring's Google sections: title -> the names of its items."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        header = SECTION.match(line)
        if header:
            current = found.setdefault(header["title"], [])
        elif line and not line[0].isspace():
            current = None  # prose after a section ends it
        elif current is not None and (item := ITEM.match(line)):
            current.append(item["name"])
    return found


def is_own(owner: type) -> bool:
    """Whether `owner` is one of tapefit's classes (not Keras' or Python's)."""
    return owner.__module__.split(".")[0] == "tapefit"


def members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public functions, class/static methods and properties tapefit defines for `cls`."""
    seen: set[str] = set()
    for owner in cls.__mro__:
        if not is_own(owner):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_") or name.startswith("on_") or name in seen:
                continue
            if isinstance(value, property | classmethod | staticmethod) or inspect.isfunction(
                value
            ):
                seen.add(name)
                yield f"{owner.__module__}.{owner.__qualname__}.{name}", value


def subjects() -> list[tuple[str, Any]]:
    """Everything whose docstring the reference shows, by dotted name, without repeats."""
    found: dict[str, Any] = {}
    exported = [f"tapefit.{name}" for name in tapefit.__all__ if name != "__version__"]
    for path in [*exported, *page_paths()]:
        obj = resolve(path)
        found.setdefault(path, obj)
        if inspect.isclass(obj):
            for name, member in members(obj):
                found.setdefault(name, member)
    ids: dict[int, str] = {}  # one entry per object: `tapefit.X` and its module path repeat
    for path, obj in found.items():
        ids.setdefault(id(obj), path)
    return [(path, found[path]) for path in ids.values()]


def parameters(obj: Any) -> tuple[list[str], bool]:
    """The parameter names `obj`'s docstring must document (`*args`, `**kwargs` starred),
    and whether they are fields (a dataclass's or NamedTuple's, documented as Attributes)."""
    if isinstance(obj, property):
        return [], False
    if inspect.isclass(obj):
        if hasattr(obj, "_fields"):  # a NamedTuple
            return list(obj._fields), True
        if dataclasses.is_dataclass(obj):
            return [field.name for field in dataclasses.fields(obj) if field.init], True
        owner = next((k for k in obj.__mro__ if "__init__" in vars(k)), object)
        if not is_own(owner):
            return [], False  # Keras' or Python's constructor, documented there
        function: Callable = owner.__init__
        bound = True
    else:
        function = obj.__func__ if isinstance(obj, classmethod | staticmethod) else obj
        bound = "." in function.__qualname__ and not isinstance(obj, staticmethod)  # a method
    names = []
    for position, parameter in enumerate(inspect.signature(function).parameters.values()):
        if bound and position == 0:
            continue  # self or cls
        star = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}
        names.append(star.get(parameter.kind, "") + parameter.name)
    return names, False


def returns_something(obj: Any) -> bool:
    """Whether `obj` is a function annotated to return something other than None."""
    if inspect.isclass(obj) or isinstance(obj, property):
        return False
    function = obj.__func__ if isinstance(obj, classmethod | staticmethod) else obj
    annotation = inspect.signature(function, eval_str=False).return_annotation
    return annotation not in (inspect.Signature.empty, None, "None")


SUBJECTS = subjects()


def test_version_is_exported() -> None:
    """`tapefit.__version__`, the one export without a docstring, is a version string."""
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", tapefit.__version__)


def test_the_page_covers_the_exports() -> None:
    """Every export is shown on the API page (as `tapefit.X` or by its module path)."""
    shown = {id(resolve(path)) for path in page_paths()}
    missing = [
        name
        for name in tapefit.__all__
        if name != "__version__" and id(getattr(tapefit, name)) not in shown
    ]
    assert not missing, f"docs/reference/api.md shows no `::: tapefit.X` for {missing}"


def test_tape_model_methods_are_checked() -> None:
    """The step's helpers are among the subjects (a broken member search would pass all)."""
    names = {path for path, _ in SUBJECTS}
    for method in ("compile", "forward", "apply_tape_gradients", "optimizers", "track_loss"):
        assert f"tapefit.step.tape_model.TapeModel.{method}" in names


@pytest.mark.parametrize("path, obj", [pytest.param(p, o, id=p) for p, o in SUBJECTS])
def test_docstring_is_complete(path: str, obj: Any) -> None:
    """`obj` has a summary line, an `Args:` entry per parameter and a `Returns:` section."""
    raw = (obj.fget if isinstance(obj, property) else obj).__doc__
    if isinstance(obj, classmethod | staticmethod):
        raw = obj.__func__.__doc__
    assert raw and raw.strip(), f"{path} has no docstring"
    doc = inspect.cleandoc(raw)
    lines = doc.splitlines()
    assert lines[0].strip().endswith("."), f"{path}: the summary line must end with a full stop"
    assert len(lines) == 1 or not lines[1].strip(), (
        f"{path}: the summary must be one line, followed by a blank line"
    )
    found = sections(doc)
    wanted, are_fields = parameters(obj)
    documented = found.get("Args", []) + (found.get("Attributes", []) if are_fields else [])
    missing = [name for name in wanted if name not in documented]
    assert not missing, f"{path}: no Args entry for {missing}"
    unknown = [name for name in found.get("Args", []) if name not in wanted]
    assert not unknown, f"{path}: Args documents {unknown}, which it does not take"
    if returns_something(obj):
        assert "Returns" in found, f"{path}: no Returns section"
