"""The bad-input table (docs/reference/errors.md): each case stops with one line saying what
is wrong and how to fix it, status.json says failed, and nothing looks like a finished run."""

import json

import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.runner.train import run
from tests.data.files import write_mnist
from tests.helpers import pair_lines, run_cli

QUICK = ["trainer.epochs=1", "trainer.verbose=0", "model.architecture=mlp"]
SIAMESE = [
    "experiment=siamese",
    "trainer.epochs=1",
    "trainer.verbose=0",
    "data.train_size=300",
    "data.val_size=60",
    "data.test_size=60",
]


def refused(compose, tmp_path, overrides, match):
    """Run and expect a one-line TapefitError matching `match`, a failed status, no results."""
    run_dir = tmp_path / "run"
    with pytest.raises(TapefitError, match=match) as caught:
        run(compose(overrides), run_dir)
    assert "\n" not in str(caught.value)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["error"] == str(caught.value)
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "model.keras").exists()
    return run_dir


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["trainer.epochs=0"], r"trainer\.epochs=0 must be at least 1"),
        (["trainer.epochs=-1"], r"trainer\.epochs=-1 must be at least 1"),
        (["data.batch_size=0"], r"data\.batch_size=0 must be at least 1"),
        (["trainer.steps_per_epoch=0"], r"trainer\.steps_per_epoch=0 must be at least 1 or null"),
        (["optimizer.learning_rate=0"], r"optimizer\.learning_rate=0 must be > 0"),
        (["optimizer.learning_rate=-0.1"], r"optimizer\.learning_rate=-0\.1 must be > 0"),
        (["seed=-1"], r"seed=-1 must be at least 0"),
        (["model.dropout=1.5"], r"model\.dropout=1\.5 must lie in \[0, 1\)"),
        (["data.train_limit=0"], r"data\.train_limit=0 must be at least 1"),
        (
            ["+trainer.epocs=3"],
            r"trainer\.epocs is not a config key \(did you mean trainer\.epochs",
        ),
        (
            ["callbacks.csv_logger.filename=../../x.csv"],
            r"filename=\.\./\.\./x\.csv would be written outside the run directory",
        ),
        (
            ["callbacks.early_stopping.enabled=true", "callbacks.early_stopping.monitor=val_acc"],
            r"monitor=val_acc is not a logged metric: choose one of .*val_accuracy",
        ),
        (["objective=val_f1"], r"objective=val_f1 is never logged by this run"),
        (
            ["trainer.on_nonfinite=skip", "objective=test_skipped_steps"],
            r"objective=test_skipped_steps is never logged by this run",
        ),
        (
            [
                "callbacks.reduce_lr_on_plateau.enabled=true",
                "callbacks.reduce_lr_on_plateau.factor=2",
            ],
            r"reduce_lr_on_plateau\.factor=2\.0 must lie in \(0, 1\)",
        ),
        (
            ["callbacks.tensorboard.profile_batch=-1"],
            r"callbacks\.tensorboard\.profile_batch=-1 must be at least 0",
        ),
        (["trainer.shard_policy=file"], r"shard_policy=file gives each worker its own training"),
        (
            ["trainer.strategy=one_device", "trainer.devices=[cpu:0,cpu:1]"],
            r"one_device takes one device, got 2: use trainer\.strategy=mirrored",
        ),
        (["trainer.devices=[gpu:0]"], r"trainer\.devices applies to .* not default"),
        (
            ["trainer.strategy=mirrored", "trainer.devices=[tpu0]"],
            r"'tpu0' is not a device: write gpu:N or cpu:N",
        ),
        (
            ["trainer.strategy=mirrored", "trainer.devices=[gpu:3]"],
            r"asks for gpu:3, which this machine does not have \(it has cpu:0, cpu:1\)",
        ),
        ([*SIAMESE[:1], "data.sequence_length=0"], r"data\.sequence_length=0 must be at least 1"),
        (
            [*SIAMESE[:1], "model.loss.name=contrastive"],
            "loss=contrastive needs binary 0/1 labels: set data.label_type=binary",
        ),
    ],
)
def test_config_values_no_run_can_use(compose, tmp_path, overrides, match):
    base = SIAMESE if overrides[0] == SIAMESE[0] else QUICK
    run_dir = refused(compose, tmp_path, [*base, *overrides], match)
    assert not (run_dir / "history.csv").exists()  # refused before the first epoch


