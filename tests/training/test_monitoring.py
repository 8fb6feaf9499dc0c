"""What a person reads while and after a run: the progress bar, curves.png, TensorBoard's
scalars and HParams sessions, the weights the test metrics come from (issue 22)."""

import json
import os
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapeModel
from tapefit.training.callbacks import StepProgbar


def small_model(accumulate: int | None = None) -> TapeModel:
    inputs = keras.Input((4,))
    model = TapeModel(inputs, keras.layers.Dense(1)(inputs))
    optimizer = keras.optimizers.SGD(gradient_accumulation_steps=accumulate)
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=8)
    return model


def recording(progbar_class: type) -> keras.callbacks.ProgbarLogger:
    """`progbar_class` noting every count it shows (`seen`, out of `target`): what the bar
    prints, without the bar's time-based throttling of what reaches the terminal."""

    class Recording(progbar_class):
        def __init__(self):
            super().__init__()
            self.shown: list[tuple[int, int | None]] = []

        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            self.shown.append((self.seen, self.target))

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)
            self.shown.append((self.progbar._seen_so_far, self.progbar.target))

    return Recording()


def thirty_nine_batches(known_length: bool) -> tf.data.Dataset:
    x, y = np.ones((39, 4), "float32"), np.ones((39, 1), "float32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(1)
    return data if known_length else data.filter(lambda *_: True)  # a stream: length unknown


@pytest.mark.parametrize(
    ("known_length", "accumulate"),
    [(True, None), (False, None), (False, 4)],
    ids=["sized", "stream", "stream-accumulating"],
)
def test_the_progress_bar_ends_at_n_of_n_when_steps_per_execution_does_not_divide_the_epoch(
    known_length, accumulate
):
    progbar = recording(StepProgbar)
    model = small_model(accumulate)
    model.fit(thirty_nine_batches(known_length), epochs=3, verbose=1, callbacks=[progbar])
    shown = progbar.shown
    assert [seen for seen, _ in shown] == [8, 16, 24, 32, 39, 39] * 3
    # a stream's length is known once its first epoch has run out: 39, not 40
    assert [target for _, target in shown[6:]] == [39] * 12


def test_keras_own_progress_bar_counts_past_the_end_there():
    """The control: Keras' bar on the same model and data shows 40/39 (and a stream's size
    as 40), so the test above would see it if StepProgbar were not taken."""
    for known_length in (True, False):
        progbar = recording(keras.callbacks.ProgbarLogger)
        small_model().fit(
            thirty_nine_batches(known_length), epochs=2, verbose=1, callbacks=[progbar]
        )
        assert (40, 39 if known_length else 40) in progbar.shown


SELECTION = [
    "model.architecture=mlp",
    "objective=val_loss",
    "optimizer.learning_rate=0.05",  # too high on purpose: val_loss is best early, then rises
    "trainer.epochs=6",
    "trainer.verbose=0",
    "data.train_limit=320",
]


class StopAt(keras.callbacks.Callback):
    """SIGINT to this process at the end of epoch `epoch` (1-based): the run checkpoints and
    stops, as a preempted run does."""

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epoch:
            os.kill(os.getpid(), signal.SIGINT)


# Each fixture below trains for its tests once: they run on one xdist worker together, and the
# session scope keeps the runs when the worker runs another module's tests in between.
SELECTED_RUNS = pytest.mark.xdist_group("monitoring_selected_runs")
TENSORBOARD_RUN = pytest.mark.xdist_group("monitoring_tensorboard_run")
FINISHED_SEARCH = pytest.mark.xdist_group("monitoring_finished_search")


@pytest.fixture(scope="session")
def selected_runs(tmp_path_factory):
    """The same run tested with the best epoch's weights (default), with the last epoch's,
    and stopped after epoch 4 then resumed (default)."""
    from tapefit.runner.composition import compose
    from tapefit.runner.train import run
    from tapefit.training.lifecycle import RunInterrupted

    runs = {}
    for name, extra in (("best", []), ("last", ["trainer.test_weights=last"])):
        runs[name] = tmp_path_factory.mktemp(name)
        run(compose([*SELECTION, *extra]), runs[name])
    runs["resumed"] = tmp_path_factory.mktemp("resumed")
    with pytest.raises(RunInterrupted):
        run(compose(SELECTION), runs["resumed"], callbacks=[StopAt(4)])
    run(compose([*SELECTION, "resume=true"]), runs["resumed"])
    # killed after the last epoch's checkpoint (while testing): the resume fits nothing
    runs["resumed_at_end"] = tmp_path_factory.mktemp("resumed_at_end")
    with pytest.raises(RuntimeError, match="killed while testing"):
        run(compose(SELECTION), runs["resumed_at_end"], callbacks=[FailAtTrainEnd()])
    run(compose([*SELECTION, "resume=true"]), runs["resumed_at_end"])
    # EarlyStopping restores the weights of its own monitor's best epoch at the end
    stopping = [
        "callbacks.early_stopping.enabled=true",
        "callbacks.early_stopping.monitor=val_accuracy",
        "callbacks.early_stopping.patience=10",
        "callbacks.early_stopping.restore_best_weights=true",
    ]
    for name, extra in (("stopping_best", []), ("stopping_last", ["trainer.test_weights=last"])):
        runs[name] = tmp_path_factory.mktemp(name)
        run(compose([*SELECTION, *stopping, *extra]), runs[name])
    return runs


class FailAtTrainEnd(keras.callbacks.Callback):
    """Fail once training has ended and every epoch is checkpointed."""

    def on_train_end(self, logs=None):
        raise RuntimeError("killed while testing")


def read(run_dir, name):
    return json.loads((run_dir / name).read_text())


@SELECTED_RUNS
def test_the_tested_and_saved_model_is_the_one_the_objective_selects(selected_runs):
    from tapefit.runner.composition import compose
    from tapefit.runner.train import build_data

    best, last = (
        read(selected_runs["best"], "metrics.json"),
        read(selected_runs["last"], "metrics.json"),
    )
    history = read(selected_runs["best"], "history.json")
    assert history == read(selected_runs["last"], "history.json")  # the same training
    epoch = best["objective_epoch"]
    assert epoch < best["epochs_run"] == 6, "the setup must make an earlier epoch the best"
    assert (best["tested_weights"], best["tested_epoch"]) == ("best", epoch)
    assert (last["tested_weights"], last["tested_epoch"]) == ("last", 6)
    assert best["test_loss"] != last["test_loss"]
    # model.keras holds that epoch's weights: on the validation split it gives that epoch's
    # val_loss, and the last-weights run's model gives the last epoch's
    data = build_data(compose(SELECTION))
    for run_dir, index in ((selected_runs["best"], epoch - 1), (selected_runs["last"], 5)):
        model = keras.models.load_model(run_dir / "model.keras")
        val_loss = model.evaluate(data.val, verbose=0, return_dict=True)["loss"]
        assert val_loss == pytest.approx(history["val_loss"][index], rel=1e-5)


@SELECTED_RUNS
@pytest.mark.parametrize(
    ("name", "weights", "index"),
    [("stopping_best", "best", None), ("stopping_last", "last", 5)],
)
def test_early_stopping_restoring_its_own_best_does_not_change_the_tested_model(
    selected_runs, name, weights, index
):
    from tapefit.runner.composition import compose
    from tapefit.runner.train import build_data

    metrics = read(selected_runs[name], "metrics.json")
    history = read(selected_runs[name], "history.json")
    accuracy_best = int(np.argmax(history["val_accuracy"]))
    index = metrics["objective_epoch"] - 1 if index is None else index
    assert accuracy_best != index, "EarlyStopping's best epoch must differ from the tested one"
    assert (metrics["tested_weights"], metrics["tested_epoch"]) == (weights, index + 1)
    model = keras.models.load_model(selected_runs[name] / "model.keras")
    val_loss = model.evaluate(build_data(compose(SELECTION)).val, verbose=0, return_dict=True)
    assert val_loss["loss"] == pytest.approx(history["val_loss"][index], rel=1e-5)


@SELECTED_RUNS
@pytest.mark.parametrize("resumed", ["resumed", "resumed_at_end"])
def test_a_resumed_run_still_selects_the_best_epoch_from_before_the_stop(selected_runs, resumed):
    best, resumed = selected_runs["best"], selected_runs[resumed]
    assert read(best, "metrics.json")["objective_epoch"] <= 4, (
        "the best epoch must precede the stop"
    )
    for key in ("tested_epoch", "tested_weights", "test_loss", "test_accuracy"):
        assert read(resumed, "metrics.json")[key] == read(best, "metrics.json")[key]
    expected = keras.models.load_model(best / "model.keras").get_weights()
    for actual, wanted in zip(
        keras.models.load_model(resumed / "model.keras").get_weights(), expected, strict=True
    ):
        np.testing.assert_array_equal(actual, wanted)


def test_curves_draw_every_metric_with_its_validation_twin_from_epoch_0_and_mark_the_best():
    from tapefit.training.outputs import curves_figure

    history = {  # a Siamese run's History: val_spearman has no training counterpart
        "loss": [0.9, 0.7, 0.6, 0.55],
        "val_loss": [0.8, 0.7, 0.72, 0.75],
        "val_spearman": [0.2, 0.5, 0.6, 0.58],
        "val_pearson": [0.1, 0.4, 0.5, 0.5],
        "learning_rate": [0.001] * 4,  # never changed: not worth a panel
    }
    figure = curves_figure(history, "val_spearman", best_epoch=3, tested_epoch=3)
    panels = {axis.get_title(): axis for axis in figure.axes if axis.get_visible()}
    assert set(panels) == {"loss", "spearman", "pearson"}
    lines = {
        (title, line.get_label()): line for title, axis in panels.items() for line in axis.lines
    }
    np.testing.assert_array_equal(lines["loss", "train"].get_xdata(), [0, 1, 2, 3])
    np.testing.assert_array_equal(lines["loss", "validation"].get_ydata(), history["val_loss"])
    np.testing.assert_array_equal(
        lines["spearman", "validation"].get_ydata(), [0.2, 0.5, 0.6, 0.58]
    )
    star = lines["spearman", "best val_spearman (objective_epoch 3)"]
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([2], [0.6])
    for title in panels:  # the tested epoch marked on every panel, integer ticks
        tested = lines[title, "tested weights (tested_epoch 3)"]
        assert list(tested.get_xdata()) == [2, 2]
    for axis in panels.values():
        assert all(float(tick).is_integer() for tick in axis.get_xticks())


def test_a_changing_learning_rate_gets_its_panel():
    from tapefit.training.outputs import curve_panels

    panels = curve_panels({"loss": [1.0, 0.5], "learning_rate": [0.1, 0.05]})
    assert panels == [("loss", ["loss"]), ("learning_rate", ["learning_rate"])]


def layer_configs(model: keras.Model) -> str:
    """Every layer's config inside `model`: what the model is made of, minus its own config
    (which echoes every constructor argument, used or not)."""

    def unnamed(node):  # Keras numbers layer names per process: dense_3, dense_4, ...
        if isinstance(node, dict):
            return {k: unnamed(v) for k, v in node.items() if k != "name"}
        return [unnamed(v) for v in node] if isinstance(node, list) else node

    layers = [keras.saving.serialize_keras_object(layer) for layer in model._flatten_layers(False)]
    return json.dumps(unnamed(layers), sort_keys=True, default=str)


@pytest.mark.parametrize("experiment", ["classifier", "siamese"])
def test_every_shipped_search_entry_changes_the_model_wherever_it_is_active(compose, experiment):
    """A searched model key must change the model in every trial it is active in: the MLP has
    no dropout layer, so `model.dropout` is searched only `when` the architecture is `cnn`."""
    from tapefit.runner.model_node import build_model_from_config
    from tapefit.runner.train import build_data
    from tapefit.sweeps.search_space import active_values, apply_values, declare

    cfg = compose([f"experiment={experiment}", "tune=random"])
    space = cfg.tune.space
    data = build_data(cfg)
    hp = declare(space)
    parents = [name for name, entry in space.items() if entry.type in ("choice", "bool")]
    checked = 0
    for name, entry in space.items():
        if not name.startswith("model."):
            continue
        extremes = {
            "float": (entry.min, entry.max),
            "int": (entry.min, entry.max),
            "choice": (entry["values"][0], entry["values"][-1]) if entry["values"] else (),
            "bool": (False, True),
        }[entry.type.value]
        for parent in [p for p in parents if p != name] or [None]:
            # every value of every choice the entry could meet
            choices = [None] if parent is None else hp_choices(space[parent])
            for choice in choices:
                setting = {} if parent is None else {parent: choice}
                hp.values.update(setting, **{name: extremes[0]})
                if name not in active_values(hp, space):
                    continue
                low, high = (apply_values(cfg, {**setting, name: value}) for value in extremes)
                assert layer_configs(build_model_from_config(low, data)) != layer_configs(
                    build_model_from_config(high, data)
                ), f"{name} has no effect when {parent}={choice}"
                checked += 1
    assert checked >= len([name for name in space if name.startswith("model.")])


def hp_choices(entry) -> list:
    return list(entry["values"]) if entry.type.value == "choice" else [False, True]


def scalar_points(log_dir):
    """tag -> [(step, value)] of every scalar in `log_dir`'s event files."""
    points = {}
    for events in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                tensor = value.tensor
                if (
                    value.HasField("tensor")
                    and tensor.dtype in (1, 2)
                    and not tensor.tensor_shape.dim
                ):
                    number = float(tf.make_ndarray(value.tensor))
                    points.setdefault(value.tag, []).append((event.step, number))
    return points


@pytest.fixture(scope="session")
def tensorboard_run(tmp_path_factory):
    """A run with every TensorBoard option of the config on, 8 steps per execution."""
    from tapefit.runner.composition import compose
    from tapefit.runner.train import run

    run_dir = tmp_path_factory.mktemp("tensorboard")
    options = [
        "model.architecture=mlp",
        "trainer.epochs=2",
        "trainer.verbose=0",
        "data.train_limit=320",  # 10 steps an epoch
        "trainer.steps_per_execution=4",
        "callbacks.tensorboard.update_freq=batch",
        "callbacks.tensorboard.write_graph=true",
        "callbacks.tensorboard.histogram_freq=1",
        "callbacks.tensorboard.profile_batch=2",
        "callbacks.step_telemetry.every_n_steps=4",
    ]
    run(compose(options), run_dir)
    return run_dir / "tensorboard"


@TENSORBOARD_RUN
def test_batch_scalars_share_the_optimizer_step_axis_with_step_telemetry(tensorboard_run):
    points = scalar_points(tensorboard_run / "train")
    batch_steps = [step for step, _ in points["batch_loss"]]
    # Keras calls back after steps 4, 8, 10 of each epoch (10 steps, 4 per execution)
    assert batch_steps == [4, 8, 10, 14, 18, 20]
    assert {step for step, _ in points["step/gradient_norm"]} <= set(batch_steps)
    validation = scalar_points(tensorboard_run / "validation")
    assert [step for step, _ in validation["evaluation_loss_vs_iterations"]] == [10, 20]


@TENSORBOARD_RUN
def test_write_graph_writes_the_traced_training_step(tensorboard_run):
    """What TensorBoard's Graphs tab reads: a run-metadata graph summary of the step."""
    graphs = [
        value
        for events in (tensorboard_run / "train").glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(events))
        for value in event.summary.value
        if value.metadata.plugin_data.plugin_name == "graph_run_metadata_graph"
    ]
    # the profiled execution (profile_batch=2) exports its own graph, as Keras names it
    assert [value.tag for value in graphs] == ["train_step", "batch_2"]
    assert b"one_step_on_data" in graphs[0].tensor.string_val[0]


