"""Training recipes from config: learning-rate schedules, weight EMA and validation every N
steps, each through `tapefit.run` on the digits, and together across a SIGTERM and a resume.
The schedules' own values are tested in tests/training/test_schedules.py, the EMA swaps on their
own in tests/callbacks/test_averaging.py."""

import csv
import dataclasses
import gc
import itertools
import json
import math

import keras
import numpy as np
import pytest

import tapefit
from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.errors import TapefitError
from tapefit.runner.data_from_config import load_data
from tapefit.runner.validation import check_config
from tests.helpers import built_once_per_session, scalar_tags

# Tests that train whole runs (several, or over the CLI): `make test-fast` leaves them out and
# keeps this module's formula and config checks.
WHOLE_RUNS = pytest.mark.slow

STEPS = 10  # optimizer steps per epoch: 320 digits in batches of 32
QUICK = [
    # the MLP: the recipes act on the optimizer, the schedule and the loop, not on the model,
    # and it starts in half the CNN's time (tests that name the CNN ask for it)
    "model.architecture=mlp",
    "data.train_limit=320",
    "trainer.verbose=0",
    "trainer.steps_per_execution=1",
    "trainer.deterministic=true",
    "callbacks.step_telemetry.every_n_steps=1",
]


def run(run_dir, *overrides, callbacks=()):
    gc.collect()
    keras.utils.set_random_seed(1234)
    return tapefit.run(tapefit.compose([*QUICK, *overrides]), run_dir, list(callbacks))


def steps_csv(run_dir):
    with open(run_dir / "steps.csv") as handle:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]


# -- recipe settings, checked before training (the schedules' values: test_schedules.py) ---------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["scheduler=cosine", "scheduler.warmup_fraction=1.5"], "warmup_fraction=1.5 must be in"),
        (["scheduler=cosine", "scheduler.min_lr=0.5"], "scheduler.min_lr=0.5 must be in"),
        (["scheduler=cosine", "scheduler.warmup_steps=500"], "leaves no step to decay over"),
        (["scheduler=piecewise", "scheduler.milestones=[0.8,0.3]"], "must be increasing"),
        (["scheduler=exponential", "scheduler.decay_rate=2"], "decay_rate=2 must be in (0, 1]"),
        (["scheduler=cosine", "+scheduler.warmup=3"], "takes no argument 'warmup'"),
        (
            ["scheduler=cosine", "callbacks.reduce_lr_on_plateau.enabled=true"],
            "and ReduceLROnPlateau both set the learning rate",
        ),
        (["trainer.val_check_interval=0"], "trainer.val_check_interval=0 must be"),
    ],
)
def test_bad_recipe_settings_are_one_line_before_training(tmp_path, overrides, message):
    with pytest.raises(TapefitError, match=None) as error:
        run(tmp_path / "bad", *overrides)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert json.loads((tmp_path / "bad" / "status.json").read_text())["state"] == "failed"
    assert not (tmp_path / "bad" / "history.json").exists()


def test_the_schedule_keys_are_checked_with_the_config(compose):
    check_config(compose(["scheduler=linear", "scheduler.warmup_fraction=0.1"]))
    with pytest.raises(TapefitError, match=r"scheduler.min_lrr: .*did you mean scheduler.min_lr"):
        check_config(compose(["scheduler=linear", "+scheduler.min_lrr=0.1"]))


# -- end to end ---------------------------------------------------------------------------


# The whole run of RECIPE (below): the cosine schedule, EMA, validation every 7 steps and early
# stopping together. One run proves the schedule's shape, the validation intervals and (against
# a cut and resumed copy) the bitwise resume; none of them changes what the others assert: the
# learning rate is the schedule's whatever EMA or validation do, validation comes every 7 steps
# whatever the learning rate, and early stopping never stops it (the validation loss falls at
# each of the 5 validations, 2.35 to 2.29), so all 30 steps run.
PEAK, FLOOR = 0.002, 1e-5
RECIPE = [
    "trainer.epochs=3",
    f"optimizer.learning_rate={PEAK}",
    "scheduler=cosine",
    "scheduler.warmup_fraction=0.2",
    f"scheduler.min_lr={FLOOR}",
    "optimizer.use_ema=true",
    "trainer.val_check_interval=7",
    "callbacks.early_stopping.enabled=true",
    "callbacks.early_stopping.patience=2",
]


@pytest.fixture(scope="session")
@built_once_per_session
def recipe_run(tmp_path_factory):
    """RECIPE trained once a session, uninterrupted: (run directory, the run's results)."""
    run_dir = tmp_path_factory.mktemp("recipe") / "whole"
    return run_dir, run(run_dir, *RECIPE)


