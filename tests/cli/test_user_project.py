"""A user's own model and loader, in a project outside tapefit, through every entry point of the
real CLI: run, resume after SIGKILL, search, multirun, multi-worker launch, several optimizers,
and one-line errors. The project's files and commands are read from the tutorial page
docs/tutorials/your-own-model.md, so the page and this test cannot drift apart."""

import importlib
import json
import os
import re
import shlex
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from tests.cli.tutorial_project import COMMANDS, FILES
from tests.helpers import (
    FORKED_LAUNCH,
    built_once_per_session,
    run_cli_batch,
    run_in,
    scalar_tags,
)

QUICK = ["trainer.verbose=0", "trainer.deterministic=true", "trainer.epochs=3"]


def add_module(project: Path, name: str, text: str) -> None:
    """Write `my_project/NAME` into the shared project, atomically and only once: tests on the
    other xdist worker may be importing it."""
    path = project / "my_project" / name
    if not path.exists() or path.read_text() != text:
        partial = path.with_name(f".{name}.{os.getpid()}")
        partial.write_text(text)
        partial.replace(path)


def command(index: int) -> list[str]:
    """The tutorial's command `index` as an argument list for this interpreter."""
    words = shlex.split(COMMANDS[index])
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    return [str(Path(sys.executable).parent / words[0]), *words[1:]]


def test_the_readme_gives_six_project_files_and_six_commands():
    expected = {
        "my_project/models.py",
        "my_project/data.py",
        "conf/model/regressor.yaml",
        "conf/data/waves.yaml",
        "conf/experiment/waves.yaml",
        "conf/search_space/waves.yaml",
        "conf/experiment/wgan_gp.yaml",
    }
    assert set(FILES) == expected
    assert len(COMMANDS) == 6 and all("--config-dir conf" in c for c in COMMANDS)