@TENSORBOARD_RUN
def test_histograms_and_the_profile_are_written(tensorboard_run):
    tags = set()
    for events in (tensorboard_run / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            tags.update(value.tag for value in event.summary.value)
    assert any(tag.endswith("/histogram") for tag in tags), sorted(tags)
    assert list((tensorboard_run / "train" / "plugins" / "profile").glob("*/*.xplane.pb"))


class FailAt(keras.callbacks.Callback):
    """Raise at the end of epoch 1: a run that fails after writing some curves."""

    def on_epoch_end(self, epoch, logs=None):
        raise RuntimeError("the data went away")


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory):
    """Two ordinary runs in one folder, as `tensorboard --logdir outputs` sees them: one
    completed with learning rate 0.003, one failed in its first epoch with 0.01."""
    from tapefit.runner.composition import compose
    from tapefit.runner.train import run

    outputs = tmp_path_factory.mktemp("outputs")
    base = ["model.architecture=mlp", "trainer.epochs=2", "trainer.verbose=0"]
    base.append("data.train_limit=320")
    run(compose([*base, "optimizer.learning_rate=0.003"]), outputs / "good")
    with pytest.raises(RuntimeError, match="the data went away"):
        run(compose([*base, "optimizer.learning_rate=0.01"]), outputs / "bad", [FailAt()])
    return outputs


