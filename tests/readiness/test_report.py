"""`tapefit.readiness.report`: the loss-scale line of each dtype policy, and the whole report
as lines and as JSON."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit.readiness import readiness_of
from tapefit.readiness.report import loss_scale_line
from tests.readiness.models import compiled, model_of


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("float32", "off (not needed: float32)"),
        ("mixed_bfloat16", "off (not needed: bfloat16)"),
        ("mixed_float16", "on (dynamic LossScaleOptimizer: optimizer)"),
    ],
)
def test_the_loss_scale_line_follows_the_policy(policy, expected):
    keras.config.set_dtype_policy(policy)
    try:
        model = compiled(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
        assert loss_scale_line({"optimizer": model.optimizer}) == expected
        if policy == "mixed_float16":
            plain = {"optimizer": model.optimizer, "critic": keras.optimizers.Adam()}
            assert loss_scale_line(plain).startswith("OFF for critic")
    finally:
        keras.config.set_dtype_policy("float32")


def test_the_report_is_json_and_lines():
    model = compiled(model_of(keras.layers.GRU(4, reset_after=False)))
    train = tf.data.Dataset.from_tensor_slices((np.zeros((8, 5, 3)), np.zeros((8, 4)))).batch(4)
    report = readiness_of(model, train.prefetch(2), tf.distribute.get_strategy(), None)
    lines = report.lines()
    assert lines[0].startswith("devices: cpu:0") and "(no GPU TensorFlow can use)" in lines[0]
    assert "recurrent: functional" in lines[4] and "no (reset_after=False)" in lines[4]
    assert lines[-2] == "input pipeline: batch(4) -> prefetch(2); tf.data autotuner on"
    assert json.loads(json.dumps(report.as_dict()))["recurrent"][0]["kind"] == "GRU"
