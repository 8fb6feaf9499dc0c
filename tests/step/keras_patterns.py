"""The patterns of public Keras examples that override Keras' hooks, each a small model written
against whichever base class is given (`keras.Model` or `tapefit.TapeModel`), and their
training: what tests/step/test_keras_patterns.py, test_functional.py and test_symbolic.py run."""

import keras
import numpy as np
import tensorflow as tf

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