def test_a_malformed_tf_config_is_named(compose, tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{cluster: nope")
    refused(compose, tmp_path, [*QUICK, "trainer.strategy=multi_worker"], "TF_CONFIG is malformed")


def test_a_cluster_needs_multi_worker_and_multi_worker_one_step_per_execution(
    compose, tmp_path, monkeypatch
):
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    )
    refused(compose, tmp_path, QUICK, r"cluster of 2 tasks but trainer\.strategy=default")
    refused(
        compose,
        tmp_path,
        [*QUICK, "trainer.strategy=multi_worker", "trainer.steps_per_execution=8"],
        r"steps_per_execution=8 cannot run under trainer\.strategy=multi_worker.*set .*=1$",
    )


def test_run_directories_that_cannot_be_used(compose, tmp_path):
    occupied = tmp_path / "file"
    occupied.write_text("not a directory")
    for run_dir in (occupied, occupied / "below"):
        with pytest.raises(TapefitError, match=r"cannot be used: .*file is a file"):
            run(compose(QUICK), run_dir)
    assert occupied.read_text() == "not a directory"


def mnist_case(tmp_path, kind):
    path = tmp_path / "mnist.npz"
    arrays = write_mnist(path, n_train=40, n_test=10)
    if kind == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif kind == "not-npz":
        path.write_text("x_train,y_train\n1,2\n")
    elif kind == "nan":
        arrays["x_train"] = arrays["x_train"].astype("float32") / 255.0
        arrays["x_train"][7, 3, 3] = np.nan
        np.savez(path, **arrays)
    elif kind == "shape":
        arrays["x_test"] = np.zeros((10, 20, 20), "uint8")
        np.savez(path, **arrays)
    elif kind == "label":
        arrays["y_train"] = arrays["y_train"].astype("int64")
        arrays["y_train"][0] = -1
        np.savez(path, **arrays)
    elif kind == "count":
        arrays["y_train"] = arrays["y_train"][:-3]
        np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("truncated", r"not a readable \.npz archive \(BadZipFile.*download mnist\.npz again"),
        ("not-npz", r"not a readable \.npz archive"),
        ("nan", r"MNIST x_train holds NaN or inf in 1 images \(the first at index 7\)"),
        ("shape", r"test images are \(20, 20\) but training images \(28, 28\)"),
        ("label", r"labels must lie in 0\.\.9; they range from -1 to 9"),
        ("count", r"one label each; got images \(40, 28, 28\) and labels \(37,\)"),
    ],
)
def test_bad_mnist_files(compose, tmp_path, kind, match):
    path = mnist_case(tmp_path, kind)
    run_dir = refused(compose, tmp_path, ["experiment=mnist", f"data.path={path}"], match)
    assert "allow_pickle" not in json.loads((run_dir / "status.json").read_text())["error"]