@pytest.fixture(scope="session")
@built_once_per_session
def waves_run(project, tmp_path_factory):
    run_dir = project / "outputs" / "waves" / "uninterrupted"
    result = run_in(project, command(0), *QUICK, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, result


def test_a_run_writes_the_complete_run_directory(waves_run):
    run_dir, result = waves_run
    for name in ("history.json", "history.csv", "metrics.json", "model.keras", "curves.png"):
        assert (run_dir / name).is_file(), name
    assert "run directory" in (run_dir / "tapefit.log").read_text()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    resolved = (run_dir / ".hydra" / "config.yaml").read_text()
    assert "_target_: my_project.models.SmoothRegressor" in resolved
    history = json.loads((run_dir / "history.json").read_text())
    # the model's own tracker (mse) and the configured metric (mae), for training and validation
    assert set(history) == {"loss", "mae", "mse", "val_loss", "val_mae", "val_mse"}
    assert history["val_loss"][-1] < history["val_loss"][0]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["objective"] == "val_loss" and metrics["objective_value"] == min(
        history["val_loss"]
    )
    assert metrics["samples"] == {"train": 691, "val": 77, "test": 256}  # 10 % split off
    assert {"test_loss", "test_mae", "test_mse"} <= set(metrics)
    assert f"test_mse={metrics['test_mse']:.4f}" in result.stdout
    validation = scalar_tags(run_dir / "tensorboard" / "validation")
    np.testing.assert_allclose(validation["epoch_mse"], history["val_mse"], rtol=1e-6)


def test_the_saved_model_reloads_as_the_users_class(waves_run, project, monkeypatch):
    run_dir, _ = waves_run
    monkeypatch.syspath_prepend(str(project))
    from my_project.data import load_waves
    from my_project.models import SmoothRegressor

    model = keras.models.load_model(run_dir / "model.keras")
    assert isinstance(model, SmoothRegressor) and model.penalty == 0.1
    x_test, y_test = load_waves(n_samples=1024, seed=0)["test"]
    mse = float(np.mean((model.predict(x_test, verbose=0) - y_test) ** 2))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert mse == pytest.approx(metrics["test_mse"], rel=1e-5)


def test_groups_named_on_the_command_line_through_the_tapefit_script(project, tmp_path):
    script, *arguments = command(1)
    assert Path(script).name == "tapefit" and Path(script).is_file()  # the console script
    # The script's own lines run by this interpreter, forked from the tests' warm one, not a
    # fresh interpreter importing TensorFlow (about 5 s); tests/test_backend.py::
    # test_another_keras_backend_is_one_line_and_exit_code_2[script] starts it as a program.
    result = run_in(
        project,
        [sys.executable, script, *arguments],
        *("trainer.epochs=1", "trainer.verbose=0", f"hydra.run.dir={tmp_path}"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["epochs_run"] == 1 and metrics["objective"] == "val_loss"


def test_resume_after_sigkill_equals_the_uninterrupted_run(waves_run, project, monkeypatch):
    baseline, _ = waves_run
    monkeypatch.syspath_prepend(str(project))
    importlib.import_module("my_project.models")  # registers SmoothRegressor, to reload it
    words = command(2)
    run_dir = project / "outputs" / "waves" / "first"
    assert f"hydra.run.dir={run_dir.relative_to(project)}" in words
    first = [w for w in words if not w.startswith(("resume=", "hydra.run.dir="))]
    kill = ["+callbacks.extra.kill._target_=my_project.kill.KillAtEpoch"]
    killed = run_in(
        project, first, *QUICK, *kill, f"hydra.run.dir={run_dir}", env={"KILL_AT_EPOCH": "2"}
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "running"
    assert not (run_dir / "metrics.json").exists()
    resumed = run_in(project, words, *QUICK, *kill)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in (run_dir / "tapefit.log").read_text()
    for a, b in zip(
        keras.models.load_model(baseline / "model.keras").get_weights(),
        keras.models.load_model(run_dir / "model.keras").get_weights(),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    history = json.loads((run_dir / "history.json").read_text())
    assert history == json.loads((baseline / "history.json").read_text())


def test_a_search_over_the_users_arguments_and_its_rerun_command(project, tmp_path):
    words = [w if w != "tune.max_trials=4" else "tune.max_trials=2" for w in command(3)]
    result = run_in(project, words, *QUICK[:2], "trainer.epochs=2", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = (tmp_path / "trials.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",completed," in row for row in rows[1:])
    assert "model.units" in rows[0] and "data.noise" in rows[0]
    summary = json.loads((tmp_path / "search.json").read_text())
    rerun = summary["best_command"]
    assert f"--config-dir {project / 'conf'}" in rerun and "++model.units=" in rerun
    words = [sys.executable, *shlex.split(rerun)[1:]]
    again = run_in(project, words, f"hydra.run.dir={tmp_path}/re")
    assert again.returncode == 0, again.stderr[-3000:]
    value = json.loads((tmp_path / "re" / "metrics.json").read_text())["objective_value"]
    assert value == summary["best_value"]


def test_a_hydra_multirun_of_the_users_model(project, tmp_path):
    result = run_in(
        project, command(4), "trainer.epochs=1", "trainer.verbose=0", f"hydra.sweep.dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for job in ("0", "1"):
        assert json.loads((tmp_path / job / "metrics.json").read_text())["epochs_run"] == 1
    rows = (tmp_path / "trials.csv").read_text().splitlines()
    assert len(rows) == 3


def test_two_workers_train_the_users_model(project, tmp_path):
    words = command(5)
    assert words[:3] == [sys.executable, "-m", "tapefit.launch"]
    result = run_in(
        project,
        [sys.executable, str(FORKED_LAUNCH), *words[3:]],  # the launcher, its workers forked
        "trainer.epochs=1",
        "trainer.verbose=0",
        f"hydra.run.dir={tmp_path}",
        timeout=400,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    digests = set(re.findall(r"final weights digest: (\w+)", result.stdout + result.stderr))
    assert len(digests) == 1
    assert (tmp_path / "model.keras").is_file() and (tmp_path / "metrics.json").is_file()


def test_several_optimizers_from_config_train_the_wgan_and_reload(project, tmp_path, monkeypatch):
    result = run_in(
        project,
        [sys.executable, "-m", "tapefit", "--config-dir", "conf"],
        "experiment=wgan_gp",
        "trainer.epochs=2",
        "data.samples=1024",
        "model.n_critic=2",
        "trainer.verbose=0",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    history = json.loads((tmp_path / "history.json").read_text())
    assert set(history) == {"critic_loss", "generator_loss", "gradient_penalty"}
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["objective"] == "critic_loss" and "no test split" in result.stdout
    monkeypatch.syspath_prepend(str(project))
    importlib.import_module("wgan_gp")  # registers WGANGP with Keras, as a user's script would
    model = keras.models.load_model(tmp_path / "model.keras")
    steps = 2 * 1024 // 256
    optimizers = model.optimizers
    assert list(optimizers) == ["critic", "generator"]
    assert int(optimizers["critic"].iterations) == steps * 2  # n_critic critic steps a step
    assert int(optimizers["generator"].iterations) == steps
    assert float(optimizers["critic"].beta_1) == 0.5
    moments = [v for v in optimizers["generator"].variables if "momentum" in v.path]
    assert moments and all(np.abs(np.asarray(v)).sum() > 0 for v in moments)


ERRORS = [
    (
        ["+model.penlty=0.2"],
        "model.penlty: SmoothRegressor takes no argument 'penlty' (did you mean model.penalty?)",
    ),
    (
        ["+data.n_sample=10"],
        "data.n_sample: load_waves takes no argument 'n_sample' (did you mean data.n_samples?)",
    ),
    (
        ["model._target_=my_project.modles.SmoothRegressor"],
        "my_project has no 'modles' (did you mean my_project.models?)",
    ),
    (["model._target_=nowhere.Net"], "no module named 'nowhere'; run from the folder that holds"),
    (
        ["model._target_=keras.layers.Dense", "~model.penalty"],
        "is not a tapefit.TapeModel subclass",
    ),
    (["data._target_=my_project.bad.as_list"], "returned list, not a mapping of splits"),
    (["data._target_=my_project.bad.ragged"], "holds arrays of different lengths [7, 8]"),
    (
        ["model._target_=my_project.bad.NeverBuilt", "~model.penalty", "compile.loss=mse"],
        "layer unused is never built by the step",
    ),
    (["model._target_=my_project.bad.NoLoss", "~model.penalty"], "has no loss: set compile.loss"),
    (["compile.loss=msee"], "compile.loss=msee is not a Keras loss"),
    (
        ["model._target_=my_project.bad.NeedsWidth", "~model.penalty"],
        "model: NeedsWidth needs width: set model.width=...",
    ),
    (["+data.shuffle=maybe"], "data.shuffle: Value 'maybe' is not a valid bool"),
    (
        [
            "+callbacks.extra.plateau._target_=keras.callbacks.ReduceLROnPlateau",
            "+callbacks.extra.plateau.patiense=2",
        ],
        "ReduceLROnPlateau takes no argument 'patiense' (did you mean "
        "callbacks.extra.plateau.patience?)",
    ),
    (
        ["objective=val_accuracy"],
        "objective=val_accuracy is never logged by this run: choose "
        "one of loss, mae, mse, val_loss, val_mae, val_mse",
    ),
]

BAD = """
import keras
import numpy as np
import tensorflow as tf

import tapefit


def as_list(n_samples=8, seed=0):
    return [1, 2, 3]


def ragged(n_samples=8, seed=0):
    return {"train": (np.zeros((8, 1)), np.zeros((7, 1)))}


class NeverBuilt(tapefit.TapeModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.used = keras.layers.Dense(1)
        self.unused = keras.layers.Dense(4, name="unused")

    def call(self, x, training=False):
        return self.used(x)


class NeedsWidth(tapefit.TapeModel):
    def __init__(self, width, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(width)


class NoLoss(tapefit.TapeModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.dense(x)
"""


@pytest.fixture(scope="session")
@built_once_per_session
def bad_configurations(project, tmp_path_factory):
    """Every ERRORS case run as `command(0)` would run it, all in one fresh process (one
    TensorFlow start-up, not fourteen): overrides -> (run directory, result)."""
    add_module(project, "bad.py", BAD)
    words = command(0)
    assert words[1:3] == ["-m", "tapefit"], words  # the batch calls that entry point
    run_dirs = [tmp_path_factory.mktemp("bad_configuration") for _ in ERRORS]
    results = run_cli_batch(
        [
            [*words[3:], "trainer.verbose=0", f"hydra.run.dir={run_dir}", *overrides]
            for run_dir, (overrides, _) in zip(run_dirs, ERRORS, strict=True)
        ],
        cwd=project,
    )
    return {
        tuple(overrides): (run_dir, result)
        for run_dir, result, (overrides, _) in zip(run_dirs, results, ERRORS, strict=True)
    }


# One worker runs the shared batch; the one-line error's exit code 2 from a process of its own
# is tested by tests/runner/test_bad_input.py::
# test_the_cli_prints_one_error_line_without_a_traceback.
@pytest.mark.parametrize(("overrides", "message"), ERRORS, ids=[e[0][0] for e in ERRORS])
def test_bad_user_configuration_is_one_line_before_training(bad_configurations, overrides, message):
    tmp_path, result = bad_configurations[tuple(overrides)]
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not tmp_path.exists()  # refused before training: no run directory is left


NOISY = '''
import keras
import tensorflow as tf

import tapefit


@keras.saving.register_keras_serializable(package="my_project")
class Noisy(tapefit.TapeModel):
    """Input noise in the step, drawn from a SeedGenerator, a tf.random.Generator, or
    tf.random.normal's global seed."""

    def __init__(self, source="keras", **kwargs):
        super().__init__(**kwargs)
        self.source = source
        self.dense = keras.layers.Dense(1)
        self.seed_generator = keras.random.SeedGenerator(3)
        self.generator = tf.random.Generator.from_seed(3)

    def call(self, x, training=False):
        return self.dense(x)

    def forward(self, data, training):
        x, y = data
        if self.source == "keras":
            noise = keras.random.normal(tf.shape(x), stddev=0.3, seed=self.seed_generator)
        elif self.source == "generator":
            noise = self.generator.normal(tf.shape(x), stddev=0.3)
        else:
            noise = tf.random.normal(tf.shape(x), stddev=0.3)
        y_pred = self(x + noise, training=training)
        return tapefit.StepOutput(tf.reduce_mean(tf.square(y - y_pred)), y, y_pred)

    def get_config(self):
        return {**super().get_config(), "source": self.source}
'''


@pytest.mark.parametrize("source", ["keras", "generator"])
def test_random_draws_in_the_step_resume_exactly(project, tmp_path, source):
    add_module(project, "noisy.py", NOISY)
    model = ["model._target_=my_project.noisy.Noisy", "~model.penalty", f"+model.source={source}"]
    kill = ["+callbacks.extra.kill._target_=my_project.kill.KillAtEpoch"]
    settings = [*model, *kill, *QUICK]
    whole = run_in(project, command(0), *settings, f"hydra.run.dir={tmp_path / 'whole'}")
    assert whole.returncode == 0, whole.stderr[-2000:]
    run_dir = f"hydra.run.dir={tmp_path / 'cut'}"
    killed = run_in(project, command(0), *settings, run_dir, env={"KILL_AT_EPOCH": "2"})
    assert killed.returncode == -9
    resumed = run_in(project, command(0), *settings, run_dir, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    history = json.loads((tmp_path / "cut" / "history.json").read_text())
    assert history == json.loads((tmp_path / "whole" / "history.json").read_text())
    assert "global-seeded" not in (tmp_path / "whole" / "tapefit.log").read_text()


def test_global_seeded_random_ops_are_named_at_the_first_checkpoint(project, tmp_path):
    add_module(project, "noisy.py", NOISY)
    result = run_in(
        project,
        command(0),
        "model._target_=my_project.noisy.Noisy",
        "~model.penalty",
        "+model.source=global",
        "trainer.epochs=2",
        "trainer.verbose=0",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    log = (tmp_path / "tapefit.log").read_text()
    warning = [line for line in log.splitlines() if "global-seeded random ops" in line]
    assert len(warning) == 1 and "RandomStandardNormal" in warning[0]
    assert "keras.random.SeedGenerator" in warning[0]


ENCODER_ONLY = '''
import keras
import tensorflow as tf

import tapefit


@keras.saving.register_keras_serializable(package="my_project")
class EncoderOnly(tapefit.TapeModel):
    """A step that uses its layer directly and never calls self(x)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.encoder = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.encoder(x)

    def forward(self, data, training):
        x, y = data
        y_pred = self.encoder(x)
        return tapefit.StepOutput(tf.reduce_mean(tf.square(y - y_pred)), y, y_pred)
'''


def test_a_model_its_step_never_calls_is_built_before_the_first_checkpoint(
    project, tmp_path, monkeypatch
):
    add_module(project, "encoder_only.py", ENCODER_ONLY)
    result = run_in(
        project,
        command(0),
        "model._target_=my_project.encoder_only.EncoderOnly",
        "~model.penalty",
        "trainer.epochs=2",
        "trainer.verbose=0",
        "trainer.checkpoint_every_steps=3",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    monkeypatch.syspath_prepend(str(project))
    from my_project.data import load_waves
    from my_project.encoder_only import EncoderOnly

    model = keras.models.load_model(tmp_path / "model.keras")
    assert isinstance(model, EncoderOnly) and model.built
    x_test, y_test = load_waves(n_samples=1024, seed=0)["test"]
    mse = float(np.mean((model.predict(x_test, verbose=0) - y_test) ** 2))
    assert mse == pytest.approx(json.loads((tmp_path / "metrics.json").read_text())["test_loss"])


def test_evaluate_and_predict_a_users_run_from_the_project(waves_run, project, tmp_path):
    run_dir, _ = waves_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    out = tmp_path / "preds.csv"
    # `python -m tapefit.evaluate run=...`, then `python -m tapefit.predict run=... output=...`,
    # both in one fresh process: one TensorFlow start-up for the two commands.
    evaluated, predicted = run_cli_batch(
        [
            ("tapefit.evaluate", [f"run={run_dir}"]),
            ("tapefit.predict", [f"run={run_dir}", f"output={out}"]),
        ],
        cwd=project,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    again = json.loads((run_dir / "eval" / "metrics.json").read_text())
    assert {k: again[k] for k in ("test_loss", "test_mae", "test_mse")} == {
        k: metrics[k] for k in ("test_loss", "test_mae", "test_mse")
    }
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    rows = out.read_text().splitlines()
    assert rows[0] == "output" and len(rows) == 1 + metrics["samples"]["test"]


def test_training_recipes_and_debug_presets_on_the_users_model(project, tmp_path):
    """The recipes from config reach a user's model as they reach tapefit's: a schedule with
    warmup, weight EMA and validation every 5 steps in one run, then `debug=fast_dev_run`
    and `debug=overfit`, through the real CLI entry point in one process."""
    from tests.helpers import run_cli_batch

    base = command(0)[3:]  # the tutorial's first command, after `python -m tapefit`
    recipe = [
        *base,
        *QUICK,
        "trainer.steps_per_execution=1",
        "callbacks.step_telemetry.every_n_steps=1",
        "scheduler=cosine",
        "scheduler.warmup_fraction=0.2",
        "optimizer.use_ema=true",
        "trainer.val_check_interval=5",
        f"hydra.run.dir={tmp_path / 'recipe'}",
    ]
    fast = [*base, "debug=fast_dev_run", f"hydra.run.dir={tmp_path / 'fast'}"]
    # the preset's 60 epochs cut to 3: the verdict compares the first and last epochs' losses,
    # whatever their number (this noisy regression never passes it, in 60 epochs either)
    overfit = [
        *base,
        "debug=overfit",
        "trainer.epochs=3",
        "trainer.verbose=0",
        f"hydra.run.dir={tmp_path / 'overfit'}",
    ]
    results = run_cli_batch([recipe, fast, overfit], cwd=project)
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    history = json.loads((tmp_path / "recipe" / "history.json").read_text())
    rates = [
        float(line.split(",")[2])
        for line in (tmp_path / "recipe" / "steps.csv").read_text().splitlines()[1:]
    ]
    steps = len(rates)
    assert len(history["val_loss"]) == -(-steps // 5)  # one validation per 5 steps
    warm = round(0.2 * steps)
    assert rates[:warm] == sorted(rates[:warm]) and rates[warm:] == sorted(
        rates[warm:], reverse=True
    )
    assert json.loads((tmp_path / "fast" / "history.json").read_text())["loss"].__len__() == 1
    assert "debug=fast_dev_run" in (tmp_path / "fast" / "tapefit.log").read_text()
    verdict = json.loads((tmp_path / "overfit" / "metrics.json").read_text())["overfit"]
    assert set(verdict) == {"first_loss", "last_loss", "threshold", "passed"}
    overfit_history = json.loads((tmp_path / "overfit" / "history.json").read_text())
    assert len(overfit_history["loss"]) == 3 and verdict["last_loss"] == pytest.approx(
        overfit_history["loss"][-1]
    )
