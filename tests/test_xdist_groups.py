"""The suite's shared trained runs rely on `--dist loadgroup`: the tests of one `xdist_group`
run on one worker, which builds their session fixture once. With pytest 9, pytest-xdist 3.8
silently stopped grouping (pytest-dev/pytest-xdist#1386) and every shared run was trained on
both workers; this checks the grouping itself, in a pytest of its own."""

import re
import subprocess
import sys

GROUPED = """
import pytest

SHARED = pytest.mark.xdist_group("shared")


@SHARED
def test_first():
    pass


@SHARED
def test_second():
    pass


@pytest.mark.parametrize("other", range(4))
def test_other(other):
    pass
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"),
            *("--dist", "loadgroup", "-v", "test_grouped.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    ran = {}
    for worker, test in re.findall(r"\[(gw\d)\] .*PASSED test_grouped\.py::(\w+)", result.stdout):
        ran.setdefault(test, set()).add(worker)
    assert {"test_first", "test_second"} <= set(ran), result.stdout[-2000:]
    assert ran["test_first"] == ran["test_second"], ran  # one worker for the whole group
