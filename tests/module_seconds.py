"""Each test module's seconds in a whole run, for ordering the tests (tests/conftest.py).

`make test PYTEST_ARGS=--junitxml=run.xml`, then `python -m tests.module_seconds run.xml`
rewrites `tests/module_seconds.json`: every module that took at least half a second, its test
seconds summed. The suite runs the heaviest modules first, so the two xdist workers end with
the lightest ones and finish together; a module the file does not list runs after those it
lists. The figures only order the tests: nothing asserts them.
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

FILE = Path(__file__).with_name("module_seconds.json")


def module_seconds(junit_xml: Path) -> dict[str, float]:
    """`{"tests/x/test_y.py": seconds}` from a pytest JUnit XML, heaviest first."""
    seconds: collections.Counter[str] = collections.Counter()
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        seconds[case.get("classname", "").replace(".", "/") + ".py"] += float(case.get("time", 0))
    return {module: round(total, 1) for module, total in seconds.most_common() if total >= 0.5}


def load() -> dict[str, float]:
    """The committed figures (empty when the file is missing)."""
    return json.loads(FILE.read_text()) if FILE.exists() else {}


if __name__ == "__main__":
    FILE.write_text(json.dumps(module_seconds(Path(sys.argv[1])), indent=0) + "\n")
