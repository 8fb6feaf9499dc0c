"""TapeModel as a drop-in base for keras.Model: the patterns of public Keras examples that
override Keras' hooks, each written once and run with `keras.Model` (the control) and with
`tapefit.TapeModel` as the base class. Training ends with identical History and weights, and
saving ends the same way (a file that reloads to the same predictions, or Keras' save-time
refusal). Under MirroredStrategy, TapeModel keeps its loss contract: a hand-written
`reduce_mean` loss trains as on one device."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit

X = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5]], "float32")).astype("float32")
W = np.linspace(0.5, 1.5, 64).astype("float32")


def mlp(name: str, units: int = 1) -> keras.Sequential:
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(units)], name=name)


# -- one small model per pattern, written against whichever base class is given ---------------


def distiller(base):
    """Keras 3's distiller: sub-models in the constructor, compute_loss without `training`."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class Distiller(base):
        def __init__(self, student, teacher, **kwargs):
            super().__init__(**kwargs)
            self.student, self.teacher = student, teacher

        def call(self, x, training=False):
            return self.student(x, training=training)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
            soft = self.teacher(x, training=False)
            return tf.reduce_mean(tf.square(y_pred - soft)) + tf.reduce_mean(tf.square(y_pred - y))

    model = Distiller(mlp("student"), mlp("teacher"))
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def custom_compile(base):
    """A compile() with its own signature: two optimizers and a loss function (GAN style)."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class TwoPart(base):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.encoder, self.head = keras.layers.Dense(4), keras.layers.Dense(1)
            self.encoder_loss = keras.metrics.Mean(name="encoder_loss")

        def call(self, x, training=False):
            return self.head(self.encoder(x))

        def compile(self, encoder_optimizer, head_optimizer, loss_fn, **kwargs):
            super().compile(**kwargs)
            self.encoder_optimizer, self.head_optimizer = encoder_optimizer, head_optimizer
            self.loss_fn = loss_fn

        def train_step(self, data):
            x, y = data
            for part, optimizer in ((self.encoder, self.encoder_optimizer), (self.head, None)):
                with tf.GradientTape() as tape:
                    loss = self.loss_fn(y, self(x, training=True))
                optimizer = optimizer or self.head_optimizer
                grads = tape.gradient(loss, part.trainable_weights)
                optimizer.apply_gradients(zip(grads, part.trainable_weights, strict=True))
            self.encoder_loss.update_state(loss)
            return {"encoder_loss": self.encoder_loss.result()}

        @property
        def metrics(self):
            return [self.encoder_loss]

    model = TwoPart()
    model.compile(
        keras.optimizers.SGD(0.05), keras.optimizers.SGD(0.02), keras.losses.MeanSquaredError()
    )
    return model


def gan(base):
    """Keras' GAN example, shrunk: compile(d_optimizer, g_optimizer, loss_fn), two tapes."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class GAN(base):
        def __init__(self, latent_dim=3, **kwargs):
            super().__init__(**kwargs)
            self.latent_dim = latent_dim
            self.generator = keras.Sequential(
                [keras.Input((latent_dim,)), keras.layers.Dense(4), keras.layers.Dense(3)]
            )
            self.discriminator = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
            self.seed_generator = keras.random.SeedGenerator(1)
            self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
            self.g_loss_tracker = keras.metrics.Mean(name="g_loss")

        def call(self, z, training=False):
            return self.generator(z, training=training)

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

        @property
        def metrics(self):
            return [self.d_loss_tracker, self.g_loss_tracker]

        def train_step(self, data):
            real = data[0] if isinstance(data, tuple) else data
            batch = tf.shape(real)[0]
            z = keras.random.normal((batch, self.latent_dim), seed=self.seed_generator)
            images = tf.concat([self.generator(z), real], axis=0)
            labels = tf.concat([tf.ones((batch, 1)), tf.zeros((batch, 1))], axis=0)
            with tf.GradientTape() as tape:
                d_loss = self.loss_fn(labels, self.discriminator(images))
            weights = self.discriminator.trainable_weights
            self.d_optimizer.apply_gradients(
                zip(tape.gradient(d_loss, weights), weights, strict=True)
            )
            z = keras.random.normal((batch, self.latent_dim), seed=self.seed_generator)
            with tf.GradientTape() as tape:
                fooled = self.discriminator(self.generator(z))
                g_loss = self.loss_fn(tf.zeros((batch, 1)), fooled)
            weights = self.generator.trainable_weights
            self.g_optimizer.apply_gradients(
                zip(tape.gradient(g_loss, weights), weights, strict=True)
            )
            self.d_loss_tracker.update_state(d_loss)
            self.g_loss_tracker.update_state(g_loss)
            return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}

        def get_config(self):
            return {**super().get_config(), "latent_dim": self.latent_dim}

    model = GAN()
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.optimizers.Adam(1e-3),
        keras.losses.BinaryCrossentropy(from_logits=True),
    )
    return model


