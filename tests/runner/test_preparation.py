"""The compile settings a run adjusts before training, and says so."""

import json
import logging

import keras
import pytest

import tapefit
from tapefit.config.schemas import TrainerConfig
from tapefit.runner.preparation import whole_executions
from tapefit.training.compiling import CompileSettings


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"steps_per_epoch": 16, "validation_steps": 8}, 8),  # multiples: unchanged
        ({}, 8),  # the data ends each epoch: a short last execution, nothing past it
        ({"steps_per_epoch": 2, "validation_steps": 1}, 1),
        ({"steps_per_epoch": 12}, 4),
        ({"steps_per_epoch": 16, "validation_steps": 4}, 4),
        ({"val_check_interval": 6}, 2),
    ],
)
def test_steps_per_execution_divides_every_count_a_run_stops_at(counts, expected, caplog):
    settings = CompileSettings(steps_per_execution=8)
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        got = whole_executions(settings, TrainerConfig(**counts))
    assert got.steps_per_execution == expected
    if expected == 8:
        assert got is settings and not caplog.records
        return
    (record,) = caplog.records
    uneven = [f"trainer.{k}={v}" for k, v in counts.items() if v % 8]
    counts_word = "its count" if len(uneven) == 1 else "their counts"
    assert record.getMessage().startswith(
        f"trainer.steps_per_execution=8 runs as {expected}: Keras runs whole executions, "
        f"so {' and '.join(uneven)} would run past {counts_word} (not a multiple of 8)"
    )


def test_a_run_trains_and_validates_the_steps_it_was_given(tmp_path):
    """The default experiment runs 8 steps an execution; 2 steps an epoch train 2, not 8."""
    overrides = ["trainer.epochs=2", "trainer.steps_per_epoch=2", "trainer.validation_steps=1"]
    cfg = tapefit.compose([*overrides, "model.architecture=mlp", "trainer.verbose=0"])
    assert cfg.trainer.steps_per_execution == 8
    tapefit.run(cfg, tmp_path)
    model = keras.models.load_model(tmp_path / "model.keras")
    assert int(model.optimizer.iterations) == 4
    assert json.loads((tmp_path / "metrics.json").read_text())["epochs_run"] == 2


def test_keras_alone_runs_whole_executions_past_steps_per_epoch():
    """The control: plain Keras, 4 steps an execution, 2 steps an epoch, trains 4 an epoch
    (what `whole_executions` prevents; if Keras stops doing it, this fails and says so)."""
    import numpy as np

    x = np.zeros((64, 3), "float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=4)
    model.fit(x, x[:, :1], batch_size=4, epochs=1, steps_per_epoch=2, verbose=0)
    assert int(model.optimizer.iterations) == 4


@pytest.mark.slow  # a process of its own (make test-fast leaves it out)
def test_the_command_line_says_it_runs_fewer_steps_an_execution(tmp_path):
    from tests.helpers import run_cli

    overrides = ["trainer.epochs=1", "trainer.steps_per_epoch=2", "trainer.validation_steps=1"]
    result = run_cli("model.architecture=mlp", *overrides, f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-2000:]
    log = (tmp_path / "tapefit.log").read_text()
    assert "trainer.steps_per_execution=8 runs as 1: Keras runs whole executions" in log
    assert (tmp_path / "steps.csv").read_text().splitlines()[-1].startswith("2,")
