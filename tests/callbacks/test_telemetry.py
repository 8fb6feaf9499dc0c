"""Step telemetry: gradient norm, learning rate, loss scale and skipped steps every N optimizer
steps, in TensorBoard and steps.csv; read back through a real TensorBoard server."""

import csv
import json
import urllib.parse
import urllib.request

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapeModel
from tapefit.callbacks.telemetry import StepTelemetry
from tapefit.runner.train import run
from tests.helpers import TensorBoardServer, built_once_per_session, scalar_tags


def dense_model():
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(1)(keras.layers.Dense(8, activation="relu")(inputs))
    return TapeModel(inputs, outputs)


def fit_with_telemetry(
    tmp_path, steps_per_execution, every_n_steps, telemetry="norm", learning_rate=0.01
):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(320, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = dense_model()
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate),
        loss="mse",
        steps_per_execution=steps_per_execution,
        gradient_telemetry=telemetry,
    )
    callback = StepTelemetry(tmp_path, every_n_steps=every_n_steps, csv_path=tmp_path / "s.csv")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[callback])
    with (tmp_path / "s.csv").open() as file:
        return model, list(csv.DictReader(file)), x, y


def test_rows_count_optimizer_steps_even_with_steps_per_execution(tmp_path):
    _, rows, _, _ = fit_with_telemetry(tmp_path, steps_per_execution=4, every_n_steps=10)
    steps = [int(row["step"]) for row in rows]
    # Keras calls back after every 4 steps; a row is written at the first call past each 10.
    assert steps == [12, 20, 32, 40]
    assert all(float(row["learning_rate"]) == pytest.approx(0.01) for row in rows)
    # float32, no skipping: no loss-scale or skipped-step column, which could never change
    assert all(set(row) == {"step", "gradient_norm", "learning_rate"} for row in rows)
    written = scalar_tags(tmp_path / "train")
    np.testing.assert_allclose(
        written["step/gradient_norm"], [float(r["gradient_norm"]) for r in rows], rtol=1e-6
    )


def series_descriptions(log_dir):
    """tag -> the description its TensorBoard card shows."""
    found = {}
    for events in log_dir.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                if value.metadata.summary_description:
                    found[value.tag] = value.metadata.summary_description
    return found


def test_loss_scale_and_skips_are_written_when_they_can_change_and_every_series_says_what_it_is(
    tmp_path,
):
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    keras.mixed_precision.set_global_policy("mixed_float16")
    model = dense_model()
    model.compile(optimizer="sgd", loss="mse", gradient_telemetry="norm", on_nonfinite="skip")
    callback = StepTelemetry(tmp_path, every_n_steps=2, csv_path=tmp_path / "s.csv")
    model.fit(x, x.sum(axis=1), batch_size=8, epochs=1, verbose=0, callbacks=[callback])
    with (tmp_path / "s.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert set(rows[0]) == {"step", "gradient_norm", "learning_rate", "loss_scale", "skipped_steps"}
    scales = [float(row["loss_scale"]) for row in rows]  # from 2**15, halved on overflows
    assert all(scale <= 2.0**15 and np.log2(scale).is_integer() for scale in scales)
    assert rows[-1]["skipped_steps"] == "0"
    descriptions = series_descriptions(tmp_path / "train")
    assert set(descriptions) == {f"step/{name}" for name in set(rows[0]) - {"step"}}
    assert (
        "a sample every every_n_steps steps, not a window mean"
        in descriptions["step/gradient_norm"]
    )


def test_the_gradient_norm_is_the_last_batch_gradient_norm(tmp_path):
    # With a learning rate of 0 the weights stay put, so the last batch's gradient can be
    # recomputed by hand at the same weights.
    model, rows, x, y = fit_with_telemetry(tmp_path, 1, every_n_steps=40, learning_rate=0.0)
    assert [int(row["step"]) for row in rows] == [40]
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.mean_squared_error(y[-8:], model(x[-8:])))
    expected = float(tf.linalg.global_norm(tape.gradient(loss, model.trainable_variables)))
    assert float(rows[0]["gradient_norm"]) == pytest.approx(expected, rel=1e-5)