def test_ordinary_runs_are_hparams_sessions_read_back_from_a_tensorboard_server(two_runs):
    from tests.helpers import TensorBoardServer

    with TensorBoardServer(two_runs) as server:
        experiment, groups = server.hparams_sessions(expected=2)
    names = {info["name"] for info in experiment["hparamInfos"]}
    assert {"optimizer.learning_rate", "model.architecture", "data.batch_size", "seed"} <= names
    assert not names & {"resume", "trainer.verbose"}
    metrics = {(m["name"]["group"], m["name"]["tag"]) for m in experiment["metricInfos"]}
    assert {("validation", "epoch_loss"), ("train", "epoch_accuracy")} <= metrics
    sessions = {group["sessions"][0]["name"].split("/")[0]: group for group in groups}
    assert set(sessions) == {"good", "bad"}
    good, bad = sessions["good"], sessions["bad"]
    assert good["hparams"]["optimizer.learning_rate"] == pytest.approx(0.003)
    assert bad["hparams"]["optimizer.learning_rate"] == pytest.approx(0.01)
    assert good["sessions"][0]["status"] == "STATUS_SUCCESS"
    assert bad["sessions"][0]["status"] == "STATUS_FAILURE"
    # the session's metrics are the run's own curves: the last epoch's values
    history = json.loads((two_runs / "good" / "history.json").read_text())
    served = {(m["name"]["group"], m["name"]["tag"]): m["value"] for m in good["metricValues"]}
    assert served["validation", "epoch_loss"] == pytest.approx(history["val_loss"][-1], rel=1e-6)
    assert served["train", "epoch_accuracy"] == pytest.approx(history["accuracy"][-1], rel=1e-6)
    # and what was selected and tested, as metrics.json reports it
    metrics = json.loads((two_runs / "good" / "metrics.json").read_text())
    assert served["", "run/val_accuracy"] == pytest.approx(metrics["objective_value"], rel=1e-6)
    assert served["", "run/test_accuracy"] == pytest.approx(metrics["test_accuracy"], rel=1e-6)


