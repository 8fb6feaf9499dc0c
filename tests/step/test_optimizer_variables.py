"""`tapefit.step.optimizer_variables`: which variables each named optimizer updates, saved as
positions and built on again, so that a reloaded model gets every optimizer's state back (the
WGAN-GP example's two)."""

import keras
import numpy as np
import pytest

from tapefit.step.optimizer_variables import build_at_positions, optimizer_positions
from tests.helpers import scalar_tags


def weights(count):
    return [keras.Variable(float(i), name=f"w{i}") for i in range(count)]


def built_on(optimizer, variables):
    optimizer.build(variables)
    return optimizer


def test_positions_follow_each_built_optimizers_own_order_and_skip_foreign_variables():
    w = weights(3)
    optimizers = {
        "critic": built_on(keras.optimizers.Adam(), [w[2], w[0]]),
        "scaled": built_on(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()), [w[1]]),
        "elsewhere": built_on(keras.optimizers.SGD(), [w[0], keras.Variable(5.0)]),
        "idle": keras.optimizers.SGD(),
    }
    assert optimizer_positions(w, optimizers) == {"critic": [2, 0], "scaled": [1]}


def test_optimizers_are_built_again_on_the_variables_at_their_positions():
    w = weights(3)
    saved = optimizer_positions(w, {"critic": built_on(keras.optimizers.Adam(), [w[2], w[0]])})
    fresh, again = weights(3), keras.optimizers.Adam()
    build_at_positions({"critic": again}, fresh, saved)
    assert optimizer_positions(fresh, {"critic": again}) == {"critic": [2, 0]}
    slots = sorted(v.path.rsplit("/", 1)[1] for v in again.variables if "/w" in v.path)
    assert slots == ["w0_momentum", "w0_velocity", "w2_momentum", "w2_velocity"]  # not w1's


def test_an_optimizer_without_positions_or_with_one_beyond_the_variables_stays_unbuilt():
    w = weights(2)
    beyond, unsaved = keras.optimizers.SGD(), keras.optimizers.SGD()
    build_at_positions({"beyond": beyond, "unsaved": unsaved}, w, {"beyond": [0, 2]})
    assert not beyond.built and not unsaved.built


@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_wgan_gp_example_trains_logs_and_reloads_both_optimizers(wgan_gp, tmp_path):
    model, history = wgan_gp.main(str(tmp_path), epochs=2, samples=512, n_critic=3)
    assert set(history.history) == {"critic_loss", "generator_loss", "gradient_penalty"}
    assert all(np.isfinite(v).all() for v in history.history.values())
    assert len(scalar_tags(tmp_path / "tensorboard" / "train")["epoch_critic_loss"]) == 2
    critic, generator = model.optimizers["critic"], model.optimizers["generator"]
    assert model.optimizer is critic  # the first named optimizer counts fit's steps
    steps = 2 * 512 // 256
    assert int(critic.iterations) == 3 * steps and int(generator.iterations) == steps

    restored = keras.models.load_model(tmp_path / "wgan_gp.keras")
    noise = np.random.default_rng(3).normal(size=(64, 2)).astype("float32")
    np.testing.assert_array_equal(
        restored.predict(noise, verbose=0), model.predict(noise, verbose=0)
    )
    for name, optimizer in model.optimizers.items():
        reloaded = restored.optimizers[name]
        assert len(reloaded.variables) == len(optimizer.variables) > 2  # Adam's slots too
        for saved, loaded in zip(optimizer.variables, reloaded.variables, strict=True):
            np.testing.assert_array_equal(loaded.numpy(), saved.numpy())
    # Training goes on from the restored state, each optimizer on its own part.
    restored.fit(wgan_gp.ring_of_gaussians(256), batch_size=256, epochs=1, verbose=0)
    assert int(restored.optimizers["generator"].iterations) == steps + 1