@WHOLE_RUNS
def test_cosine_warmup_rises_for_a_fifth_of_the_run_then_falls_to_min_lr(recipe_run):
    peak, floor = PEAK, FLOOR
    run_dir, _ = recipe_run
    rows = steps_csv(run_dir)
    assert [r["step"] for r in rows] == list(range(1, 3 * STEPS + 1))
    rates = [r["learning_rate"] for r in rows]
    warm = round(0.2 * 3 * STEPS)
    assert all(a < b for a, b in itertools.pairwise(rates[: warm + 1]))
    assert rates[warm] == pytest.approx(peak, rel=1e-6)  # the step after the warmup: the peak
    assert all(a > b for a, b in itertools.pairwise(rates[warm:]))
    assert rates[-1] == pytest.approx(floor, rel=1e-5)  # the last step's update used min_lr
    board = scalar_tags(run_dir / "tensorboard" / "train")
    np.testing.assert_allclose(board["step/learning_rate"], rates, rtol=1e-6)
    reloaded = keras.models.load_model(run_dir / "model.keras")  # the schedule deserialises
    assert isinstance(reloaded.optimizer.learning_rate, keras.Variable) or float(
        reloaded.optimizer.learning_rate
    ) == pytest.approx(floor, rel=1e-4)


class RawWeights(keras.callbacks.Callback):
    """The model's raw (not averaged) weights after the last training step."""

    def on_train_batch_end(self, batch, logs=None):
        self.weights = [np.array(w) for w in self.model.get_weights()]


@WHOLE_RUNS
def test_ema_weights_are_validated_tested_and_saved(tmp_path):
    run_dir = tmp_path / "ema"
    raw = RawWeights()
    results = run(
        run_dir,
        "trainer.epochs=2",
        "optimizer.ema=true",
        "optimizer.ema_momentum=0.9",
        "trainer.test_weights=last",
        callbacks=[raw],
    )
    model = keras.models.load_model(run_dir / "model.keras")
    saved = model.get_weights()
    assert any(not np.array_equal(a, b) for a, b in zip(saved, raw.weights, strict=True))
    data = tapefit.runner.train.build_data(tapefit.compose([*QUICK]))
    evaluated = model.evaluate(data.test, return_dict=True, verbose=0)
    for name, value in evaluated.items():
        assert value == pytest.approx(results[f"test_{name}"], rel=1e-6, abs=1e-7)
    # validation saw the averages too: the last epoch's val_loss is the saved model's
    history = json.loads((run_dir / "history.json").read_text())
    val = model.evaluate(data.val, return_dict=True, verbose=0)
    assert history["val_loss"][-1] == pytest.approx(val["loss"], rel=1e-5)


@WHOLE_RUNS
def test_validation_every_ten_steps_in_history_and_tensorboard(recipe_run):
    run_dir, results = recipe_run  # trainer.epochs=3, trainer.val_check_interval=7
    history = json.loads((run_dir / "history.json").read_text())
    intervals = math.ceil(3 * STEPS / 7)  # 7, 14, 21, 28, then the last 2 steps
    assert len(history["val_loss"]) == results["epochs_run"] == intervals
    board = scalar_tags(run_dir / "tensorboard" / "validation")
    assert len(board["epoch_loss"]) == intervals
    np.testing.assert_allclose(board["epoch_loss"], history["val_loss"], rtol=1e-6)
    steps = steps_by_tag(run_dir / "tensorboard" / "validation", "epoch_loss")
    assert steps == [7, 14, 21, 28, 30]
    log = (run_dir / "tapefit.log").read_text() if (run_dir / "tapefit.log").exists() else ""
    assert "ran out of data" not in log


def steps_by_tag(log_dir, tag):
    import tensorflow as tf

    steps = []
    for events in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return steps


def test_validation_interval_needs_a_validation_split(tmp_path):
    def without_validation(data, seed):
        return dataclasses.replace(load_data(data, seed), val=None)

    cfg = tapefit.compose([*QUICK, "trainer.val_check_interval=5"])
    with pytest.raises(TapefitError, match="val_check_interval needs a validation split"):
        tapefit.run(cfg, tmp_path / "noval", load_data=without_validation)