@pytest.fixture(scope="session")
def finished_search(tmp_path_factory):
    """A grid search over a conditional space (bn_momentum only for the CNN), two executions
    a trial, two of its four trials failing (a learning rate that diverges)."""
    from tapefit.config.schemas import SpaceEntry
    from tapefit.runner.composition import compose
    from tapefit.sweeps.tuning import search

    search_dir = tmp_path_factory.mktemp("search")
    cfg = compose(
        [
            "tune=grid",
            "tune.executions_per_trial=2",
            "tune.max_consecutive_failures=4",
            "trainer.epochs=2",
            "trainer.verbose=0",
            "data.train_limit=320",
        ]
    )
    cfg.tune.space = {
        "model.architecture": SpaceEntry(type="choice", values=["mlp", "cnn"]),
        "model.bn_momentum": SpaceEntry(
            type="choice", values=[0.5, 0.8], when={"model.architecture": ["cnn"]}
        ),
        "optimizer.learning_rate": SpaceEntry(type="choice", values=[0.003, 1e9]),
        "data.batch_size": SpaceEntry(type="int", min=16, max=64, step=16),
    }
    cfg.tune.max_trials = 6
    search(cfg, search_dir)
    return search_dir


@FINISHED_SEARCH
def test_every_trial_of_a_search_is_an_hparams_session_read_back_from_tensorboard(
    finished_search,
):
    from tests.helpers import TensorBoardServer

    records = {
        trial.name: json.loads((trial / "execution-0" / "trial.json").read_text())
        for trial in (finished_search / "trials").iterdir()
    }
    with TensorBoardServer(finished_search) as server:
        experiment, groups = server.hparams_sessions(expected=len(records))
    # typed columns with their domains; the inactive bn_momentum's placeholder (the config's
    # 0.9) is in its domain
    infos = {info["name"]: info for info in experiment["hparamInfos"]}
    assert sorted(infos["model.architecture"]["domainDiscrete"]) == ["cnn", "mlp"]
    assert infos["model.architecture"]["type"] == "DATA_TYPE_STRING"
    assert sorted(infos["model.bn_momentum"]["domainDiscrete"]) == [0.5, 0.8, 0.9]
    assert infos["data.batch_size"]["domainInterval"] == {"minValue": 16, "maxValue": 64}
    assert infos["data.batch_size"]["type"] == "DATA_TYPE_FLOAT64"
    # every trial, failed ones and MLP ones (no bn_momentum) included, is one session
    # with a value for every column, so parallel coordinates draw it
    assert len(groups) == len(records) >= 4
    assert any("model.bn_momentum" not in r["values"] for r in records.values())  # inactive
    assert {r["status"] for r in records.values()} == {"completed", "failed"}
    sessions = {group["sessions"][0]["name"]: group for group in groups}
    assert set(sessions) == {f"trials/{trial}" for trial in records}
    for trial, record in records.items():
        group = sessions[f"trials/{trial}"]
        assert set(group["hparams"]) == set(infos)
        values = record["values"]
        assert group["hparams"]["model.architecture"] == values["model.architecture"]
        expected_momentum = values.get("model.bn_momentum", 0.9)
        assert group["hparams"]["model.bn_momentum"] == pytest.approx(expected_momentum)
        status = group["sessions"][0]["status"]
        assert status == ("STATUS_SUCCESS" if record["status"] == "completed" else "STATUS_FAILURE")
        served = {
            (m["name"].get("group", ""), m["name"]["tag"]): m["value"]
            for m in group["metricValues"]
        }
        if record["status"] != "completed":
            assert ("", "trial/val_accuracy") not in served
            continue
        # the trial's objective is the mean over its executions
        second = json.loads(
            (finished_search / "trials" / trial / "execution-1" / "trial.json").read_text()
        )
        mean = (record["objective_value"] + second["objective_value"]) / 2
        assert served["", "trial/val_accuracy"] == pytest.approx(mean, rel=1e-6)
        # and its curves are its own run's (execution 0): the last epoch's values
        history = json.loads(
            (finished_search / "trials" / trial / "execution-0" / "history.json").read_text()
        )
        group_path = "execution-0/tensorboard/validation"
        assert served[group_path, "epoch_accuracy"] == pytest.approx(history["val_accuracy"][-1])
    # best/ is a copy without TensorBoard files: no trial's curves are shown twice
    assert not list((finished_search / "best").rglob("events.out.tfevents.*"))


