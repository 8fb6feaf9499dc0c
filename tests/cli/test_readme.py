"""The README is the front page: its Python example runs as written, and every link resolves."""

import re

from tests.helpers import REPO

README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
LINKS = re.findall(r"\]\(([^)\s]+)\)", README)


def test_readme_example_trains_and_logs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert len(BLOCKS) == 1
    namespace: dict = {}
    exec(compile(BLOCKS[0], "README.md", "exec"), namespace)
    losses = namespace["history"].history["loss"]
    assert losses[-1] < 0.5 * losses[0]
    assert any((tmp_path / "logs" / "train").glob("events.out.tfevents.*"))


def test_every_relative_link_resolves():
    relative = [link for link in LINKS if not link.startswith(("http://", "https://"))]
    assert len(relative) > 20
    missing = [link for link in relative if not (REPO / link.split("#")[0]).is_file()]
    assert missing == []


def test_readme_stays_a_front_page():
    assert len(README.splitlines()) <= 200
    assert "make run" in README and "make test" in README
