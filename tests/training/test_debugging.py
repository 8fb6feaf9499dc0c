"""`tapefit.training.debugging`: the `debug` presets' data limits, settings check, overfit
verdict and check-numerics with its one-line error. Whole runs under each preset:
tests/runner/test_recipes.py."""

import dataclasses
import logging
import math

import numpy as np
import pytest
import tensorflow as tf

from tapefit.config.schemas import DebugConfig, DebugMode
from tapefit.errors import TapefitError
from tapefit.training.debugging import (
    announce,
    check_debug,
    explain_numerics,
    limited,
    numerics_checked,
    overfit_verdict,
)


@dataclasses.dataclass
class Splits:
    train: tf.data.Dataset
    val: tf.data.Dataset | None
    test: tf.data.Dataset | None


def test_the_debug_presets_limit_the_batches_each_split_gets():
    batches = tf.data.Dataset.from_tensor_slices(np.arange(10)).batch(2)  # 5 batches
    data = Splits(batches, batches.skip(1), None)
    fast = limited(DebugConfig(DebugMode.fast_dev_run, batches=2), data)
    assert [len(list(fast.train)), len(list(fast.val)), fast.test] == [2, 2, None]
    overfit = limited(DebugConfig(DebugMode.overfit, batches=1), data)
    assert [b.numpy().tolist() for b in overfit.val] == [[0, 1]]
    assert [b.numpy().tolist() for b in overfit.test] == [[0, 1]]
    assert limited(DebugConfig(), data) is data
    verdict = overfit_verdict(DebugConfig(DebugMode.overfit, overfit_ratio=0.5), {"loss": [2, 1.2]})
    assert verdict["overfit"]["passed"] is False and verdict["overfit"]["threshold"] == 1.0
    assert overfit_verdict(DebugConfig(), {"loss": [2, 0.1]}) == {}


@pytest.mark.parametrize("ratio", [0.0, 1.0, 1.5])
def test_an_overfit_ratio_outside_zero_to_one_is_refused(ratio):
    check_debug(DebugConfig(DebugMode.overfit, batches=1, overfit_ratio=0.5))  # a good one
    with pytest.raises(TapefitError, match=rf"debug.overfit_ratio={ratio} must be in \(0, 1\)"):
        check_debug(DebugConfig(DebugMode.overfit, overfit_ratio=ratio))


def test_an_overfit_run_whose_loss_ends_non_finite_fails():
    debug = DebugConfig(DebugMode.overfit, overfit_ratio=0.5)
    verdict = overfit_verdict(debug, {"loss": [2.0, math.nan]})["overfit"]
    assert verdict["passed"] is False and verdict["first_loss"] == 2.0
    assert overfit_verdict(debug, {"loss": [2.0, -math.inf]})["overfit"]["passed"] is False
    assert overfit_verdict(debug, {"loss": [2.0, 0.9]})["overfit"]["passed"] is True
    assert overfit_verdict(debug, {}) == {}  # no epoch ended: no verdict


def test_the_announcement_says_what_the_preset_does_and_none_says_nothing(caplog):
    with caplog.at_level(logging.INFO, logger="tapefit"):
        announce(DebugConfig(DebugMode.fast_dev_run, batches=3))
        announce(DebugConfig(DebugMode.profile), profile_batch="2,4")
        announce(DebugConfig())
    assert caplog.messages == [
        "debug=fast_dev_run: 3 batch(es) of each split, one epoch, no checkpoints, model or "
        "TensorBoard; the metrics mean nothing",
        "debug=profile: TensorBoard's profiler over batches 2,4 (tensorboard/, Profile tab)",
    ]


def halve_then_log(x):
    return tf.math.log(x / 2.0)


def test_numerics_names_the_op_and_the_line_that_made_the_first_infinity_then_turns_off():
    checked = numerics_checked(DebugConfig(DebugMode.numerics))
    with checked, pytest.raises(tf.errors.InvalidArgumentError) as caught:
        tf.function(halve_then_log)(tf.constant(0.0))
    message = str(explain_numerics(caught.value))
    assert message.startswith("debug=numerics: op Log (node Log, created at ")
    assert "test_debugging.py (L" in message and "halve_then_log) produced the first NaN" in message
    assert "\n" not in message
    assert float(halve_then_log(tf.constant(0.0))) == -math.inf  # checked no more


def test_other_modes_leave_numerics_unchecked_and_other_errors_unexplained():
    with numerics_checked(DebugConfig(DebugMode.overfit)):
        assert float(tf.math.log(tf.constant(0.0))) == -math.inf
    assert explain_numerics(ValueError("shapes differ")) is None