@FINISHED_SEARCH
def test_a_failed_trial_session_carries_its_error(finished_search):
    failed = [
        trial
        for trial in (finished_search / "trials").iterdir()
        if json.loads((trial / "execution-0" / "trial.json").read_text())["status"] == "failed"
    ]
    assert failed
    for trial in failed:
        texts = [
            value.tensor.string_val[0].decode()
            for events in trial.glob("events.out.tfevents.*")
            for event in tf.compat.v1.train.summary_iterator(str(events))
            for value in event.summary.value
            if value.tag.startswith("error")
        ]
        assert texts and "NaN/inf" in texts[0]


def test_hparam_domains_are_typed():
    from omegaconf import OmegaConf

    from tapefit.sweeps.records import hparam_domain

    def entry(**fields):
        return OmegaConf.create(
            {"type": "choice", "min": None, "max": None, "values": None} | fields
        )

    assert hparam_domain(entry(type="bool")).dtype is bool
    assert hparam_domain(entry(values=[32, 64])).values == [32, 64]
    assert hparam_domain(entry(values=[32, 64])).dtype is int
    assert hparam_domain(entry(values=[0.5, 1])).values == [0.5, 1.0]
    assert hparam_domain(entry(type="int", min=1, max=4)).max_value == 4
    assert hparam_domain(entry(type="float", min=0.1, max=0.5), placeholder=0.0).min_value == 0.0
    assert hparam_domain(entry(values=["a", "b"]), placeholder="c").values == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("val_accuracy", "max"),
        ("val_sparse_categorical_accuracy", "max"),
        ("val_f1_score", "max"),
        ("val_precision", "max"),
        ("val_mean_io_u", "max"),
        ("val_spearman", "max"),
        ("test_auc", "max"),
        ("val_loss", "min"),
        ("val_mean_absolute_error", "min"),
        ("val_mse", "min"),
        ("val_cosine_similarity", "max"),
        ("val_pearson_correlation", "max"),
        ("val_r2_score", "max"),
        ("val_root_mean_squared_error", "min"),
        ("val_kl_divergence", "min"),
        ("val_false_positives", "min"),
        ("val_true_positives", "max"),
        ("val_categorical_crossentropy_1", "min"),
    ],
)
def test_the_objective_direction_of_keras_and_tapefit_metrics_is_known(name, mode):
    """The direction decides which epoch's weights are tested and saved."""
    from tapefit.training.direction import resolve_direction

    assert resolve_direction(name, "auto", "objective_direction") == mode


@pytest.mark.parametrize("name", ["val_agreement", "val_mean", "val_accuracy_loss"])
def test_an_unknown_direction_is_refused_in_one_line_naming_the_key(name):
    from tapefit.errors import TapefitError
    from tapefit.training.direction import resolve_direction

    expected = f"cannot tell whether {name} is better higher or lower: set objective_direction=max"
    with pytest.raises(TapefitError, match=expected):
        resolve_direction(name, "auto", "objective_direction")
    assert resolve_direction(name, "max", "objective_direction") == "max"


@TENSORBOARD_RUN
def test_a_traced_run_leaves_no_graph_collection_on(tensorboard_run):
    """`write_graph` and `profile_batch` trace with `tf.summary.trace_on(graph=True)`, whose
    export leaves graph collection on: every later function call kept its graph (5 MB a sweep
    trial, measured). The run turns it off."""
    from tensorflow.python.eager import context

    context.context().export_run_metadata()  # drops what was collected so far

    @tf.function
    def double(x):
        return 2 * x

    double(tf.constant(1.0))
    metadata = context.context().export_run_metadata()
    assert metadata is None or not metadata.function_graphs
