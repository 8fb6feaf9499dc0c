"""The step's guards: variables without a gradient are named at the first step, and NaN/inf
steps are skipped, stop the run, or are applied as Keras would."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import StepOutput, TapefitError
from tests.step.breakable_net import Net, X, Y, poisoned, train


class OutsideTape(Net):
    """The tutorial's mistake: the forward pass runs before the tape starts."""

    def train_step(self, data):
        x, y = data
        y_pred = self(x, training=True)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(y - y_pred))
        self.apply_tape_gradients(tape, loss)
        return {}


def fit(model, **compile_args):
    model.compile(optimizer=keras.optimizers.Adam(1e-2), **compile_args)
    return model.fit(X, Y, batch_size=32, epochs=1, verbose=0, shuffle=False)


@pytest.mark.parametrize(
    ("model", "named"),
    [
        (OutsideTape(), ("body/kernel", "body/bias", "head/kernel", "head/bias")),
        (Net("numpy"), ("body/kernel", "head/bias")),
        (Net("integer"), ("body/kernel", "head/bias")),
    ],
)
def test_each_cause_of_missing_gradients_is_named_at_the_first_step(model, named):
    with pytest.raises(TapefitError, match="no gradient reached") as caught:
        fit(model)
    message = str(caught.value)
    assert all(path in message for path in named), message
    assert "outside the GradientTape" in message and "NumPy" in message and "integer" in message
    assert model.optimizer.iterations.numpy() == 0  # refused before any update


def test_a_variable_the_loss_does_not_reach_is_named_and_can_be_allowed():
    with pytest.raises(TapefitError, match=r"2 of 6 variables \(unused/kernel, unused/bias\)"):
        fit(Net())
    with pytest.warns(UserWarning, match="no gradient reached 2 of 6 variables"):
        fit(Net(), on_missing_gradients="warn")
    model = Net()
    history = fit(model, allow_missing_gradients=["*unused*"])
    assert np.isfinite(history.history["loss"]).all()
    assert model.optimizer.iterations.numpy() == 3


@pytest.fixture(scope="module")
def skipped_on_one_device():
    """train("skip", poisoned()) on one device: the run both tests below check."""
    return train("skip", poisoned())


def test_skip_leaves_weights_and_optimizer_as_if_the_bad_batch_were_absent(
    skipped_on_one_device,
):
    model, history = skipped_on_one_device
    keep = np.r_[0:32, 64:96]
    keras.utils.set_random_seed(3)
    reference = Net()
    reference.compile(optimizer=keras.optimizers.Adam(1e-2), allow_missing_gradients=["*"])
    keras.utils.set_random_seed(3)
    reference.fit(X[keep], Y[keep], batch_size=32, epochs=2, verbose=0, shuffle=False)
    for a, b in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert history["skipped_steps"] == [1, 1]
    assert np.isfinite(history["loss"]).all()  # the skipped batch is left out of the loss too
    assert int(model.optimizer.iterations) == 4


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_a_bad_batch_on_one_replica_is_skipped_by_every_replica(
    mirrored_strategy, skipped_on_one_device
):
    """The NaN row lands in one replica's half of batch 2; both replicas agree to skip it, so
    the result equals the one-device run's (every row of the batch was skipped there too)."""
    model, history = train("skip", poisoned(), strategy=mirrored_strategy)
    alone, _ = skipped_on_one_device
    assert history["skipped_steps"] == [1, 1]
    for a, b in zip(model.get_weights(), alone.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    with pytest.raises(TapefitError, match=r"NaN/inf at epoch 1, optimizer step 2"):
        train("stop", poisoned(), strategy=mirrored_strategy)


def test_ignore_applies_the_bad_step_as_keras_does():
    model, history = train("ignore", poisoned(), epochs=1)
    assert not all(np.isfinite(w).all() for w in model.get_weights())
    assert "skipped_steps" not in history


class InfiniteGradient(Net):
    """A finite loss whose gradient is NaN (sqrt at zero): overflow-like, not a bad loss."""

    def forward(self, data, training):
        out = super().forward(data, training)
        kernel = self.head.kernel
        return StepOutput(out.loss + tf.reduce_sum(tf.sqrt(tf.abs(kernel - kernel))), out.y)


@pytest.mark.parametrize(("policy", "counted"), [("float32", 3), ("mixed_float16", 0)])
def test_loss_scale_skips_are_not_counted_twice(policy, counted):
    keras.mixed_precision.set_global_policy(policy)
    model = InfiniteGradient()
    model.compile(
        optimizer=keras.optimizers.SGD(0.1), on_nonfinite="skip", allow_missing_gradients=["*"]
    )
    model.fit(X, Y, batch_size=32, epochs=1, verbose=0, shuffle=False)
    assert int(model._step_state.skipped_steps.numpy()) == counted
    if policy == "mixed_float16":
        # The LossScaleOptimizer skipped all three steps itself and halved its scale each time.
        assert float(model.optimizer.dynamic_scale.numpy()) == 2.0**15 / 8
    assert all(np.isfinite(w).all() for w in model.get_weights())


@pytest.mark.slow  # trains whole runs: make test-fast leaves it out
def test_a_diverging_run_from_config_stops_with_one_clear_error(compose, tmp_path):
    from tapefit.runner.train import run

    cfg = compose(["model.architecture=mlp", "optimizer.learning_rate=1e12", "trainer.verbose=0"])
    assert cfg.trainer.on_nonfinite == "stop"  # the default for runs
    with pytest.raises(TapefitError, match=r"NaN/inf at epoch \d+, optimizer step \d+"):
        run(cfg, tmp_path)
    assert not (tmp_path / "metrics.json").exists()