def add_loss_model(base):
    """A regulariser added with add_loss inside call(), plus a compiled loss."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class Penalised(base):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(1)

        def call(self, x, training=False):
            out = self.dense(x)
            self.add_loss(0.01 * tf.reduce_mean(tf.square(out)))
            return out

    model = Penalised()
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    return model


def custom_metrics_and_test_step(base):
    """Own trackers through the `metrics` property, and a hand-written test_step."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class Tracked(base):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(1)
            self.error = keras.metrics.Mean(name="error")

        def call(self, x, training=False):
            return self.dense(x)

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                error = tf.reduce_mean(tf.abs(self(x, training=True) - y))
            grads = tape.gradient(error, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
            self.error.update_state(error)
            return {"error": self.error.result()}

        def test_step(self, data):
            x, y = data
            self.error.update_state(tf.reduce_mean(tf.abs(self(x) - y)))
            return {"error": self.error.result()}

        @property
        def metrics(self):
            return [self.error]

    model = Tracked()
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def functional_subclass(base):
    """`Sub(inputs, outputs)` with a custom train_step: layers reachable by name."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class WithStep(base):
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
            return {"loss": loss}

    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(1, name="out")(keras.layers.Dense(4, name="hidden")(inputs))
    model = WithStep(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def network_attribute(base):
    """A user attribute named `network` (TapeModel keeps no public slot of that name)."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class Wrapper(base):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.network = keras.Sequential([keras.layers.Dense(2), keras.layers.Dense(1)])

        def call(self, x, training=False):
            return self.network(x)

    model = Wrapper()
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def scaled(base):
    """A constructor argument neither Keras nor tapefit can serialise (a random generator)."""

    class Scaled(base):
        def __init__(self, rng, **kwargs):
            super().__init__(**kwargs)
            self.scale = np.float32(rng.uniform(1.0, 2.0))
            self.dense = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.dense(x) * self.scale

    model = Scaled(np.random.default_rng(0))
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


PATTERNS = {
    "distiller": (distiller, {}),
    "custom_compile": (custom_compile, {}),
    "gan": (gan, {}),
    "add_loss": (add_loss_model, {}),
    "metrics_and_test_step": (custom_metrics_and_test_step, {"validation": True}),
    "functional_subclass": (functional_subclass, {}),
    "network_attribute": (network_attribute, {}),
    "sample_weights": (add_loss_model, {"sample_weight": True}),
    "unserialisable_argument": (scaled, {}),
}
SAVED_BETTER = ("distiller",)  # sub-models in the constructor: Keras cannot save, TapeModel can


def train(base, pattern, strategy=None):
    build, options = PATTERNS[pattern]
    keras.utils.set_random_seed(7)
    with strategy.scope() if strategy else tf.distribute.get_strategy().scope():
        model = build(base)
    kwargs = {"validation_data": (X, Y)} if options.get("validation") else {}
    if options.get("sample_weight"):
        kwargs["sample_weight"] = W
    history = model.fit(X, Y, batch_size=16, epochs=2, shuffle=False, verbose=0, **kwargs)
    return model, history.history


def outputs(model):
    """The model's outputs for X, from an eager call: the same numbers as `predict`, without
    tracing a predict function for each model (the file's weights are compared, not Keras'
    predict loop)."""
    return keras.ops.convert_to_numpy(model(X))


def save_outcome(model, path):
    """`reloads` with the same predictions, or the exception type `save` raised."""
    try:
        model.save(path)
    except NotImplementedError:
        return "refused at save time"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras' own "compile() was not called" warning
        reloaded = keras.models.load_model(path)
    np.testing.assert_array_equal(outputs(reloaded), outputs(model))
    return "reloads"


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_tapemodel_trains_saves_and_reloads_as_keras_model_does(pattern, tmp_path):
    control, control_history = train(keras.Model, pattern)
    tape, tape_history = train(tapefit.TapeModel, pattern)
    assert tape_history == control_history
    for a, b in zip(control.get_weights(), tape.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    expected = save_outcome(control, tmp_path / "control.keras")
    if pattern in SAVED_BETTER:  # Keras refuses; TapeModel serialises the sub-models itself
        assert expected == "refused at save time"
        expected = "reloads"
    assert save_outcome(tape, tmp_path / "tape.keras") == expected


# Patterns whose loss reaches the optimizer through TapeModel's step (compiled, compute_loss,
# add_loss) train under two replicas as on one device: the loss contract. The others call
# optimizer.apply_gradients themselves, which Keras defines as summing the replicas'
# gradients; TapeModel leaves that as it is and equals keras.Model under the same strategy,
# or trains where keras.Model 3.15 cannot start (its symbolic build asks compute_loss for a
# loss such a model never compiled; TapeModel builds it through its test step or call).
THROUGH_THE_STEP = (
    "distiller",
    "add_loss",
    "network_attribute",
    "sample_weights",
    "unserialisable_argument",
)


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow  # every pattern on two replicas: make test-fast leaves it out
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_under_mirrored_strategy(pattern, mirrored_strategy):
    if pattern in THROUGH_THE_STEP:
        tape, tape_history = train(tapefit.TapeModel, pattern, mirrored_strategy)
        reference, reference_history = train(tapefit.TapeModel, pattern)
        tolerance = {"rtol": 1e-5, "atol": 1e-6}
    else:
        try:
            reference, reference_history = train(keras.Model, pattern, mirrored_strategy)
        except ValueError as error:
            assert "No loss to compute" in str(error)
            _, tape_history = train(tapefit.TapeModel, pattern, mirrored_strategy)
            losses = next(iter(tape_history.values()))
            assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]  # TapeModel trains
            return
        except tf.errors.InvalidArgumentError:
            # Keras' GAN example builds its own optimizers inside the replicated step, which
            # TensorFlow refuses; plain Keras and TapeModel fail alike (build them beforehand)
            with pytest.raises(tf.errors.InvalidArgumentError):
                train(tapefit.TapeModel, pattern, mirrored_strategy)
            return
        tape, tape_history = train(tapefit.TapeModel, pattern, mirrored_strategy)
        tolerance = {"rtol": 0, "atol": 0}
    for key, values in reference_history.items():
        np.testing.assert_allclose(tape_history[key], values, **tolerance)
    for a, b in zip(reference.get_weights(), tape.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, **tolerance)


def test_the_functional_api_reaches_the_real_layers():
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(1)(keras.layers.Dense(4, name="hidden")(inputs))
    for base in (keras.Model, tapefit.TapeModel):
        model = base(inputs, outputs)
        assert [layer.name for layer in model.layers][1] == "hidden"
        assert model.get_layer("hidden").units == 4
        features = keras.Model(model.input, model.get_layer("hidden").output)
        assert features.output.shape == (None, 4) and model.output.shape == (None, 1)
        assert len(model.inputs) == 1 and len(model.outputs) == 1


def test_a_custom_compile_reloads_with_keras_warning(tmp_path):
    model, _ = train(tapefit.TapeModel, "custom_compile")
    model.save(tmp_path / "model.keras")
    with pytest.warns(UserWarning, match="compile\\(\\) was not called as part of loading"):
        reloaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(outputs(reloaded), outputs(model))


def test_the_run_directory_refuses_an_unloadable_model_in_one_line(tmp_path, monkeypatch):
    from tapefit.errors import TapefitError
    from tapefit.step import tape_model
    from tapefit.training import run_files
    from tapefit.training.run_files import save_model

    model, _ = train(tapefit.TapeModel, "unserialisable_argument")
    with pytest.raises(TapefitError, match=r"Scaled cannot be saved to \.keras") as error:
        save_model(model, tmp_path / "model.keras")
    message = str(error.value)
    assert "get_config()" in message and "\n" not in message
    assert message.endswith("or set trainer.save_model=false")  # the run's own way out
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    checks = []  # a model that saves is checked once per save, not by save_model and save both
    saveable, _ = train(tapefit.TapeModel, "add_loss")
    original = tape_model.check_rebuildable
    for module in (tape_model, run_files):
        monkeypatch.setattr(module, "check_rebuildable", lambda m: checks.append(original(m)))
    save_model(saveable, tmp_path / "model.keras")
    assert len(checks) == 1 and (tmp_path / "model.keras").is_file()


def test_the_one_name_tapefit_keeps_is_refused_at_construction_in_one_line():
    class Owner(tapefit.TapeModel):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.optimizers = [keras.optimizers.SGD()]

    with pytest.raises(tapefit.TapefitError, match=r"Owner\.optimizers is TapeModel's") as error:
        Owner()
    assert "another name" in str(error.value) and "\n" not in str(error.value)


def test_a_functional_subclass_reaches_its_layers_by_name():
    for base in (keras.Model, tapefit.TapeModel):
        model = functional_subclass(base)
        assert model.get_layer("hidden").units == 4 and model.get_layer("out").units == 1
        assert keras.Model(model.input, model.get_layer("hidden").output).output.shape == (
            None,
            4,
        )


def encoder_step(base):
    """A train_step that uses a layer directly and never calls self(x)."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class EncoderStep(base):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.encoder = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.encoder(x)

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.encoder(x) - y))
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
            return {"loss": loss}

    model = EncoderStep()
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
def test_a_model_its_step_built_without_calling_it_saves_its_weights(tmp_path):
    """Keras saves such a model unbuilt, without its weights (a warning only); TapeModel marks
    it built once its step has built every layer, so the file reloads."""
    PATTERNS["encoder_step"] = (encoder_step, {})
    try:
        control, control_history = train(keras.Model, "encoder_step")
        tape, tape_history = train(tapefit.TapeModel, "encoder_step")
    finally:
        PATTERNS.pop("encoder_step")
    assert tape_history == control_history and not control.built and tape.built
    for model, name in ((control, "control"), (tape, "tape")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save(tmp_path / f"{name}.keras")
            reloaded = keras.models.load_model(tmp_path / f"{name}.keras")
        same = np.array_equal(outputs(reloaded), outputs(model))
        assert same == (name == "tape")
