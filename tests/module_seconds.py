"""The seconds each test module and each slower test took in a whole run: the tests' order and
what `make test-fast` leaves out (tests/conftest.py).

`make test PYTEST_ARGS=--junitxml=run.xml`, then `python -m tests.module_seconds run.xml`
rewrites `tests/module_seconds.json`: every module that took at least half a second, its test
seconds summed, and every test that took `SLOW_TEST_SECONDS` or more. The suite runs the
heaviest modules first, so the two xdist workers end with the lightest ones and finish together;
a module the file does not list runs after those it lists. A listed test is marked `slow`, so
`make test-fast` runs only the tests that took under `SLOW_TEST_SECONDS` each (a new test runs
in it until the next refresh). The figures only order and select the tests: nothing asserts them.
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

FILE = Path(__file__).with_name("module_seconds.json")
# Half a second: the tests under it are the unit tests (1216 of 1900, 117 of the suite's 3009
# test-seconds on 2026-11-29); those over it build and train models, or start processes.
SLOW_TEST_SECONDS = 0.5


def _cases(junit_xml: Path) -> list[tuple[str, float]]:
    """`("tests/x/test_y.py::test_z[id]", seconds)` for each test case of a pytest JUnit XML."""
    return [
        (
            case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", ""),
            float(case.get("time", 0)),
        )
        for case in ElementTree.parse(junit_xml).getroot().iter("testcase")
    ]


def module_seconds(junit_xml: Path) -> dict[str, float]:
    """`{"tests/x/test_y.py": seconds}` from a pytest JUnit XML, heaviest first."""
    seconds: collections.Counter[str] = collections.Counter()
    for node_id, time in _cases(junit_xml):
        seconds[node_id.split("::")[0]] += time
    return {module: round(total, 1) for module, total in seconds.most_common() if total >= 0.5}


def slow_tests(junit_xml: Path) -> dict[str, float]:
    """`{node id: seconds}` of the tests that took `SLOW_TEST_SECONDS` or more, by node id."""
    return {
        node_id: round(time, 1)
        for node_id, time in sorted(_cases(junit_xml))
        if time >= SLOW_TEST_SECONDS
    }


def load() -> dict[str, float]:
    """The committed module figures (empty when the file is missing)."""
    return _read().get("modules", {})


def load_slow_tests() -> dict[str, float]:
    """The committed slow tests' figures (empty when the file is missing)."""
    return _read().get("slow_tests", {})


def _read() -> dict[str, dict[str, float]]:
    return json.loads(FILE.read_text()) if FILE.exists() else {}


if __name__ == "__main__":
    run = Path(sys.argv[1])
    figures = {"modules": module_seconds(run), "slow_tests": slow_tests(run)}
    FILE.write_text(json.dumps(figures, indent=0) + "\n")
