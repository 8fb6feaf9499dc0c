"""Every tapefit command the README and the docs show runs as the page says, or composes.

A page's shell blocks are read line by line (`\\` continuations joined); a command runs tapefit
when it is `python -m tapefit`, the `tapefit` script, or what `python -m tapefit.launch` passes
after `--`. Each page's commands run in a folder holding the project files the page shows (its
`# conf/...` and `# my_project/...` blocks, written as shown; a page that runs another page's
project says so with `<!-- commands: project=tutorials/your-own-model.md -->`, and its own
files are added).

**Run.** A page that runs commands declares, visibly in its source, the small overrides that
keep them fast: `<!-- run: trainer.epochs=1 trainer.steps_per_epoch=2 -->`, added after each
command (a command's own values lose; `tune.*` ones only after a command that runs a search,
the digits CNN's sizes `model.conv_blocks`/`model.dense_units` only after one that trains it,
the digits' `data.test_fraction` only after one that reads them, the generated pairs'
`data.*_size`/`data.sequence_length` only after one that trains on them, the Siamese
encoder's `model.encoder.*` only after one that trains the Siamese experiment and sets no
encoder key itself); with the word `python-above`, the page's Python blocks above its first
command run first (they write the files the commands read). Every command then runs through
the real CLI (one process per page, `tests.helpers.run_cli_batch`), each in its own run
directory (`hydra.run.dir=outputs/line-N`, or `hydra.sweep.dir=multirun/line-N` for a
multirun), and must exit 0 with a `status.json` saying completed, leave the files the page
names (`LEAVES`), end with the lines the page quotes (`ENDS`), or, where the page says it
fails, fail with its `tapefit: error:` line and exit 2 (`FAILS`). A command that several pages
show the same (the same words after each page's overrides, among the same project files) runs
once a session, and each of those pages checks that run (`SHOWN_ON_SEVERAL_PAGES`).

**Not run.** A shell block right after `<!-- commands: not-run (REASON) -->` is not run, and the
page source says why (GPUs, a cluster, a kill between two commands, the user's own files);
neither are the launcher's commands (tests/runner/test_scale_out.py runs the launcher). Those are
composed with Hydra in this process, `--config-dir conf` as the CLI reads it, and pass
tapefit's own checks of a composed config (`check_config`: ranges, unknown keys, schedules,
debug presets; no override that would do nothing), as `python -m tapefit` runs them before
anything is loaded; a page marked
`<!-- commands: compose-only -->` is only composed (it names a machine this is not). A
launcher's or a hand-started worker's `trainer.strategy=multi_worker` gets the `TF_CONFIG` the
launcher would give it; `hparams_search=...` needs Hydra's Optuna sweeper (`tapefit[hydra-optuna]`)
and is skipped without it.

Lines written as templates (`[GROUP=OPTION ...]`, `<pid>`, `OVERRIDES`) are neither.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.docs.pages import parse
from tests.helpers import REPO, run_cli_batch, shared_once

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)
TEMPLATE = re.compile(r"<[^>]+>|\[(?:GROUP|KEY)|OVERRIDES|RUN_DIR")
COMPOSE_ONLY = re.compile(r"<!--\s*commands:\s*compose-only\s*-->")
# Right before a shell block: its commands are composed and checked, not run (GPUs, a cluster,
# the user's own files), and the page says why.
NOT_RUN = re.compile(r"<!--\s*commands:\s*not-run\s+(?P<why>[^>]*?)\s*-->\s*$")
# The page's small overrides, added after each command it runs (a command's own values lose);
# with `python-above`, the page's Python blocks above its first command run first (they make
# the files the commands read).
RUN = re.compile(r"<!--\s*run:\s*(?P<overrides>.*?)\s*-->")
PYTHON_ABOVE = "python-above"
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


def not_run(page: Path, line: int) -> str | None:
    """Why the command on `line` is not run, if its block follows a not-run directive."""
    text = page.read_text()
    for block in SHELL.finditer(text):
        first = text[: block.start()].count("\n") + 2
        if first <= line <= first + block.group(1).count("\n"):
            marked = NOT_RUN.search(text[: block.start()])
            return marked["why"].strip() if marked else None
    raise AssertionError(f"{page}:{line} is in no shell block")


COMMANDS = commands()
# The launcher's commands are composed here; tests/runner/test_scale_out.py and
# tests/cli/test_user_project.py::test_two_workers_train_the_users_model run the launcher.
LAUNCHED = "python -m tapefit.launch"


def runs(page: Path, line: int, command: str) -> bool:
    """Whether the suite runs the command (else it is composed and checked)."""
    return not_run(page, line) is None and LAUNCHED not in command


COMPOSED = [
    (page, line, command) for page, line, command in COMMANDS if not runs(page, line, command)
]


def test_the_docs_show_tapefit_commands_and_each_is_read():
    assert len(COMMANDS) > 80
    assert {page.name for page, _, _ in COMMANDS} >= {"README.md", "your-own-model.md"}


def project_files(page: Path) -> list[tuple[str, str]]:
    """(path, text) of the files the page shows (its project), and those of the page whose
    project it runs (`<!-- commands: project=... -->`)."""
    named = PROJECT.search(page.read_text())  # the page runs another page's project
    sources = [REPO / "docs" / named["page"], page] if named else [page]
    items = [item for source in sources for item in parse(source.read_text())]
    return [(item.path, item.text) for item in items if item.kind == "file"]


def write_project(page: Path, folder: Path) -> Path:
    for path, text in project_files(page):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """page -> a folder with the files that page shows (its project)."""
    folders = {}

    def project(page: Path) -> Path:
        if page not in folders:
            folders[page] = write_project(page, tmp_path_factory.mktemp(page.stem))
        return folders[page]

    return project


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "line", "command"),
    COMPOSED,
    ids=[f"{page.relative_to(REPO)}:{line}" for page, line, _ in COMPOSED],
)
def test_every_command_not_run_composes_and_passes_the_config_checks(
    projects, monkeypatch, compose, page, line, command
):
    from tapefit.config.inert_settings import check_no_inert_overrides
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
    check_no_inert_overrides(cfg, overrides)  # no setting the page shows does nothing
    if not COMPOSE_ONLY.search(page.read_text()):
        check_config(cfg)
    for module in [name for name in sys.modules if name.startswith("my_project")]:
        del sys.modules[module]  # the next page's project has its own


# What a page says a command leaves, beyond "it ends well" (exit code 0 and, for one run, a
# status.json saying completed): (page, a regex on the command) -> files of its run directory.
LEAVES = {
    ("README.md", r"tune=random"): ["trials.csv", "best_config.yaml"],
    ("find-a-learning-rate.md", r"tune=lr_find"): ["lr_find.png", "lr_find.csv"],
    ("export.md", r"trainer\.export=true"): ["export/saved_model.pb"],
    ("export.md", r"onnx,litert"): [
        "export/onnx/serve.onnx",
        "export/litert/serve.tflite",
        "export/openvino/serve.xml",
    ],
    ("keep-checkpoints.md", r"save_top_k"): ["checkpoints"],
    ("fine-tune-image-model.md", r"tiny-resnet"): ["classes.json", "model.keras"],
    ("mlflow.md", r"logger=mlflow"): [],
    ("sweeps.md", r"tune=random"): ["trials.csv"],
    ("tensorboard.md", r"\."): ["tensorboard/train", "tensorboard/validation"],
}
# What a page says a run prints last: (page, a regex on the command) -> regexes for the last
# lines of its standard output, in order (README and determinism.md: `make run`, which is
# `python -m tapefit`, "ends with two lines such as ...").
ENDS = {
    ("README.md", r"model\.architecture=mlp"): [
        r"test metrics: test_accuracy=\d\.\d{4}, test_loss=\d+\.\d{4}",
        r"objective: val_accuracy=\d\.\d{4}",
    ],
}
# Commands the page itself says fail, with the line they fail with.
FAILS = {
    ("debug-presets.md", r"debug=numerics"): r"debug=numerics: op \w+.*produced the first NaN",
}


# The page's overrides that size the default run's digits CNN as the tests do
# (tests.helpers.SMALL_CNN), and the words of a command that trains another model.
CNN_SIZE = ("model.conv_blocks=", "model.dense_units=")
OTHER_MODEL = ("experiment=", "model=", "model.architecture=")
# The page's overrides that size the default digits data's splits (`data.test_fraction`: a run
# evaluates its whole test split at the end), and the words of a command that reads other data.
DIGITS_SIZE = ("data.test_fraction=",)
OTHER_DATA = ("experiment=", "data=", "model=")
# The page's overrides that size the generated sentence pairs (8,000 training pairs, 500 each
# to validate and test by default, 16 tokens a text: the longest has 9 words), and what a
# command that trains on them says.
PAIRS_SIZE = ("data.train_size=", "data.val_size=", "data.test_size=", "data.sequence_length=")
# The Siamese experiment's encoder as the tests cut it where it is not the subject
# (tests.helpers.SMALL_SIAMESE): only after a command that trains that experiment, and never
# over an encoder key the command sets itself (the page's point would not run).
SIAMESE_ENCODER = ("model.encoder.",)


def applicable(extra: list[str], words: list[str]) -> list[str]:
    """The page's small overrides that act on the command `words`: `tune.*` ones (and
    `tune.lr_find.*` ones) only where it runs a search (an lr_find), the CNN's sizes
    (`model.conv_blocks`, `model.dense_units`) only where it trains the default digits CNN,
    the digits' test split (`data.test_fraction`) only where it reads the default digits,
    the generated pairs' sizes (`data.train_size`, `data.sequence_length`, ...) only where it
    trains the Siamese experiment on them, and the encoder's (`model.encoder.*`) only where it
    trains the Siamese experiment: elsewhere they would do nothing, which tapefit refuses
    (docs/reference/errors.md, "inert-setting")."""
    algorithm = next((w.split("=", 1)[1] for w in words if w.startswith("tune=")), "none")
    searches = algorithm != "none"
    default_cnn = not any(word.lstrip("+").startswith(OTHER_MODEL) for word in words)
    digits = not any(word.lstrip("+").startswith(OTHER_DATA) for word in words)
    data = next((w.split("=", 1)[1] for w in words if w.startswith("data=")), None)
    pairs = data == "pairs_synthetic" or (data is None and "experiment=siamese" in words)
    siamese = "experiment=siamese" in words

    def acts(word: str) -> bool:
        if word.startswith("tune."):
            return searches and (algorithm == "lr_find") == word.startswith("tune.lr_find.")
        if word.startswith(PAIRS_SIZE):
            return pairs
        if word.startswith(DIGITS_SIZE):
            return digits
        if word.startswith(SIAMESE_ENCODER):
            mine = [w for w in words if w.lstrip("+").startswith(SIAMESE_ENCODER)]
            assert not mine, f"the page's {word} would change the encoder {mine} sets"
            return siamese
        return default_cnn or not word.startswith(CNN_SIZE)

    return [word for word in extra if acts(word)]


def runs_of(page: Path) -> list[tuple[int, str, list[str]]]:
    """(line, command, argv after `python -m tapefit`) of the page's commands that run."""
    small = RUN.search(page.read_text())
    extra = [w for w in shlex.split(small["overrides"]) if w != PYTHON_ABOVE] if small else []
    found = []
    for path, line, command in COMMANDS:
        if path != page or not runs(page, line, command):
            continue
        words = shlex.split(command.split(" && ")[0], comments=True)
        words = words[3:] if words[:2] == ["python", "-m"] else words[1:]
        if "-m" in words:
            words.append(f"{OWN_SWEEP_DIR}{line}")
        elif not any(word.startswith("hydra.run.dir=") for word in words):
            words.append(f"{OWN_RUN_DIR}{line}")
        found.append((line, command, [*words, *applicable(extra, words)]))
    return found


