"""`tapefit.callbacks.averaging`: a model's variables swapped with their optimizers' moving
averages (`optimizer.use_ema=true`) around validation, and back for training. Whole runs with
EMA: tests/runner/test_recipes.py."""

import keras
import numpy as np
import pytest

import tapefit
from tapefit.callbacks.averaging import (
    AveragedWeights,
    averaged_pairs,
    put_averages_in,
    uses_averages,
)


def ema_model(use_ema=True):
    """A compiled Dense(1) on 2 inputs whose optimizer is built: its averages start as copies
    of the weights."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1, use_ema=use_ema), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def with_known_averages(model):
    """Each variable's average set to 10 + the variable: (raw values, averages)."""
    pairs = averaged_pairs(model)
    for variable, average in pairs:
        average.assign(np.asarray(variable) + 10.0)
    return [np.array(v) for v, _ in pairs], [np.array(a) for _, a in pairs]


def values(model):
    return [np.array(v) for v in model.trainable_variables]


def assert_values(model, expected):
    for got, want in zip(values(model), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_only_an_optimizer_with_use_ema_has_averages():
    plain = ema_model(use_ema=False)
    assert not uses_averages(plain) and averaged_pairs(plain) == []
    averaged = ema_model()
    assert uses_averages(averaged)
    pairs = averaged_pairs(averaged)
    assert [v.path for v, _ in pairs] == [v.path for v in averaged.trainable_variables]


def test_a_swap_exchanges_the_weights_with_their_averages_and_a_second_swaps_back():
    model = ema_model()
    raw, averages = with_known_averages(model)
    swapper = AveragedWeights(model)
    swapper.use_averages()
    assert swapper.averaged_in
    assert_values(model, averages)
    np.testing.assert_array_equal(np.array(averaged_pairs(model)[0][1]), raw[0])  # kept there
    swapper.use_averages()  # already in: nothing changes
    assert_values(model, averages)
    swapper.use_raw()
    assert not swapper.averaged_in
    assert_values(model, raw)
    swapper.use_raw()  # already out
    assert_values(model, raw)
    put_averages_in(model)  # the end of training: the averages for good
    assert_values(model, averages)


def test_validation_in_training_keeps_the_averages_until_swap_out_at_the_epochs_end():
    model = ema_model()
    raw, averages = with_known_averages(model)
    swapper = AveragedWeights(model)
    swap_in, swap_out = swapper.swap_in, swapper.swap_out
    swap_in.on_train_begin()
    swap_in.on_epoch_begin(0)
    assert_values(model, raw)  # training steps see the raw weights
    swap_in.on_test_begin()
    swap_in.on_test_end()  # inside fit: the epoch-end callbacks judge the averages
    assert_values(model, averages)
    swap_in.on_epoch_end(0)
    assert_values(model, averages)
    swap_out.on_epoch_end(0)  # after the judges, before the resume checkpoint
    assert_values(model, raw)
    swap_in.on_train_end()
    swap_in.on_test_begin()  # an evaluate() after fit: the averages for its duration only
    assert_values(model, averages)
    swap_in.on_test_end()
    assert_values(model, raw)


def test_an_epoch_without_validation_still_ends_with_the_averages_for_its_judges():
    model = ema_model()
    raw, averages = with_known_averages(model)
    swapper = AveragedWeights(model)
    swapper.swap_in.on_train_begin()
    swapper.swap_in.on_epoch_begin(0)
    swapper.swap_in.on_epoch_end(0)
    assert_values(model, averages)
    swapper.swap_in.on_epoch_begin(1)  # no swap_out ran: the next epoch trains on the raw ones
    assert_values(model, raw)


@pytest.mark.slow
def test_ema_with_several_optimizers_swaps_each_variable_with_its_own_average():
    from tapefit.callbacks.averaging import AveragedWeights, averaged_pairs, put_averages_in
    from tapefit.training.fitting import deferred_finalize
    from tests.helpers import load_experiment

    wgan = load_experiment("wgan_gp")
    model = wgan.WGANGP(n_critic=2)
    model.compile(
        optimizer={
            "critic": keras.optimizers.Adam(1e-3, use_ema=True, ema_momentum=0.5),
            "generator": keras.optimizers.Adam(1e-3, use_ema=True, ema_momentum=0.5),
        }
    )
    points = np.asarray(wgan.ring_of_gaussians(256), "float32")
    with deferred_finalize(model.optimizer):  # Keras' own finalize knows one optimizer only
        model.fit(points, batch_size=64, epochs=2, verbose=0)
    pairs = averaged_pairs(model)
    assert sorted(id(v) for v, _ in pairs) == sorted(id(v) for v in model.trainable_variables)
    raw = [np.array(v) for v, _ in pairs]
    averages = [np.array(a) for _, a in pairs]
    assert any(not np.array_equal(r, a) for r, a in zip(raw, averages, strict=True))
    swapper = AveragedWeights(model)
    swapper.use_averages()
    for (variable, _), average in zip(pairs, averages, strict=True):
        np.testing.assert_array_equal(np.array(variable), average)
    swapper.use_raw()
    for (variable, _), value in zip(pairs, raw, strict=True):
        np.testing.assert_array_equal(np.array(variable), value)
    put_averages_in(model)
    for (variable, _), average in zip(pairs, averages, strict=True):
        np.testing.assert_array_equal(np.array(variable), average)


@pytest.mark.slow
def test_ema_swaps_under_a_mirrored_strategy(mirrored_strategy):
    """Two replicas (the session's strategy: another instance in this process would abort
    its collectives): validation sees the averages, the model ends with them."""
    from tapefit.callbacks.averaging import AveragedWeights

    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-1.0], [0.5], [2.0]], "float32")).astype("float32")
    data = tf_dataset(x, y)
    with mirrored_strategy.scope():
        inputs = keras.Input((4,))
        model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
        model.compile(
            optimizer=keras.optimizers.SGD(0.05, use_ema=True, ema_momentum=0.8), loss="mse"
        )
    averages = AveragedWeights(model)
    # 2 epochs (each costs some 0.45 s under the strategy): the last val_loss is then 1.109
    # against a training loss of 1.238, 10 % apart (3 epochs: 0.271 against 0.277, 2 %)
    history = model.fit(
        data,
        validation_data=data,
        epochs=2,
        verbose=0,
        callbacks=[averages.swap_in, averages.swap_out],
    )
    assert not averages.averaged_in
    final = model.evaluate(data, verbose=0, return_dict=True)["loss"]  # Keras put the averages in
    assert history.history["val_loss"][-1] == pytest.approx(final, rel=1e-6)
    assert history.history["val_loss"][-1] != pytest.approx(history.history["loss"][-1], rel=1e-3)


