"""TapeModel must train exactly like Keras' built-in step, and its hooks must work."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

from tapefit import StepOutput, TapeModel


def cnn_network(seed: int, regulariser: bool = False):
    """The tutorial's conv/BN/pool/dropout pattern at a test-friendly size."""
    keras.utils.set_random_seed(seed)
    reg = keras.regularizers.l2(1e-3) if regulariser else None
    inputs = keras.Input((8, 8, 1))
    h = layers.Conv2D(8, 3, padding="same", activation="relu", kernel_regularizer=reg)(inputs)
    h = layers.BatchNormalization()(h)
    h = layers.MaxPooling2D()(h)
    h = layers.Flatten()(h)
    h = layers.Dense(16, activation="relu", kernel_regularizer=reg)(h)
    h = layers.BatchNormalization()(h)
    h = layers.Dropout(0.5)(h)
    outputs = layers.Dense(10, activation="softmax", dtype="float32")(h)
    return inputs, outputs


def data(n: int = 96):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 10, n)
    weights = rng.uniform(0.2, 2.0, n).astype("float32")
    return x, y, weights


def train_both(regulariser=False, sample_weights=False, strategy=None, epochs=2, **compile_args):
    """Fit Keras' built-in step and TapeModel on identical networks, data and seeds: `epochs`
    epochs of 6 batches of 16, each followed by a validation on 32 of the samples."""
    x, y, weights = data()
    results = []
    for model_class in (keras.Model, TapeModel):
        scope = strategy.scope() if strategy else tf.distribute.get_strategy().scope()
        with scope:
            model = model_class(*cnn_network(7, regulariser))
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                **compile_args,
            )
        keras.utils.set_random_seed(11)
        history = model.fit(
            x,
            y,
            sample_weight=weights if sample_weights else None,
            batch_size=16,
            epochs=epochs,
            shuffle=False,
            validation_data=(x[:32], y[:32]),
            verbose=0,
        )
        results.append((model, history.history))
    return results


def assert_same_training(results, atol=0.0):
    # Bitwise (atol 0) everywhere, also under XLA, MirroredStrategy and mixed_float16: both
    # steps run the same ops in the same order, so any difference is a real deviation.
    (builtin, builtin_history), (tape, tape_history) = results
    assert isinstance(tape, TapeModel) and not isinstance(builtin, TapeModel)
    assert len(builtin.weights) == len(tape.weights)
    for expected, actual in zip(builtin.get_weights(), tape.get_weights(), strict=True):
        np.testing.assert_allclose(actual, expected, atol=atol, rtol=0)
    assert builtin_history.keys() == tape_history.keys()
    for key in builtin_history:
        np.testing.assert_allclose(tape_history[key], builtin_history[key], atol=atol, rtol=0)
    # Training moved the weights: the comparison is not between two untouched models.
    initial = TapeModel(*cnn_network(7)).get_weights()
    assert max(np.abs(a - b).max() for a, b in zip(initial, tape.get_weights(), strict=True)) > 1e-3


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow
def test_fidelity_cnn_with_batchnorm_and_dropout():
    assert_same_training(train_both())


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow
def test_fidelity_with_sample_weights_and_regularisation_loss():
    # One epoch: the weights and the regularisation enter every step's loss, not the epoch's
    # end (the epoch boundary is compared in the plain and steps_per_execution tests).
    results = train_both(regulariser=True, sample_weights=True, epochs=1)
    assert_same_training(results)
    assert len(results[1][0].losses) == 2  # the two L2 terms are part of the tape's loss


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow  # a fresh process or an XLA compile (make test-fast leaves it out)
def test_fidelity_with_steps_per_execution_and_jit_compile():
    # Both at once: Keras' multi-step loop (3 of the 6 steps an epoch per call) around the
    # XLA-compiled step, one pair of runs instead of one pair for each.
    assert_same_training(train_both(steps_per_execution=3, jit_compile=True))


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_fidelity_under_mirrored_strategy_on_two_logical_cpus(mirrored_strategy):
    # One epoch (6 steps and a validation): under the strategy each epoch costs some 0.45 s a
    # run (measured), and TapeModel keeps no state of its own across epochs; the epoch
    # boundary is compared in the other fidelity tests.
    results = train_both(strategy=mirrored_strategy, epochs=1)
    assert_same_training(results)


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow
def test_mixed_float16_scales_the_loss_like_keras():
    keras.mixed_precision.set_global_policy("mixed_float16")
    results = train_both(epochs=1)  # one epoch: the loss scale acts at every step
    tape = results[1][0]
    assert isinstance(tape.optimizer, keras.optimizers.LossScaleOptimizer)
    assert_same_training(results)