def pairs_file(tmp_path, text, name="pairs.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


# The reader is what these runs test: a bag-of-embeddings encoder (no recurrent graph to build)
# keeps each end-to-end run short.
BAG = ["model.encoder.rnn=none", "model.encoder.pooling=mean"]


def file_run(compose, tmp_path, path, *extra):
    return [*SIAMESE[:3], *BAG, "data=pairs_file", f"data.train_path={path}", *extra]


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_non_utf8_pair_files_name_the_encoding_option(compose, tmp_path):
    text = "text1,text2,label\n" + pair_lines(40) + "caf\u00e9 cr\u00e8me,th\u00e9,3\n"
    path = pairs_file(tmp_path, text, encoding="latin-1")
    refused(
        compose,
        tmp_path,
        file_run(compose, tmp_path, path),
        r"is not utf-8 text .*set data\.encoding to the file's encoding",
    )
    metrics = run(
        compose(file_run(compose, tmp_path, path, "data.encoding=latin-1")), tmp_path / "ok"
    )
    assert sum(metrics["samples"].values()) == 41


@pytest.mark.slow
def test_an_unterminated_quote_is_named_at_its_line_and_skip_counts_every_lost_line(
    compose, tmp_path
):
    text = "text1,text2,label\n" + pair_lines(40) + '"open quote,b,1\n' + pair_lines(300, 41)
    path = pairs_file(tmp_path, text)
    refused(compose, tmp_path, file_run(compose, tmp_path, path), r"pairs\.csv:42: unterminated")
    refused(
        compose,
        tmp_path,
        file_run(compose, tmp_path, path, "data.on_bad_line=skip"),
        r"260 of 300 lines are bad \(from line 42: unterminated quote.*\), more than "
        r"data\.max_skipped_fraction",
    )


def test_binary_labels_with_a_graded_loss_are_refused(compose, tmp_path):
    path = pairs_file(tmp_path, "text1,text2,label\n" + pair_lines(60, label=lambda i: i % 2))
    refused(
        compose,
        tmp_path,
        file_run(compose, tmp_path, path),
        r"every label in the pair files is 0 or 1.*data\.label_type=binary",
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (["data.val_fraction=1.2"], r"data\.val_fraction=1\.2 must lie in \[0, 1\)"),
        (
            ["data.val_fraction=0.5", "data.test_fraction=0.5"],
            r"data\.val_fraction \+ data\.test_fraction = 1\.0 leaves no training pairs",
        ),
        (["data.label_range=[5]"], r"data\.label_range=\[5\.0\] must be two numbers"),
        (["data.label_range=[5,0]"], r"data\.label_range=\[5\.0, 0\.0\] must be two numbers"),
        (
            ["data.quoting=nonnumeric"],
            r"pairs\.csv:2: an unquoted field that is not a number .*every text must be quoted",
        ),
        (
            ["data.quoting=nonnumeric", "data.header=true"],
            r"pairs\.csv:1: unreadable header .*quote the header's names",
        ),
    ],
)
def test_pair_file_options_that_cannot_work(compose, tmp_path, options, match):
    header = '"text1","text2","label"' if "data.header=true" not in options else "a,b,c"
    path = pairs_file(tmp_path, header + "\n" + pair_lines(40))
    refused(compose, tmp_path, file_run(compose, tmp_path, path, *options), match)


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_nonnumeric_quoting_reads_quoted_texts_and_bare_numbers(compose, tmp_path):
    lines = "".join(f'"alpha {i}","beta {i}",{i % 6}\n' for i in range(40))
    path = pairs_file(tmp_path, '"text1","text2","label"\n' + lines)
    metrics = run(compose(file_run(compose, tmp_path, path, "data.quoting=nonnumeric")), tmp_path)
    assert sum(metrics["samples"].values()) == 40


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("text1,text2,label\n , b,1\n" + pair_lines(20), r"pairs\.csv:2: a text is empty"),
        ("directory", r"is a directory: point the path at a file in it"),
    ],
)
def test_empty_texts_and_directories_as_pair_files(compose, tmp_path, content, match):
    if content == "directory":
        path = tmp_path / "folder.csv"
        path.mkdir()
    else:
        path = pairs_file(tmp_path, content)
    refused(compose, tmp_path, file_run(compose, tmp_path, path), match)


@pytest.mark.slow
def test_a_diverging_classifier_run_fails_instead_of_reporting_success(compose, tmp_path):
    refused(compose, tmp_path, [*QUICK, "optimizer.learning_rate=1e9"], r"NaN/inf at epoch 1")


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_a_binary_contrastive_run_reports_val_auc_as_its_objective(binary_contrastive_run):
    # the command's run, shared with tests/models/test_siamese.py (which reads its AUC figures)
    run_dir, result = binary_contrastive_run
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["objective"] == "val_auc" and 0 <= metrics["objective_value"] <= 1
    assert "objective: val_auc=" in result.stdout


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_the_cli_prints_one_error_line_without_a_traceback(tmp_path):
    result = run_cli("trainer.epochs=0", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert errors == ["tapefit: error: trainer.epochs=0 must be at least 1"]
    assert "Traceback" not in result.stderr
    # refused before training: the run directory (config, log, status and nothing else) goes
    assert not tmp_path.exists()


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_epochs_final_metrics_and_warnings_reach_tapefit_log(tmp_path):
    result = run_cli(
        *QUICK, "trainer.precision=mixed_bfloat16", "trainer.epochs=2", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    log = (tmp_path / "tapefit.log").read_text()
    assert "epoch 1: accuracy=" in log and "epoch 2: accuracy=" in log
    assert "completed: test_accuracy=" in log
    assert "readiness: dtype policy: mixed_bfloat16 (compute bfloat16, variables float32)" in log
    assert "readiness: XLA (train/evaluate/predict): here off" in log
    from tapefit.training.runtime import cpu_has_amx_bfloat16

    if cpu_has_amx_bfloat16() is False:  # tapefit warns about bf16 only on CPUs without AMX
        assert "WARNING" in log and "mixed_bfloat16 on a CPU without AMX" in log


def test_a_refused_command_keeps_a_run_directory_that_holds_anything_else(tmp_path):
    """Only what the refused command itself wrote goes: a directory with the user's own files
    (or a resumed run's) stays, status.json saying failed."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("mine")
    result = run_cli("trainer.epochs=0", f"hydra.run.dir={run_dir}")
    assert result.returncode == 2
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "failed"
