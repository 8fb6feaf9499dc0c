"""The README's Python examples run as written (in a scratch directory)."""

import re

from tests.helpers import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 4


def test_readme_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in BLOCKS:
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["history"].history["loss"][-1] < namespace["history"].history["loss"][0]
    assert (tmp_path / "outputs" / "notebook-run" / "metrics.json").is_file()
    assert (tmp_path / "outputs" / "siamese-notebook" / "similarity.png").is_file()