# The run directory the harness gives a command that names none: one of its own per line.
OWN_RUN_DIR, OWN_SWEEP_DIR = "hydra.run.dir=outputs/line-", "hydra.sweep.dir=multirun/line-"
RUN_PAGES = [page for page in PAGES if runs_of(page)]


def shared_argv(page: Path, argv: list[str]) -> list[str] | None:
    """The command as it runs for every page that shows it (its own run directory named
    `shared` instead of after the page's line), or None where it can only run for this page:
    the page's Python writes files first (`python-above`), or the command names its own run
    directory (a later command of the page may continue it)."""
    if PYTHON_ABOVE in RUN.search(page.read_text())["overrides"].split():
        return None
    own = [w for w in argv if w.startswith((OWN_RUN_DIR, OWN_SWEEP_DIR))]
    if len(own) != 1:
        return None
    shared = (
        "hydra.run.dir=outputs/shared"
        if own[0].startswith(OWN_RUN_DIR)
        else "hydra.sweep.dir=multirun/shared"
    )
    return [shared if word == own[0] else word for word in argv]


def shared_key(page: Path, argv: list[str]) -> str | None:
    """What identifies a command's run: its words (after the page's small overrides) and the
    project files it runs among, byte for byte; None if it is not shared (`shared_argv`)."""
    shared = shared_argv(page, argv)
    if shared is None:
        return None
    inputs = json.dumps([shared, sorted(project_files(page))]).encode()
    return hashlib.sha256(inputs).hexdigest()[:16]