class SigtermAt(keras.callbacks.Callback):
    """SIGTERM to this process at the end of optimizer step `step`."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        import signal

        if int(self.model.optimizer.iterations) == self.step:
            signal.raise_signal(signal.SIGTERM)


@WHOLE_RUNS
def test_schedule_ema_and_intervals_resume_after_sigterm_bitwise(tmp_path, recipe_run):
    whole_dir, whole = recipe_run  # the same RECIPE, uninterrupted
    cut = tmp_path / "cut"
    with pytest.raises(RunInterrupted):  # between the validations at steps 7 and 14
        run(cut, *RECIPE, callbacks=[SigtermAt(10)])
    resumed = run(cut, *RECIPE, "resume=true")
    for name in ("history.json",):
        assert json.loads((cut / name).read_text()) == json.loads((whole_dir / name).read_text())
    assert {k: v for k, v in resumed.items() if k.startswith("test_")} == {
        k: v for k, v in whole.items() if k.startswith("test_")
    }
    a = keras.models.load_model(whole_dir / "model.keras")
    b = keras.models.load_model(cut / "model.keras")
    for x, y in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a.optimizer.variables, b.optimizer.variables, strict=True):
        np.testing.assert_array_equal(np.array(x), np.array(y))
    rows_whole, rows_cut = steps_csv(whole_dir), steps_csv(cut)
    assert [r["learning_rate"] for r in rows_cut] == [r["learning_rate"] for r in rows_whole]


# -- debug presets and the learning-rate range test -----------------------------------------


def mnist_file(path):
    """A small file in mnist.npz's format (keras.datasets.mnist's arrays)."""
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (256, 28, 28), dtype=np.uint8),
        "y_train": rng.integers(0, 10, 256, dtype=np.uint8),
        "x_test": rng.integers(0, 256, (64, 28, 28), dtype=np.uint8),
        "y_test": rng.integers(0, 10, 64, dtype=np.uint8),
    }
    np.savez(path, **arrays)
    return path


def check_fast_dev_run(run_dir, results):
    """A fast_dev_run that completed one epoch and kept nothing."""
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "completed" and results["epochs_run"] == 1
    assert not (run_dir / "model.keras").exists()
    assert not (run_dir / "resume").exists() and not (run_dir / "tensorboard").exists()


# experiment=classifier, the default, is the CLI test's run below
@WHOLE_RUNS
@pytest.mark.parametrize("experiment", ["mnist", "siamese"])
def test_fast_dev_run_runs_one_batch_of_every_shipped_experiment(tmp_path, experiment):
    extra = [f"data.path={mnist_file(tmp_path / 'mnist.npz')}"] if experiment == "mnist" else []
    cfg = tapefit.compose([f"experiment={experiment}", "debug=fast_dev_run", *extra])
    check_fast_dev_run(tmp_path / "run", tapefit.run(cfg, tmp_path / "run"))


@WHOLE_RUNS
def test_fast_dev_run_says_so_from_the_cli(tmp_path):
    """The default experiment (classifier) from the command line: the shipped experiments'
    fast_dev_run check for it, and the log says what the run was."""
    from tests.helpers import run_cli

    result = run_cli("debug=fast_dev_run", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-2000:]
    log = (tmp_path / "tapefit.log").read_text()
    assert "debug=fast_dev_run: 1 batch(es) of each split" in log
    check_fast_dev_run(tmp_path, json.loads((tmp_path / "metrics.json").read_text()))
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history["loss"]) == 1


@WHOLE_RUNS
def test_overfit_reports_that_the_digits_cnn_can_learn_four_batches(tmp_path):
    # the loss falls below a tenth of the first epoch's at epoch 6 (0.079 of it) and to 0.039
    # of it at epoch 8 (0.016 at epoch 12): 8 epochs pass with a margin of 2 and 2.6x below
    # the threshold. The CNN at full size: SMALL_CNN does not overfit them (0.45 at epoch 12).
    results = run(
        tmp_path / "overfit", "model.architecture=cnn", "debug=overfit", "trainer.epochs=8"
    )
    verdict = results["overfit"]
    assert verdict["passed"] and verdict["last_loss"] < verdict["threshold"]
    assert verdict["threshold"] == pytest.approx(0.1 * verdict["first_loss"])
    history = json.loads((tmp_path / "overfit" / "history.json").read_text())
    assert verdict["last_loss"] == history["loss"][-1]


@WHOLE_RUNS
def test_overfit_fails_for_a_model_that_cannot_learn(tmp_path):
    results = run(
        tmp_path / "stuck", "debug=overfit", "trainer.epochs=3", "optimizer.learning_rate=1e-9"
    )
    assert results["overfit"]["passed"] is False


@WHOLE_RUNS
def test_numerics_names_the_op_that_first_made_a_nan(tmp_path):
    with pytest.raises(
        TapefitError, match=r"debug=numerics: op \w+ \(node .*\) produced the first NaN"
    ):
        run(tmp_path / "nan", "debug=numerics", "trainer.epochs=2", "optimizer.learning_rate=1e12")
    assert json.loads((tmp_path / "nan" / "status.json").read_text())["state"] == "failed"
    import tensorflow as tf

    assert float(tf.math.log(tf.constant(0.0))) == -math.inf  # check-numerics is off again


@WHOLE_RUNS
def test_profile_writes_a_profiler_trace(tmp_path):
    run(tmp_path / "profile", "debug=profile")
    traces = list((tmp_path / "profile" / "tensorboard").rglob("*.xplane.pb"))
    assert len(traces) == 1


@WHOLE_RUNS
def test_lr_find_suggests_a_rate_near_one_that_trains_the_digits_cnn(tmp_path):
    from tapefit.sweeps.lr_find import find

    summary = find(tapefit.compose(["tune=lr_find"]), tmp_path / "lr")
    # Adam at 1e-3 trains the digits CNN to ~0.95 validation accuracy in 3 epochs
    assert 1e-4 <= summary["suggested_lr"] <= 1e-2
    rows = np.loadtxt(tmp_path / "lr" / "lr_find.csv", delimiter=",", skiprows=1)
    assert len(rows) == summary["steps_run"] and np.all(np.diff(rows[:, 1]) > 0)
    assert (tmp_path / "lr" / "lr_find.png").stat().st_size > 0
    assert summary["override"] == f"optimizer.learning_rate={summary['suggested_lr']:.3g}"
    assert not (tmp_path / "lr" / "model.keras").exists()
    rate = f"optimizer.learning_rate={summary['suggested_lr']}"
    cnn = ["model.architecture=cnn", "data.train_limit=null", "trainer.epochs=3"]
    trained = run(tmp_path / "trained", *cnn, rate)
    assert trained["objective_value"] > 0.9  # validation accuracy


@WHOLE_RUNS
@pytest.mark.parametrize(("interval", "points"), [(7, 3), (10, 2)])
def test_validation_intervals_over_a_stream_of_unknown_length(tmp_path, interval, points):
    """The stream's length is unknown (a filter hides it): the run ends with the stream, after
    a short last interval (7, 7, 6 of 20 steps) or exactly at an interval's end (10, 10)."""

    def streamed(node, seed):
        data = load_data(node, seed)
        return dataclasses.replace(data, train=data.train.filter(lambda *batch: True))

    cfg = tapefit.compose([*QUICK, "trainer.epochs=2", f"trainer.val_check_interval={interval}"])
    results = tapefit.run(cfg, tmp_path / str(interval), load_data=streamed)
    history = json.loads((tmp_path / str(interval) / "history.json").read_text())
    assert len(history["val_loss"]) == results["epochs_run"] == points
    assert all(math.isfinite(v) for v in history["loss"])
    rows = steps_csv(tmp_path / str(interval))
    assert rows[-1]["step"] == 2 * STEPS  # both passes over the stream, not a step more