def tf_dataset(x, y):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(16)


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow
def test_ema_validation_equals_keras_swap_ema_weights_on_plain_keras():
    """Plain Keras is the control: a keras.Model with Keras' own SwapEMAWeights validates with
    the values a TapeModel with tapefit's AveragedWeights does. Bitwise in the first epoch
    only: Keras swaps by adding and subtracting (a + b, then differences), which rounds the
    raw weights it swaps back; tapefit copies them, so training goes on from them exactly."""
    from tapefit.callbacks.averaging import AveragedWeights

    rng = np.random.default_rng(1)
    x = rng.normal(size=(96, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-1.0], [0.5], [2.0]], "float32")).astype("float32")
    data = tf_dataset(x, y)

    def fitted(model_class, callbacks_of):
        keras.utils.set_random_seed(3)
        inputs = keras.Input((4,))
        model = model_class(inputs, keras.layers.Dense(1)(keras.layers.Dense(8)(inputs)))
        model.compile(keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.7), loss="mse")
        history = model.fit(
            data, validation_data=data, epochs=3, verbose=0, callbacks=callbacks_of(model)
        )
        return history.history, model.get_weights()

    plain, plain_weights = fitted(keras.Model, lambda m: [keras.callbacks.SwapEMAWeights()])

    def ours(model):
        averages = AveragedWeights(model)
        return [averages.swap_in, averages.swap_out]

    tape, tape_weights = fitted(tapefit.TapeModel, ours)
    assert tape["val_loss"][0] == plain["val_loss"][0] and tape["loss"][0] == plain["loss"][0]
    for name in ("loss", "val_loss"):
        np.testing.assert_allclose(tape[name], plain[name], rtol=1e-5)
    for a, b in zip(tape_weights, plain_weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
