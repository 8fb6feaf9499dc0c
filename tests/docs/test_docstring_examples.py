"""The `>>>` examples in tapefit's docstrings run and print what they show.

The Python API reference (`docs/reference/api.md`) is generated from these docstrings, so an
example that no longer runs would be published wrong. Every module under `tapefit/` is
searched with `doctest.DocTestFinder`; each docstring with examples is one test, run in a
fresh temporary working directory (an example that writes a file leaves nothing behind).
Examples marked `# doctest: +SKIP` (they need files, a download or long training) are not
run. `...` in an expected output matches anything (ELLIPSIS), and runs of whitespace compare
equal (NORMALIZE_WHITESPACE).
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
from pathlib import Path

import pytest

import tapefit

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_names() -> list[str]:
    """`tapefit` and every module and package under it, sorted."""
    found = pkgutil.walk_packages(tapefit.__path__, prefix="tapefit.")
    return sorted(["tapefit", *(module.name for module in found)])


def docstring_tests() -> list[doctest.DocTest]:
    """Every docstring of tapefit's own objects that holds at least one example."""
    finder = doctest.DocTestFinder()
    tests: dict[str, doctest.DocTest] = {}
    for name in module_names():
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.examples:  # the finder also returns docstrings without any
                tests.setdefault(test.name, test)
    return sorted(tests.values(), key=lambda test: test.name)


TESTS = docstring_tests()


def test_examples_are_found() -> None:
    """The finder sees the examples the reference shows (a broken search would pass all)."""
    names = {test.name for test in TESTS}
    for expected in (
        "tapefit.step.tape_model.TapeModel",
        "tapefit.step.tape_model.TapeModel.compile",
        "tapefit.step.gradcheck.gradcheck",
        "tapefit.data.loaders.digits",
    ):
        assert expected in names


@pytest.mark.parametrize("test", [pytest.param(t, id=t.name) for t in TESTS])
def test_docstring_examples_run(
    test: doctest.DocTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run one docstring's examples in a fresh working directory; every output must match."""
    monkeypatch.chdir(tmp_path)
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    result = runner.run(test, out=report.write, clear_globs=True)  # frees the models made
    assert result.failed == 0, (
        f"{test.name}: {result.failed} example(s) failed\n{report.getvalue()}"
    )
