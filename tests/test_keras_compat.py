"""`tapefit.keras_compat`: every private Keras API tapefit reads, each checked against what
Keras' public API says of the same object, so a Keras release that moves one fails here by
name rather than somewhere in a run."""

import random

import h5py
import keras
import numpy as np
import pytest

from tapefit import keras_compat


def dense_model(dropout: float = 0.0) -> keras.Model:
    layers = [keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dropout(dropout, seed=1)]
    model = keras.Sequential([*layers, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    return model


def test_flatten_layers_walks_the_model_as_keras_does():
    model = dense_model()
    inner = keras_compat.flatten_layers(model, include_self=False)
    assert [type(layer).__name__ for layer in inner] == ["InputLayer", "Dense", "Dropout", "Dense"]
    assert keras_compat.flatten_layers(model)[0] is model


def test_compiled_parts_are_none_before_compile_and_keras_containers_after():
    bare = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    assert keras_compat.compiled_parts(bare) == (None, None)
    metrics, loss = keras_compat.compiled_parts(dense_model())
    assert metrics is not None and loss is not None


def test_the_optimizer_readings_match_its_public_state():
    model = dense_model()
    x, y = np.ones((8, 3), "float32"), np.ones((8, 1), "float32")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    optimizer = model.optimizer
    assert int(keras_compat.optimizer_calls(optimizer).numpy()) == int(optimizer.iterations) == 2
    assert float(keras_compat.learning_rate_setting(optimizer)) == pytest.approx(0.1)
    updated = keras_compat.updated_variables(optimizer)
    assert [v.path for v in updated] == [v.path for v in model.trainable_variables]


def test_a_schedule_is_the_learning_rate_setting_not_its_current_value():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    optimizer = keras.optimizers.SGD(schedule)
    assert keras_compat.learning_rate_setting(optimizer) is schedule


def test_moving_average_pairs_only_with_ema():
    model = dense_model()
    model.compile(optimizer=keras.optimizers.SGD(0.1, use_ema=True), loss="mse")
    model.optimizer.build(model.trainable_variables)
    pairs = keras_compat.moving_average_pairs(model.optimizer)
    assert [v.path for v, _ in pairs] == [v.path for v in model.trainable_variables]
    assert keras_compat.moving_average_pairs(keras.optimizers.SGD(0.1)) == []


def test_the_seed_generators_are_the_dropout_layers_state():
    model = dense_model(dropout=0.5)
    states = keras_compat.seed_generator_states(model)
    dropout = model.layers[1]
    assert any(state is dropout.seed_generator.state for state in states)


def test_write_weights_writes_what_save_weights_writes(tmp_path):
    model = dense_model()
    model.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=1, verbose=0)
    model.save_weights(tmp_path / "keras.weights.h5")
    store = keras_compat.saving_lib.H5IOStore(tmp_path / "ours.weights.h5", mode="w")
    keras_compat.write_weights(model, store)
    store.close()

    def datasets(path):
        found = {}
        with h5py.File(path, "r") as file:
            file.visititems(
                lambda name, item: (
                    found.update({name: item[()]}) if isinstance(item, h5py.Dataset) else None
                )
            )
        return found

    ours, theirs = datasets(tmp_path / "ours.weights.h5"), datasets(tmp_path / "keras.weights.h5")
    assert sorted(ours) == sorted(theirs) and ours
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name])


def test_name_counters_and_random_states_are_kept_across_the_block():
    keras.layers.Dense(1, name=None)  # a counter exists
    before = keras.layers.Dense(1).name
    python_draw = random.getstate()
    with keras_compat.name_counters_kept():
        keras.layers.Dense(1)
        keras.layers.Dense(1)
        random.random()
        np.random.random()
    after = keras.layers.Dense(1).name
    assert int(after.rsplit("_", 1)[1]) == int(before.rsplit("_", 1)[1]) + 1
    assert random.getstate() != python_draw  # the draw after the block, not inside it


def test_untracked_attributes_are_not_tracked_and_the_lock_returns():
    layer = keras.layers.Dense(1)
    with keras_compat.untracked_attributes(layer):
        layer.note = "kept"
    assert layer.note == "kept" and layer._lock is True


def test_the_cudnn_rules_are_keras_own():
    lstm, gru = keras_compat.cudnn_argument_rule("LSTM"), keras_compat.cudnn_argument_rule("GRU")
    tanh, sigmoid, relu = (keras.activations.get(n) for n in ("tanh", "sigmoid", "relu"))
    assert lstm(tanh, sigmoid, False, True) is True
    assert lstm(relu, sigmoid, False, True) is False
    assert lstm(tanh, sigmoid, True, True) is False  # unrolled: no cuDNN
    assert gru(tanh, sigmoid, False, True, True) is True
    assert gru(tanh, sigmoid, False, True, False) is False  # reset_after=False: no cuDNN


def test_fused_kernel_calls_are_recorded_and_the_layer_falls_back():
    layer = keras.layers.LSTM(2)
    x = np.ones((1, 3, 2), "float32")
    with keras_compat.fused_kernel_calls() as calls:
        out = layer(x)
    assert calls == ["lstm"] and out.shape == (1, 2)
    with keras_compat.fused_kernel_calls() as calls:
        keras.layers.LSTM(2, use_cudnn=False)(x)  # the layer's own option: never tried
    assert calls == []


def test_every_subclass_private_is_an_attribute_keras_has(tmp_path):
    """The names tapefit's subclasses read on `self` exist on the Keras classes they come
    from (a rename in a Keras release fails here, by name)."""
    owners = (
        keras.Model,
        keras.callbacks.TensorBoard,
        keras.callbacks.CallbackList,
        keras.layers.MultiHeadAttention,
    )
    model = dense_model()
    board = keras.callbacks.TensorBoard(str(tmp_path / "logs"))
    board.set_model(model)  # what Keras sets there (`_should_write_train_graph`)
    callbacks = keras.callbacks.CallbackList()
    instances = (model, board, callbacks, keras.layers.MultiHeadAttention(1, 2))
    missing = [
        name
        for name in keras_compat.SUBCLASS_PRIVATES
        if not any(
            hasattr(owner, name) or hasattr(i, name)
            for owner, i in zip(owners, instances, strict=True)
        )
    ]
    assert missing == []
