"""The loss contract: a loss written as on one device trains identically under MirroredStrategy
(two logical CPUs), is reported un-scaled, and is cast or refused clearly; precomputed
gradients go through `apply_gradients` with the same scaling."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit import StepOutput, TapeModel
from tests.helpers import load_experiment

GLOBAL_BATCH = 64


class HandLossClassifier(TapeModel):
    """A classifier whose loss is written by hand in `forward` (no compiled loss)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(32, activation="relu")
        self.out = keras.layers.Dense(10, activation="softmax")

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def forward(self, data, training):
        x, y = data
        probabilities = self(x, training=training)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, probabilities))
        return StepOutput(loss, y, probabilities)


class PrecomputedGradients(HandLossClassifier):
    """The same model stepping through `apply_gradients` with gradients it computed itself."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            out = self.forward(data, training=True)
        gradients = tape.gradient(out.loss, self.trainable_variables)
        self.apply_gradients(gradients, self.trainable_variables)
        self.track_loss(out.loss, x)
        return self.compute_metrics(x, y, out.y_pred)


def regression_data():
    x = np.linspace(-3, 3, 256, dtype="float32")[:, None]
    y = np.sin(x) + np.random.default_rng(0).normal(0, 0.1, x.shape).astype("float32")
    return x, y


def classification_data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(256, 12)).astype("float32")
    return x, (x[:, :10].argmax(axis=1)).astype("int64")


def fit(model_class, data, strategy, metrics, epochs=2, seed=5):
    # 2 epochs of 4 steps: an epoch boundary, and the fewest that show the loss falling
    x, y = data
    with strategy.scope():
        keras.utils.set_random_seed(seed)
        model = model_class()
        model.compile(optimizer=keras.optimizers.SGD(0.05), metrics=metrics)
    keras.utils.set_random_seed(seed)
    history = model.fit(
        x, y, batch_size=GLOBAL_BATCH, epochs=epochs, shuffle=False, verbose=0
    ).history
    return model, history


def assert_same(one, two, atol=1e-6):
    (model_a, history_a), (model_b, history_b) = one, two
    for a, b in zip(model_a.get_weights(), model_b.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, atol=atol, rtol=0)
    assert history_a.keys() == history_b.keys()
    for key in history_a:
        np.testing.assert_allclose(history_b[key], history_a[key], atol=atol, rtol=0)


@pytest.mark.slow
def test_readme_regressor_under_mirrored_strategy_equals_one_device(mirrored_strategy):
    regressor = load_experiment("custom_step").SmoothRegressor
    one = fit(regressor, regression_data(), tf.distribute.get_strategy(), ["mae"])
    two = fit(regressor, regression_data(), mirrored_strategy, ["mae"])
    assert_same(one, two)
    assert one[1]["loss"][-1] < one[1]["loss"][0]  # it trained


@pytest.fixture(scope="module")
def one_device_classifier():
    """HandLossClassifier trained on one device: the reference of the two tests below (the
    same run each would train; a worker that runs only one of them trains it once too)."""
    return fit(
        HandLossClassifier, classification_data(), tf.distribute.get_strategy(), ["accuracy"]
    )


@pytest.mark.slow
def test_hand_written_loss_classifier_under_mirrored_strategy_equals_one_device(
    mirrored_strategy, one_device_classifier
):
    data = classification_data()
    one = one_device_classifier
    two = fit(HandLossClassifier, data, mirrored_strategy, ["accuracy"])
    assert_same(one, two)
    # The reported loss is the loss as on one device, not twice or half of it.
    x, y = data
    probabilities = one[0].predict(x, verbose=0)
    full = float(np.mean(keras.losses.sparse_categorical_crossentropy(y, probabilities)))
    assert one[0].evaluate(x, y, verbose=0, return_dict=True)["loss"] == pytest.approx(full)


@pytest.mark.slow
def test_precomputed_gradients_match_the_tape_helper_exactly(
    mirrored_strategy, one_device_classifier
):
    data = classification_data()
    helper = one_device_classifier
    precomputed = fit(PrecomputedGradients, data, tf.distribute.get_strategy(), ["accuracy"])
    assert_same(helper, precomputed, atol=0.0)
    distributed = fit(PrecomputedGradients, data, mirrored_strategy, ["accuracy"])
    assert_same(helper, distributed)


class HalfPrecisionLoss(TapeModel):
    """Returns its loss in float16, as a mixed-precision forward easily does."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.dense(x)

    def forward(self, data, training):
        x, y = data
        y_pred = self(x, training=training)
        loss = tf.reduce_mean(tf.square(tf.cast(y, y_pred.dtype) - y_pred))
        return StepOutput(loss, y, y_pred)


def test_a_float16_loss_is_cast_to_float32_under_mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    model = HalfPrecisionLoss()
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    x = regression_data()[0]
    history = model.fit(x, 2 * x + 1, batch_size=64, epochs=3, verbose=0)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.dense.compute_dtype == "float16"
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert all(np.isfinite(w).all() for w in model.get_weights())


@pytest.mark.parametrize(
    ("make_loss", "message"),
    [
        (lambda error: error, r"returned a loss of shape \(\w+, 1\): reduce it to a scalar"),
        (lambda error: tf.cast(tf.reduce_sum(error), tf.int32), "returned a int32 loss"),
    ],
)
def test_a_loss_that_is_not_a_float_scalar_is_refused(make_loss, message):
    class BadLoss(HalfPrecisionLoss):
        def forward(self, data, training):
            x, y = data
            y_pred = self(x, training=training)
            return StepOutput(make_loss(tf.square(y - y_pred)), y, y_pred)

    model = BadLoss()
    model.compile(optimizer="sgd")
    x, y = regression_data()
    with pytest.raises(tapefit.TapefitError, match=message):
        model.fit(x, y, epochs=1, verbose=0)


def test_readme_regressor_trains_under_mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    regressor = load_experiment("custom_step").SmoothRegressor
    model, history = fit(regressor, regression_data(), tf.distribute.get_strategy(), ["mae"])
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.hidden.compute_dtype == "float16"
    assert np.isfinite(history["loss"]).all() and history["loss"][-1] < history["loss"][0]