def test_histograms_of_every_gradient_on_request(tmp_path):
    fit_with_telemetry(tmp_path, steps_per_execution=1, every_n_steps=20, telemetry="histograms")
    tags = set()
    for events in (tmp_path / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            tags.update(value.tag for value in event.summary.value)
    assert sum(tag.startswith("gradient/") for tag in tags) == 4  # 2 kernels, 2 biases


@pytest.fixture(scope="session")
@built_once_per_session
def finished_run(tmp_path_factory):
    from tapefit.runner.composition import compose

    run_dir = tmp_path_factory.mktemp("telemetry-run")
    cfg = compose(
        [
            "model.architecture=mlp",
            "trainer.epochs=2",
            "trainer.verbose=0",
            "callbacks.step_telemetry.every_n_steps=16",
        ]
    )
    run(cfg, run_dir)
    return run_dir


def test_a_tensorboard_server_serves_the_step_scalars(finished_run):
    with TensorBoardServer(finished_run / "tensorboard") as server:
        tags = server.wait_for(
            "scalars/tags", lambda reply: "step/gradient_norm" in reply.get("train", {})
        )
        assert {"step/gradient_norm", "step/learning_rate"} <= set(tags["train"])
        assert not {"step/loss_scale", "step/skipped_steps"} & set(tags["train"])
        query = urllib.parse.urlencode({"run": "train", "tag": "step/gradient_norm"})
        served = server.request(f"scalars/scalars?{query}")
    with (finished_run / "steps.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [point[1] for point in served] == [int(row["step"]) for row in rows]
    np.testing.assert_allclose(
        [point[2] for point in served], [float(row["gradient_norm"]) for row in rows], rtol=1e-6
    )
    steps = [int(row["step"]) for row in rows]
    train_samples = json.loads((finished_run / "metrics.json").read_text())["samples"]["train"]
    assert steps == sorted(set(steps)) and len(steps) >= 4
    assert steps[-1] == 2 * -(-train_samples // 32)  # the last row is the last optimizer step


def test_rows_are_on_disk_as_they_are_written(tmp_path):
    """A run killed after a step checkpoint keeps the rows up to that step: each row is on
    disk once written, and the fit's last step has its row at its last epoch's end (before
    an epoch-end checkpoint holds it), not only at the end of training."""
    x = np.random.default_rng(0).normal(size=(80, 4)).astype("float32")
    model = dense_model()
    model.compile(optimizer="sgd", loss="mse", gradient_telemetry="norm")
    seen = {}

    def look(batch, logs=None):
        rows = csv.DictReader((tmp_path / "s.csv").open()) if (tmp_path / "s.csv").exists() else []
        seen[int(model.optimizer.iterations.numpy())] = [int(r["step"]) for r in rows]

    def last(epoch, logs=None):
        seen["epoch_end"] = [int(r["step"]) for r in csv.DictReader((tmp_path / "s.csv").open())]

    telemetry = StepTelemetry(tmp_path, every_n_steps=5, csv_path=tmp_path / "s.csv")
    model.fit(
        x,
        x.sum(axis=1),
        batch_size=8,
        epochs=2,
        verbose=0,
        callbacks=[
            telemetry,
            keras.callbacks.LambdaCallback(on_train_batch_end=look, on_epoch_end=last),
        ],
    )
    assert seen[4] == [] and seen[5] == [5] and seen[12] == [5, 10]
    assert seen["epoch_end"] == [5, 10, 15, 20]
    assert [int(r["step"]) for r in csv.DictReader((tmp_path / "s.csv").open())] == [5, 10, 15, 20]


def test_the_last_step_of_a_fit_gets_a_row_at_its_last_epoch_end(tmp_path):
    x = np.random.default_rng(0).normal(size=(56, 4)).astype("float32")  # 7 steps an epoch
    model = dense_model()
    model.compile(optimizer="sgd", loss="mse", gradient_telemetry="norm")
    telemetry = StepTelemetry(tmp_path, every_n_steps=5, csv_path=tmp_path / "s.csv")
    seen = {}

    def look(epoch, logs=None):
        seen[epoch] = [int(r["step"]) for r in csv.DictReader((tmp_path / "s.csv").open())]

    after = keras.callbacks.LambdaCallback(on_epoch_end=look)
    model.fit(x, x.sum(axis=1), batch_size=8, epochs=2, verbose=0, callbacks=[telemetry, after])
    assert seen == {0: [5], 1: [5, 10, 14]}


def test_a_resume_drops_the_rows_past_its_step_and_writes_them_again(tmp_path):
    """A run killed after writing rows its last checkpoint does not hold: the resumed run
    starts at that checkpoint's step, so the rows past it go and come again, once each."""
    x = np.random.default_rng(0).normal(size=(80, 4)).astype("float32")
    path = tmp_path / "s.csv"
    path.write_text("step,gradient_norm,learning_rate\r\n5,1.0,0.01\r\n10,2.0,0.01\r\n")
    model = dense_model()
    model.compile(optimizer="sgd", loss="mse", gradient_telemetry="norm")
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(7)  # the checkpoint the resume starts from
    telemetry = StepTelemetry(tmp_path, every_n_steps=5, csv_path=path)
    model.fit(x, x.sum(axis=1), batch_size=8, epochs=1, verbose=0, callbacks=[telemetry])
    rows = path.read_bytes().split(b"\r\n")
    assert [row.split(b",")[0] for row in rows if row] == [b"step", b"5", b"10", b"15", b"17"]
    assert rows[2] != b"10,2.0,0.01"  # step 10's row is this run's, written again


def test_a_row_cut_short_by_the_kill_is_dropped_on_resume(tmp_path):
    from tapefit.callbacks.telemetry import keep_rows_until

    path = tmp_path / "steps.csv"
    path.write_bytes(b"step,gradient_norm\r\n5,0.5\r\n10,0.4\r\n1")  # killed mid-write
    keep_rows_until(path, 20)
    assert path.read_bytes() == b"step,gradient_norm\r\n5,0.5\r\n10,0.4\r\n"
