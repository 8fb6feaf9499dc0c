"""`tapefit.callbacks.monitored`: how a callback that watches one logged metric reads it and
judges an epoch against the best so far."""

import math

import numpy as np
import pytest

from tapefit.callbacks.monitored import MonitoredCallback
from tapefit.objective import Objective


@pytest.mark.parametrize(
    ("direction", "value", "best", "improves"),
    [
        ("max", 0.3, 0.2, True),
        ("max", 0.1, 0.2, False),
        ("min", 0.1, 0.2, True),
        ("min", 0.3, 0.2, False),
        ("min", 0.2, 0.2, False),  # a tie keeps the first
        ("max", math.inf, 0.2, False),  # a non-finite value never improves
        ("min", -math.inf, 0.2, False),
        ("min", math.nan, None, False),
        ("max", -5.0, None, True),  # the first finite value is the best so far
    ],
)
def test_a_value_improves_on_the_best_in_the_objectives_direction_if_finite(
    direction, value, best, improves
):
    assert MonitoredCallback(Objective("val_x", direction)).improves(value, best) is improves


def test_the_watched_value_is_read_as_a_float_and_missing_is_none():
    watcher = MonitoredCallback(Objective("val_auc", "max"))
    assert watcher.monitor == "val_auc" and watcher.direction == "max"
    value = watcher.monitored_value({"val_auc": np.float32(0.75), "loss": 1.0})
    assert value == 0.75 and type(value) is float
    assert watcher.monitored_value({"loss": 1.0}) is None  # an epoch without validation
    assert watcher.monitored_value(None) is None


def test_watching_nothing_reads_nothing_and_every_epoch_improves():
    blind = MonitoredCallback(None)
    assert blind.monitor is None and blind.direction is None
    assert blind.monitored_value({"val_loss": 0.5}) is None
    assert blind.improves(math.nan, 0.1) and blind.improves(3.0, None)