@WHOLE_RUNS
def test_a_search_over_the_warmup_sees_one_point_per_validation(tmp_path):
    """Schedule keys are searchable, and a trial's objective is read per validation interval."""
    from tapefit.config.schemas import SpaceEntry
    from tapefit.sweeps.tuning import search

    overrides = [
        *QUICK,
        "tune=grid",
        "trainer.epochs=1",  # 2 validations in the one epoch: per validation, not per epoch
        "scheduler=cosine",
        "trainer.val_check_interval=5",
        "callbacks.tensorboard.enabled=false",
    ]
    cfg = tapefit.compose(overrides)
    cfg.tune.space = {
        "scheduler.warmup_fraction": SpaceEntry(type="choice", values=[0.0, 0.3]),
    }
    summary = search(cfg, tmp_path / "search", overrides=overrides)
    with open(tmp_path / "search" / "trials.csv") as handle:
        trials = list(csv.DictReader(handle))
    assert sorted(float(t["scheduler.warmup_fraction"]) for t in trials) == [0.0, 0.3]
    for trial in trials:
        trial_dir = tmp_path / "search" / "trials" / trial["trial_id"]
        history = json.loads((trial_dir / "history.json").read_text())
        assert len(history["val_accuracy"]) == STEPS // 5  # 2 intervals of 5 steps
        first_rate = steps_csv(trial_dir)[0]["learning_rate"]  # the first step's
        if float(trial["scheduler.warmup_fraction"]) > 0:
            assert first_rate == 0.0  # the warmup starts from 0
        else:
            assert first_rate == pytest.approx(1e-3)  # no warmup: the peak at once
    best = max(float(t["objective_value"]) for t in trials)
    assert summary["best_value"] == best
