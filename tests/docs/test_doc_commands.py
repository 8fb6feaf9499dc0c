"""Every `python -m tapefit` command the README and the docs show composes as written.

A page's shell blocks are read line by line (`\\` continuations joined); each command that runs
tapefit (`python -m tapefit`, the `tapefit` script, and what `python -m tapefit.launch` passes
after `--`) is composed with Hydra in this process, from a folder holding the project files the
page itself shows (its `# conf/...` and `# my_project/...` blocks, written as shown; a page
that runs another page's project says so with
`<!-- commands: project=tutorials/your-own-model.md -->`), with `--config-dir conf` as the CLI
reads it. Then tapefit's own checks of a composed config run
(`check_config`: ranges, unknown keys, schedules, debug presets), as `python -m tapefit` runs
them before anything is loaded. A command whose page lists it in `<!-- commands: ... -->`
as `compose-only` is composed and not checked (it names a machine this is not: GPUs, a cluster).

A launcher's or a hand-started worker's `trainer.strategy=multi_worker` gets the `TF_CONFIG`
the launcher would give it; `hparams_search=...` needs Hydra's Optuna sweeper, an optional
extra (`tapefit[hydra-optuna]`), and is skipped without it.

What is not run here: training itself (the tutorials' Python blocks and the CLI tests train);
Hydra's own settings (`hydra.*`, `hydra/launcher=...`), which are not tapefit's config; a
multirun's sweep, of which the first value of each list is composed; lines written as
templates (`[GROUP=OPTION ...]`, `<time>`, `OVERRIDES`).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.docs.test_doc_examples import parse
from tests.helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)
TEMPLATE = re.compile(r"<[^>]+>|\[(?:GROUP|KEY)|OVERRIDES|RUN_DIR")
COMPOSE_ONLY = re.compile(r"<!--\s*commands:\s*compose-only\s*-->")
PROJECT = re.compile(r"<!--\s*commands:\s*project=(?P<page>\S+)\s*-->")
# What `python -m tapefit.launch --workers 2` gives each worker (the pages running
# trainer.strategy=multi_worker by hand say to set it on every machine).
CLUSTER = '{"worker": ["127.0.0.1:1", "127.0.0.1:2"]}'
TF_CONFIG = f'{{"cluster": {CLUSTER}, "task": {{"type": "worker", "index": 0}}}}'


def tapefit_overrides(line: str) -> list[str] | None:
    """The overrides a shell line passes to a tapefit run, or None if it runs none."""
    line = line.split("  #")[0].split(" && ")[0].strip()
    if not line or TEMPLATE.search(line):
        return None
    words = shlex.split(line, comments=True)
    if words[:3] == ["python", "-m", "tapefit"]:
        words = words[3:]
    elif words[:3] == ["python", "-m", "tapefit.launch"]:
        if "--" not in words:
            return None
        words = words[words.index("--") + 1 :]
    elif words[:1] == ["tapefit"]:
        words = words[1:]
    else:
        return None
    overrides, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "--config-dir":
            skip = True
        elif word.startswith(("hydra.", "hydra/", "-")):
            continue
        elif "," in word and "[" not in word and "{" not in word:
            overrides.append(word.split(",")[0])  # a multirun's first job
        else:
            overrides.append(word)
    return overrides


def commands() -> list[tuple[Path, int, str]]:
    """(page, line, command) for every tapefit command of every page."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in SHELL.finditer(text):
            start = text[: block.start()].count("\n") + 2
            body = block.group(1).replace("\\\n", " ")
            for offset, line in enumerate(body.splitlines()):
                if tapefit_overrides(line) is not None:
                    found.append((page, start + offset, line.strip()))
    return found


COMMANDS = commands()


def test_the_docs_show_tapefit_commands_and_each_is_read():
    assert len(COMMANDS) > 80
    assert {page.name for page, _, _ in COMMANDS} >= {"README.md", "your-own-model.md"}


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """page -> a folder with the files that page shows (its project)."""
    folders = {}

    def project(page: Path) -> Path:
        named = PROJECT.search(page.read_text())  # the page runs another page's project
        source = REPO / "docs" / named["page"] if named else page
        if page not in folders:
            folder = tmp_path_factory.mktemp(page.stem)
            for item in parse(source.read_text()):
                if item.kind == "file":
                    (folder / item.path).parent.mkdir(parents=True, exist_ok=True)
                    (folder / item.path).write_text(item.text)
            folders[page] = folder
        return folders[page]

    return project


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "line", "command"),
    COMMANDS,
    ids=[f"{page.relative_to(REPO)}:{line}" for page, line, _ in COMMANDS],
)
def test_every_command_composes_and_passes_the_config_checks(
    projects, monkeypatch, compose, page, line, command
):
    from tapefit.launch import multi_worker_overrides
    from tapefit.runner.validation import check_config

    overrides = tapefit_overrides(command)
    if "hparams_search=" in command:
        pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="tapefit[hydra-optuna]")
    if "tapefit.launch --workers" in command:  # what the launcher adds to each worker's
        overrides = multi_worker_overrides(overrides)
    if "trainer.strategy=multi_worker" in overrides:
        monkeypatch.setenv("TF_CONFIG", TF_CONFIG)
    folder = projects(page)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    if "--config-dir" in command:
        overrides = [f"hydra.searchpath=[file://{folder / 'conf'}]", *overrides]
    cfg = compose(overrides)
    if not COMPOSE_ONLY.search(page.read_text()):
        check_config(cfg)
    for module in [name for name in sys.modules if name.startswith("my_project")]:
        del sys.modules[module]  # the next page's project has its own