def _shown_on_several_pages() -> set[str]:
    pages_of: dict[str, set[Path]] = {}
    for page in RUN_PAGES:
        for _, _, argv in runs_of(page):
            if (key := shared_key(page, argv)) is not None:
                pages_of.setdefault(key, set()).add(page)
    return {key for key, pages in pages_of.items() if len(pages) > 1}


# Commands that several pages show the same (README's and a tutorial's or a how-to's, after
# each page's small overrides): run once a session (`tests.helpers.shared_once`, whichever test
# worker asks first), and every page that shows one checks that run against what it says.
SHOWN_ON_SEVERAL_PAGES = _shown_on_several_pages()


def shared_run(tmp_path_factory, page: Path, argv: list[str]):
    """(folder, argv, result) of the command `argv` of `page` that several pages show: run once,
    as `shared_argv` words it, in a folder holding the page's project (the same for every page
    that shows it, as the key says)."""
    shared = shared_argv(page, argv)

    def build(folder: Path):
        write_project(page, folder)
        return folder, run_cli_batch([shared], cwd=folder, timeout=900)[0]

    folder, result = shared_once(tmp_path_factory, f"doc-command-{shared_key(page, argv)}", build)
    return folder, shared, result


def run_dir_of(folder: Path, argv: list[str]) -> Path | None:
    for word in argv:
        if word.startswith("hydra.run.dir="):
            return folder / word.split("=", 1)[1]
    return None