class ScaledTarget(TapeModel):
    """A hook user: the loss is computed by hand inside `forward` (no compiled loss)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros")

    def call(self, x, training=False):
        return self.dense(x)

    def forward(self, data, training):
        x, y = data
        y_pred = self(x, training=training)
        loss = tf.reduce_mean(tf.square(y_pred - 2.0 * y))
        return StepOutput(loss, y, y_pred)


def test_forward_hook_drives_training_and_metrics():
    x = np.linspace(-1, 1, 64, dtype="float32")[:, None]
    y = 3.0 * x
    model = ScaledTarget()
    model.compile(optimizer=keras.optimizers.SGD(0.1), metrics=["mae"])
    batches = tf.data.Dataset.from_tensors((x, y)).repeat()  # 150 steps of the whole set
    history = model.fit(batches, steps_per_epoch=30, epochs=5, verbose=0)
    # The hook's target is 2*y = 6x, so the kernel converges to 6, not to 3.
    assert model.dense.kernel.numpy()[0, 0] == pytest.approx(6.0, abs=0.05)
    assert history.history["loss"][-1] < 1e-3
    # Metrics compare y with y_pred as the hook returned them: |6x - 3x| averages to 3*mean|x|.
    assert history.history["mae"][-1] == pytest.approx(3.0 * np.abs(x).mean(), abs=0.02)
    evaluated = model.evaluate(x, y, verbose=0, return_dict=True)
    assert evaluated["loss"] < 1e-3


def test_first_gradient_step_matches_a_hand_computed_update():
    x = np.ones((4, 1), "float32")
    y = np.ones((4, 1), "float32")
    model = ScaledTarget()
    model.compile(optimizer=keras.optimizers.SGD(0.5))
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    # loss = mean((w*1 + b - 2)^2); at w=b=0 dloss/dw = dloss/db = -4; SGD(0.5) -> w = b = 2.
    assert model.dense.kernel.numpy()[0, 0] == pytest.approx(2.0)
    assert model.dense.bias.numpy()[0] == pytest.approx(2.0)


def test_progress_bar_with_compiled_metrics_does_not_crash(capsys):
    x, y, _ = data(64)
    model = TapeModel(*cnn_network(1))
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, batch_size=16, epochs=1, verbose=1)
    out = capsys.readouterr().out
    assert "accuracy:" in out and "loss:" in out
    assert set(history.history) == {"accuracy", "loss"}


@pytest.mark.slow
def test_functional_tape_model_round_trips_through_keras_file(tmp_path):
    x, y, _ = data(32)
    model = TapeModel(*cnn_network(2))
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    restored = keras.models.load_model(tmp_path / "m.keras")
    assert type(restored) is TapeModel
    np.testing.assert_allclose(restored.predict(x, verbose=0), model.predict(x, verbose=0))
    # Training goes on through the tape step after reloading.
    restored.fit(x, y, epochs=1, verbose=0)


def test_subclass_without_call_says_what_to_do():
    with pytest.raises(NotImplementedError, match="define call"):
        TapeModel()(np.zeros((1, 2), "float32"))


def test_creating_a_functional_tape_model_leaves_the_class_hierarchy_alone():
    from keras.src.models.functional import Functional

    bases = TapeModel.__bases__
    TapeModel(*cnn_network(3))
    assert TapeModel.__bases__ == bases and not issubclass(TapeModel, Functional)
    model = ScaledTarget()  # subclassed models still work afterwards
    assert model(np.zeros((2, 1), "float32")).shape == (2, 1)
