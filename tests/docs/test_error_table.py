"""docs/reference/errors.md, row by row, as written: each row's bad input goes through
`python -m tapefit`, and the test checks the first `tapefit: error:` line, the exit code and what
is left on disk (`status.json` saying `failed`, no `metrics.json` or `model.keras`; or, where the
row says so, no run directory at all, or a finished run for the inputs read as meant).

The rows are found by their anchors (`<a id="range"></a>` in the first cell): a row that
`CASES` has no case for fails `test_every_row_of_the_table_has_cases`, and so does a case for a
row the page no longer has. The cases run in a few fresh processes, one TensorFlow start-up
each (`tests.helpers.run_cli_batch`), from the user's project folder that
tests/cli/test_user_project_hits.py runs too (tests/conftest.py's `hits_project`: a model, a
metric with no direction, endless and unbatched datasets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests.data.files import write_mnist
from tests.helpers import REPO, pair_lines, run_cli_batch

PAGE = REPO / "docs" / "reference" / "errors.md"
ROW = re.compile(r'^\| <a id="(?P<id>[a-z-]+)"></a>', re.M)
QUICK = ["trainer.epochs=1", "trainer.verbose=0", "model.architecture=mlp"]
SIAMESE = ["experiment=siamese", "trainer.epochs=1", "trainer.verbose=0"]
FEW_PAIRS = ["data.train_size=64", "data.val_size=32", "data.test_size=32"]
PAIRS = [*SIAMESE, "model.encoder.rnn=none", "model.encoder.pooling=mean", "data=pairs_file"]
USER = ["--config-dir", "conf", "experiment=autoencoder"]


@dataclass(frozen=True)
class Case:
    """One bad input of a row, and what the row promises for it.

    Attributes:
        args: what follows `python -m tapefit`; `{folder}` is the case's own folder.
        says: a regex the first `tapefit: error:` line must match (for `left="nothing"`,
            Hydra's message: the whole of stderr).
        files: writes what the case reads into its folder.
        env: run-time environment variables for this invocation.
        code: the exit code.
        left: "refused" (refused before training: the run directory removed), "failed" (it
            failed while training: status.json failed, no results), "nothing" (refused
            while Hydra composes: no run directory was made),
            "completed" (read as meant: the run ends and says so), "file" (the case's `run`
            is a file, left as it was).
        run_dir: `hydra.run.dir` within the case's folder (`run/sub`: under the file).
        rows: for `left="completed"`, the rows the run read (every line, none skipped).
    """

    args: list[str]
    says: str = ""
    files: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    code: int = 2
    left: str = "refused"
    run_dir: str = "run"
    rows: int | None = None


def write(name: str, text: str, encoding: str = "utf-8") -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_bytes(text.encode(encoding))


def mnist(change: Callable[[dict], None] | None = None, raw: bytes | None = None, cut=False):
    """An MNIST archive in the folder: `cut` to its first 200 bytes, replaced by `raw` bytes,
    or its arrays changed by `change`."""

    def make(folder: Path) -> None:
        path = folder / "mnist.npz"
        arrays = write_mnist(path, n_train=40, n_test=10)
        if cut:
            path.write_bytes(path.read_bytes()[:200])
        elif raw is not None:
            path.write_bytes(raw)
        elif change is not None:
            change(arrays)
            np.savez(path, **arrays)

    return make


def nan_pixel(arrays: dict) -> None:
    arrays["x_train"] = arrays["x_train"].astype("float32") / 255.0
    arrays["x_train"][7, 3, 3] = np.nan


def directory(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).mkdir()


MNIST = ["experiment=mnist", "data.path={folder}/mnist.npz", "trainer.verbose=0"]
PAIR_FILE = [*PAIRS, "data.train_path={folder}/pairs.csv"]
HEADER = "text1,text2,label\n"
TYPED_TAB = "data.delimiter='\\t'"  # backslash-t, as a user types it
CLUSTER = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker"}}
CASES: dict[str, list[Case]] = {
    "range": [
        Case([*QUICK, "trainer.epochs=0"], r"trainer\.epochs=0 must be at least 1"),
        # the CNN's key (with the MLP it does nothing, and is refused as such); refused unbuilt
        Case([*QUICK[:2], "model.dropout=1.5"], r"model\.dropout=1\.5 must lie in \[0, 1\)"),
        Case([*QUICK, "optimizer.learning_rate=0"], r"optimizer\.learning_rate=0 must be > 0"),
        Case([*SIAMESE, "data.sequence_length=0"], r"data\.sequence_length=0 must be at least 1"),
    ],
    "misspelt-key": [
        Case(
            [*QUICK, "+trainer.epocs=3"],
            r"trainer\.epocs is not a config key \(did you mean trainer\.epochs\?.*steps_per_epoch",
        ),
        Case(
            [*QUICK, "++trainer.epocs=3"],
            r"trainer\.epocs is not a config key \(did you mean trainer\.epochs\?.*steps_per_epoch",
        ),
        # the ordinary form: refused while Hydra composes, so before a run directory is made
        Case(
            [*QUICK, "trainer.epoch=3"],
            r"^tapefit: error: trainer\.epoch is not a config key "
            r"\(did you mean trainer\.epochs\?\): fix the override; trainer has .*steps_per_epoch",
            left="nothing",
        ),
        Case(
            [*QUICK, "data.batchsize=8"],
            r"data\.batchsize is not a config key \(did you mean data\.batch_size\?\).*"
            r"add it with \+data\.batchsize=VALUE",
            left="nothing",
        ),
    ],
    "inert-setting": [
        Case(
            [*QUICK, "trainer.export_formats=[onnx]"],
            r"^trainer\.export_formats=\[onnx\] does nothing in this run: it needs "
            r"trainer\.export=true; add that, or drop the override$",
        ),
        Case(
            [*QUICK, "callbacks.early_stopping.patience=5"],
            r"callbacks\.early_stopping\.patience=5 does nothing.*"
            r"callbacks\.early_stopping\.enabled=true",
        ),
        Case([*QUICK, "tune.max_trials=4"], r"tune\.max_trials=4 does nothing.*tune=random"),
        Case([*QUICK, "tune=random", "tune.sampler=random"], r"tune\.sampler=random.*tune=optuna"),
        Case([*QUICK, "force_resume=true"], r"force_resume=true does nothing.*resume=true"),
        Case(
            [*QUICK, "model.conv_blocks=[[8,1]]"],
            r"model\.conv_blocks=\[\[8,1\]\] does nothing.*model\.architecture=cnn",
        ),
    ],
    "unknown-choice": [
        Case(
            [*QUICK, "trainer.precision=float8"],
            r"trainer\.precision.*float8.*mixed_float16",
            code=1,
            left="nothing",
        ),
    ],
    "option-range": [
        Case(
            [
                *QUICK,
                "callbacks.reduce_lr_on_plateau.enabled=true",
                "callbacks.reduce_lr_on_plateau.factor=2",
            ],
            r"reduce_lr_on_plateau\.factor=2\.0 must lie in \(0, 1\)",
        ),
        Case(
            [*QUICK, "callbacks.tensorboard.profile_batch=-1"],
            r"callbacks\.tensorboard\.profile_batch=-1 must be at least 0",
        ),
        Case(
            [*PAIR_FILE, "data.val_fraction=0.5", "data.test_fraction=0.5"],
            r"data\.val_fraction \+ data\.test_fraction = 1\.0 leaves no training pairs",
            files=write("pairs.csv", HEADER + pair_lines(40)),
        ),
        Case(
            [*PAIR_FILE, "data.label_range=[5,0]"],
            r"data\.label_range=\[5\.0, 0\.0\] must be two numbers",
            files=write("pairs.csv", HEADER + pair_lines(40)),
        ),
        Case(
            [*PAIRS, "data.quoting=some"],
            r"data\.quoting='some' must be one of minimal, none, all, nonnumeric",
        ),
    ],
    "never-logged": [
        Case(
            [*QUICK, "objective=val_f1"],
            r"objective=val_f1 is never logged by this run.*val_accuracy",
        ),
        Case(
            [*QUICK, "trainer.on_nonfinite=skip", "objective=test_skipped_steps"],
            r"objective=test_skipped_steps is never logged by this run",
        ),
    ],
    "no-direction": [
        Case(
            [*USER, "compile.metrics=[{_target_: hits_user.Agreement}]", "objective=val_agreement"],
            r"val_agreement.*objective_direction=max",
        ),
    ],
    "endless-dataset": [
        Case(
            [*USER, "data._target_=hits_user.datasets", "+data.repeat=true"],
            r"the training dataset repeats forever.*trainer\.steps_per_epoch=N",
        ),
    ],
    "unbatched-dataset": [
        Case(
            [*USER, "data._target_=hits_user.unbatched"],
            # Keras' own message, not its "Exception encountered" wrapper
            r"^(?!.*Exception encountered).*looks unbatched.*shape \(4,\).*dataset\.batch\(32\)",
        ),
    ],
    "string-labels": [
        Case(
            [*USER, "data._target_=hits_user.word_labels"],
            r"returned 'train' holds strings in an object array \(e\.g\. '(up|down)'\): give "
            r"labels as numbers \(class indices\)",
        ),
    ],
    "input-shape": [
        Case(
            [*QUICK, "+model.image_shape=[8,8,3]"],
            r"^model\._target_=tapefit\.models\.Classifier: its test step failed on a batch of "
            r"the data's shape \(ValueError: .*expected axis -1 of input shape to have value 192",
        ),
    ],
    "optimizer-option": [
        Case(
            [*QUICK, "+optimizer.beta1=0.8"],
            r"optimizer\.beta1.*did you mean optimizer\.beta_1\?",
        ),
    ],
    "leaked-search-space": [
        Case(
            [*USER, "tune=random"],
            r"tune\.space\.model\.architecture.*search_space=classifier.*"
            r"override /search_space: null",
        ),
    ],
    "outside-run-directory": [
        Case(
            [*QUICK, "callbacks.csv_logger.filename=../../x.csv"],
            r"filename=\.\./\.\./x\.csv would be written outside the run directory",
        ),
    ],
    "run-directory-file": [
        Case(QUICK, r"run directory .*/run cannot be used: .*/run is a file", left="file"),
        Case(
            QUICK,
            r"run directory .*/run/sub cannot be used: .*/run is a file",
            left="file",
            run_dir="run/sub",
        ),
    ],
    "tf-config": [
        Case(
            [*QUICK, "trainer.strategy=multi_worker", "trainer.steps_per_execution=1"],
            r"TF_CONFIG is malformed",
            env={"TF_CONFIG": "{cluster: nope"},
        ),
        Case(
            [*QUICK, "trainer.strategy=multi_worker", "trainer.steps_per_execution=1"],
            r"TF_CONFIG",
            env={"TF_CONFIG": json.dumps({"cluster": CLUSTER["cluster"]})},
        ),
    ],
    "mnist-archive": [
        Case(
            MNIST,
            r"not a readable \.npz archive \(BadZipFile.*download mnist\.npz again",
            files=mnist(cut=True),
        ),
        Case(MNIST, r"not a readable \.npz archive", files=mnist(raw=b"x_train,y_train\n1,2\n")),
    ],
    "mnist-values": [
        Case(
            MNIST,
            r"MNIST x_train holds NaN or inf in 1 images \(the first at index 7\)",
            files=mnist(nan_pixel),
        ),
        Case(
            MNIST,
            r"test images are \(20, 20\) but training images \(28, 28\)",
            files=mnist(lambda a: a.update(x_test=np.zeros((10, 20, 20), "uint8"))),
        ),
        Case(
            MNIST,
            r"labels must lie in 0\.\.9; they range from 0 to 10",
            files=mnist(lambda a: a.update(y_train=a["y_train"] + (a["y_train"] == 9))),
        ),
        Case(
            MNIST,
            r"one label each; got images \(40, 28, 28\) and labels \(37,\)",
            files=mnist(lambda a: a.update(y_train=a["y_train"][:-3])),
        ),
    ],
    "encoding": [
        Case(
            PAIR_FILE,
            r"is not utf-8 text .*set data\.encoding to the file's encoding",
            files=write("pairs.csv", HEADER + pair_lines(40) + "caf\xe9,th\xe9,3\n", "latin-1"),
        ),
    ],
    "typed-tab": [
        Case(
            [*PAIRS, "data.train_path={folder}/pairs.txt", "data.format=csv", TYPED_TAB],
            files=write("pairs.txt", "\ufeff" + (HEADER + pair_lines(40)).replace(",", "\t")),
            code=0,
            left="completed",
            rows=40,
        ),
    ],
    "nonnumeric-quoting": [
        Case(
            [*PAIR_FILE, "data.quoting=nonnumeric"],
            r"pairs\.csv:2: an unquoted field that is not a number .*every text must be quoted",
            files=write("pairs.csv", '"text1","text2","label"\n' + pair_lines(40)),
        ),
    ],
    "unterminated-quote": [
        Case(
            PAIR_FILE,
            r"pairs\.csv:42: unterminated",
            files=write("pairs.csv", HEADER + pair_lines(40) + '"open,b,1\n' + pair_lines(300, 41)),
        ),
        Case(
            [*PAIR_FILE, "data.on_bad_line=skip"],
            r"260 of 300 lines are bad \(from line 42: unterminated quote.*\), more than "
            r"data\.max_skipped_fraction",
            files=write("pairs.csv", HEADER + pair_lines(40) + '"open,b,1\n' + pair_lines(300, 41)),
        ),
    ],
    "trailing-columns": [
        Case(
            PAIR_FILE,
            files=write("pairs.csv", HEADER + pair_lines(40).replace("\n", ",source,2012\n")),
            code=0,
            left="completed",
            rows=40,
        ),
    ],
    "empty-text": [
        Case(
            PAIR_FILE,
            r"pairs\.csv:2: a text is empty",
            files=write("pairs.csv", HEADER + " , b,1\n" + pair_lines(20)),
        ),
        Case(
            PAIR_FILE,
            r"pairs\.csv is a directory: point the path at a file in it",
            files=directory("pairs.csv"),
        ),
    ],
    "label-type": [
        Case(
            PAIR_FILE,
            r"every label in the pair files is 0 or 1.*data\.label_type=binary",
            files=write("pairs.csv", HEADER + pair_lines(60, label=lambda i: i % 2)),
        ),
        # refused once the generated pairs are made: few of them (8,000 by default)
        Case(
            [*SIAMESE, "model.loss.name=contrastive", *FEW_PAIRS],
            r"loss=contrastive needs binary 0/1 labels: set data\.label_type=binary",
        ),
    ],
    "diverging": [
        Case(
            [*QUICK, "optimizer.learning_rate=1e9"],
            r"NaN/inf at epoch 1, optimizer step \d+",
            left="failed",  # while training: the run directory stays, status.json failed
        ),
    ],
}
# Rows a separate process must show (an import-time variable cannot change in a warm one):
# the test that runs it as the row says.
ELSEWHERE = {
    "keras-backend": (
        "tests/test_backend.py::test_another_keras_backend_is_one_line_and_exit_code_2"
    ),
}


def test_every_row_of_the_table_has_cases():
    rows = ROW.findall(PAGE.read_text())
    assert len(rows) == len(set(rows)) > 20
    assert sorted(rows) == sorted([*CASES, *ELSEWHERE])
    for row, test in ELSEWHERE.items():
        path, name = test.split("::")
        assert f"def {name}(" in (REPO / path).read_text(), row


def first_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("tapefit: error: ")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0].removeprefix("tapefit: error: ")


def check(case: Case, folder: Path, result) -> None:
    """What the row promises for one case."""
    run_dir = folder / "run"
    assert result.returncode == case.code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if case.left == "nothing":  # refused while Hydra composes, before a run directory is chosen
        assert re.search(case.says, result.stderr, re.S | re.M), result.stderr[-3000:]
        assert not run_dir.exists()
        return
    if case.left == "completed":
        status = json.loads((run_dir / "status.json").read_text())
        assert status["state"] == "completed" and (run_dir / "metrics.json").is_file()
        if case.rows is not None:  # read as meant: every line, none skipped
            metrics = json.loads((run_dir / "metrics.json").read_text())
            assert sum(metrics["samples"].values()) == case.rows, metrics["samples"]
            assert metrics.get("skipped_lines", 0) == 0, metrics["skipped_lines"]
        return
    line = first_error_line(result.stderr)
    assert re.search(case.says, line), line
    if case.left == "file":
        assert run_dir.read_text() == "not a directory"
        return
    if case.left == "refused":  # refused before training: the run directory is removed
        assert not run_dir.exists(), sorted(p.name for p in run_dir.iterdir())
        return
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["error"] == line
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "model.keras").exists()


# Three processes, so that both test workers share them.
ROWS = sorted(CASES)
BATCHES = [ROWS[0::3], ROWS[1::3], ROWS[2::3]]


@pytest.mark.slow
@pytest.mark.parametrize("rows", BATCHES, ids=["batch0", "batch1", "batch2"])
def test_each_row_as_written_through_the_cli(hits_project, tmp_path, rows):
    cases = [(row, index, case) for row in rows for index, case in enumerate(CASES[row])]
    folders = []
    for row, index, case in cases:
        folder = tmp_path / f"{row}-{index}"
        folder.mkdir()
        if case.files:
            case.files(folder)
        if case.left == "file":
            (folder / "run").write_text("not a directory")
        folders.append(folder)
    invocations = [
        (
            "tapefit",
            [arg.replace("{folder}", str(folder)) for arg in case.args]
            + [f"hydra.run.dir={folder}/{case.run_dir}"],
            case.env,
        )
        for (_, _, case), folder in zip(cases, folders, strict=True)
    ]
    results = run_cli_batch(invocations, cwd=hits_project)
    failures = []
    for (row, index, case), folder, result in zip(cases, folders, results, strict=True):
        try:
            check(case, folder, result)
        except (AssertionError, OSError) as failure:
            failures.append(f"row {row!r}, case {index}: {failure}")
    assert not failures, "\n\n".join(failures)