def test_every_page_that_runs_commands_declares_its_small_overrides():
    missing = [page.name for page in RUN_PAGES if not RUN.search(page.read_text())]
    assert missing == []


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(REPO)) for p in RUN_PAGES])
def test_every_command_runs_as_the_page_says(projects, tmp_path_factory, monkeypatch, page):
    folder = projects(page)
    runs = runs_of(page)
    if PYTHON_ABOVE in RUN.search(page.read_text())["overrides"].split():
        monkeypatch.chdir(folder)
        namespace: dict = {"__name__": "__main__"}
        for item in parse(page.read_text()):
            if item.kind == "python" and item.line < runs[0][0]:
                exec(compile(item.text, f"{page}:{item.line}", "exec"), namespace)
    own = [
        (line, argv)
        for line, _, argv in runs
        if shared_key(page, argv) not in SHOWN_ON_SEVERAL_PAGES
    ]
    results = dict(
        zip(
            [line for line, _ in own],
            run_cli_batch([argv for _, argv in own], cwd=folder, timeout=900) if own else [],
            strict=True,
        )
    )
    ran_in = {line: (folder, argv) for line, argv in own}
    for line, _, argv in runs:
        if line not in results:  # shown on other pages too: one run for all of them
            shared_folder, shared, results[line] = shared_run(tmp_path_factory, page, argv)
            ran_in[line] = (shared_folder, shared)
    failures = []
    for line, command, _ in runs:
        result, (run_folder, argv) = results[line], ran_in[line]
        where = f"{page.name}:{line} `{command}`"
        fails = [
            said
            for (name, key), said in FAILS.items()
            if name == page.name and re.search(key, command)
        ]
        if fails:
            errors = [x for x in result.stderr.splitlines() if x.startswith("tapefit: error:")]
            if result.returncode != 2 or not errors or not re.search(fails[0], errors[0]):
                failures.append(
                    f"{where}: expected to fail with {fails[0]}: {result.stderr[-1500:]}"
                )
            continue
        if result.returncode != 0:
            failures.append(f"{where}: exit {result.returncode}: {result.stderr[-2000:]}")
            continue
        run_dir = run_dir_of(run_folder, argv)
        if run_dir is None:
            continue
        for (name, key), lines in ENDS.items():
            if name == page.name and re.search(key, command):
                last = result.stdout.strip().splitlines()[-len(lines) :]
                if len(last) < len(lines) or not all(
                    re.fullmatch(said, printed) for said, printed in zip(lines, last, strict=True)
                ):
                    failures.append(f"{where}: ends with {last}, the page says {lines}")
        status = json.loads((run_dir / "status.json").read_text())
        if status["state"] != "completed":
            failures.append(f"{where}: status {status}")
        for (name, key), files in LEAVES.items():
            if name == page.name and re.search(key, command):
                missing = [file for file in files if not (run_dir / file).exists()]
                if missing:
                    failures.append(
                        f"{where}: no {missing} in {sorted(p.name for p in run_dir.iterdir())}"
                    )
    assert not failures, "\n\n".join(failures)
