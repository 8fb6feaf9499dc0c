"""A WGAN-GP on 2-D toy data, written as user code: two optimizers, n_critic critic steps per
generator step, a gradient penalty from a nested tape, and still `fit`, TensorBoard, History and
`.keras` saving. Run: `python experiments/wgan_gp.py [run_dir] [epochs]`, or through the CLI
with `conf/experiment/wgan_gp.yaml` of a project that holds this file
(docs/how-to/several-optimizers.md)."""

import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

import tapefit


def ring_of_gaussians(samples: int, seed: int = 0, modes: int = 8) -> np.ndarray:
    """Points around a circle of radius 2, in `modes` tight clusters."""
    rng = np.random.default_rng(seed)
    angles = 2 * np.pi * rng.integers(0, modes, samples) / modes
    centres = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return (centres + rng.normal(0, 0.05, (samples, 2))).astype("float32")


def load_ring(samples: int = 4096, seed: int = 0) -> dict[str, np.ndarray]:
    """The loader `python -m tapefit` calls (`data._target_: wgan_gp.load_ring`): training
    points only; a GAN has no validation loss to select on."""
    return {"train": ring_of_gaussians(samples, seed)}


def mlp(units: int, outputs: int, name: str) -> keras.Sequential:
    return keras.Sequential(
        [
            keras.layers.Dense(units, activation="relu"),
            keras.layers.Dense(units, activation="relu"),
            keras.layers.Dense(outputs, dtype="float32"),  # float32 scores under mixed precision
        ],
        name=name,
    )


@keras.saving.register_keras_serializable(package="examples")
class WGANGP(tapefit.TapeModel):
    """Wasserstein GAN with gradient penalty (Gulrajani et al., 2017)."""

    def __init__(self, latent_dim=2, units=64, gp_weight=10.0, n_critic=5, **kwargs):
        super().__init__(**kwargs)
        self.latent_dim, self.units = latent_dim, units
        self.gp_weight, self.n_critic = gp_weight, n_critic
        self.generator = mlp(units, 2, "generator")
        self.critic = mlp(units, 1, "critic")
        self.generator.build((None, latent_dim))
        self.critic.build((None, 2))
        self.built = True  # every weight exists now: the model saves and reloads at once
        self.critic_loss_tracker = keras.metrics.Mean(name="critic_loss")
        self.generator_loss_tracker = keras.metrics.Mean(name="generator_loss")
        self.penalty_tracker = keras.metrics.Mean(name="gradient_penalty")

    def call(self, noise, training=False):
        return self.generator(noise, training=training)

    def gradient_penalty(self, real, fake):
        """(||d critic / d x|| - 1)^2 on random points between real and fake samples."""
        mix = tf.random.uniform([tf.shape(real)[0], 1])
        between = real + mix * (fake - real)
        with tf.GradientTape() as tape:  # nested tape: the penalty is itself differentiated
            tape.watch(between)
            scores = self.critic(between, training=True)
        slopes = tf.norm(tape.gradient(scores, between), axis=1)
        return tf.reduce_mean(tf.square(slopes - 1.0))

    def train_step(self, real):
        batch = tf.shape(real)[0]
        for _ in range(self.n_critic):
            noise = tf.random.normal([batch, self.latent_dim])
            with tf.GradientTape() as tape:
                fake = self.generator(noise, training=True)
                wasserstein = tf.reduce_mean(self.critic(fake, training=True)) - tf.reduce_mean(
                    self.critic(real, training=True)
                )
                penalty = self.gradient_penalty(real, fake)
                critic_loss = wasserstein + self.gp_weight * penalty
            self.apply_tape_gradients(
                tape, critic_loss, self.critic.trainable_variables, optimizer="critic"
            )
        noise = tf.random.normal([batch, self.latent_dim])
        with tf.GradientTape() as tape:
            generator_loss = -tf.reduce_mean(self.critic(self.generator(noise, training=True)))
        self.apply_tape_gradients(
            tape, generator_loss, self.generator.trainable_variables, optimizer="generator"
        )
        self.critic_loss_tracker.update_state(critic_loss)
        self.generator_loss_tracker.update_state(generator_loss)
        self.penalty_tracker.update_state(penalty)
        return {m.name: m.result() for m in self.metrics}

    @property
    def metrics(self):
        return [self.critic_loss_tracker, self.generator_loss_tracker, self.penalty_tracker]

    def variables_by_optimizer(self):
        """Each optimizer's part: fit builds both before the step is traced (once)."""
        return {
            "critic": self.critic.trainable_variables,
            "generator": self.generator.trainable_variables,
        }

    def get_config(self):
        return {
            "name": self.name,
            "latent_dim": self.latent_dim,
            "units": self.units,
            "gp_weight": self.gp_weight,
            "n_critic": self.n_critic,
        }


def build(n_critic: int = 5) -> WGANGP:
    """The model, compiled with one Adam per part (the settings of the WGAN-GP paper)."""
    model = WGANGP(n_critic=n_critic)
    model.compile(
        optimizer={
            "critic": keras.optimizers.Adam(1e-3, beta_1=0.5, beta_2=0.9),
            "generator": keras.optimizers.Adam(1e-3, beta_1=0.5, beta_2=0.9),
        }
    )
    return model


def main(
    run_dir: str = "outputs/wgan_gp", epochs: int = 10, samples: int = 4096, n_critic: int = 5
):
    """Train on the ring, log to TensorBoard, save `wgan_gp.keras`; return model and History."""
    keras.utils.set_random_seed(0)
    data = tf.data.Dataset.from_tensor_slices(ring_of_gaussians(samples)).shuffle(samples, seed=0)
    model = build(n_critic)
    history = model.fit(
        data.batch(256),
        epochs=epochs,
        verbose=0,
        callbacks=[keras.callbacks.TensorBoard(str(Path(run_dir) / "tensorboard"))],
    )
    model.save(Path(run_dir) / "wgan_gp.keras")
    return model, history


if __name__ == "__main__":
    arguments = sys.argv[1:]
    trained, history = main(*arguments[:1], *(int(a) for a in arguments[1:2]))
    print({key: round(values[-1], 4) for key, values in history.history.items()})
    samples = trained.predict(np.random.default_rng(1).normal(size=(2000, 2)), verbose=0)
    radius = np.linalg.norm(samples, axis=1)
    print(f"generated radius: mean {radius.mean():.3f}, std {radius.std():.3f} (data: 2.000)")
