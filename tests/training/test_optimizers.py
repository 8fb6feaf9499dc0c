"""Several named optimizers (the WGAN-GP example), gradient accumulation and clipping from
config. Saving and reloading each named optimizer's state:
tests/step/test_optimizer_variables.py."""

import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

import tapefit
from tapefit import StepOutput, TapeModel
from tapefit.config.target_spec import TargetSpec
from tapefit.training.optimizers import build_optimizer


def optimizer_of(node, *args):
    """The optimizer an `optimizer` node builds, as a run builds it (`RunSpec`'s spec)."""
    return build_optimizer(TargetSpec.of(node, "optimizer"), *args)


@pytest.mark.slow
def test_every_named_optimizer_scales_its_loss_under_mixed_float16(wgan_gp):
    keras.mixed_precision.set_global_policy("mixed_float16")
    model = wgan_gp.build(n_critic=2)
    assert all(
        isinstance(o, keras.optimizers.LossScaleOptimizer) for o in model.optimizers.values()
    )
    model.fit(wgan_gp.ring_of_gaussians(256), batch_size=64, epochs=1, verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert all(int(o.iterations) > 0 for o in model.optimizers.values())


def test_an_unknown_optimizer_name_is_a_clear_error(wgan_gp):
    model = wgan_gp.build()
    with pytest.raises(tapefit.TapefitError, match=r"no optimizer named 'discriminator'.*critic"):
        model.get_optimizer("discriminator")


class Linear(TapeModel):
    """No BatchNorm: one batch of k*b and k accumulated batches of b give the same update."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(8, activation="tanh")
        self.out = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def forward(self, data, training):
        x, y = data
        y_pred = self(x, training=training)
        return StepOutput(keras.ops.mean(keras.ops.square(y - y_pred)), y, y_pred)


def trained_weights(optimizer, batch_size, epochs=3):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-1.0], [0.5], [2.0]], "float32")).astype("float32")
    keras.utils.set_random_seed(2)
    model = Linear()
    model.compile(optimizer=optimizer)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


def test_gradient_accumulation_over_k_batches_equals_one_batch_k_times_larger():
    accumulated = trained_weights(keras.optimizers.SGD(0.1, gradient_accumulation_steps=4), 8)
    large = trained_weights(keras.optimizers.SGD(0.1), 32)
    for a, b in zip(accumulated, large, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    unaccumulated = trained_weights(keras.optimizers.SGD(0.1), 8)
    assert max(np.abs(a - b).max() for a, b in zip(unaccumulated, large, strict=True)) > 1e-3


def test_gradient_accumulation_comes_from_the_trainer_config(compose):
    cfg = compose(["trainer.gradient_accumulation_steps=4"])
    optimizer = optimizer_of(cfg.optimizer, cfg.trainer.gradient_accumulation_steps)
    assert optimizer.gradient_accumulation_steps == 4
    with pytest.raises(tapefit.TapefitError, match="gradient_accumulation_steps=0 must be null"):
        optimizer_of(cfg.optimizer, 0)


def one_sgd_step(clip: dict) -> tuple[np.ndarray, np.ndarray]:
    """One SGD(lr=1) step of a zero-initialised Dense(2) from config keys; its gradient."""
    cfg = OmegaConf.create({"_target_": "keras.optimizers.SGD", "learning_rate": 1.0, **clip})
    model = TapeModel(*_dense_network())
    model.compile(optimizer=optimizer_of(cfg), loss="mse")
    x = np.array([[3.0, -4.0]], "float32")
    y = np.array([[10.0, -2.0]], "float32")
    model.fit(x, y, batch_size=1, epochs=1, verbose=0)
    # d/dW mean((xW - y)^2) at W = 0, b = 0 with a single sample: -2/2 * x^T y per output.
    grad_kernel = -np.outer(x[0], y[0]) * (2 / 2)
    grad_bias = -y[0] * (2 / 2)
    return model.get_weights(), [grad_kernel, grad_bias]


def _dense_network():
    inputs = keras.Input((2,))
    outputs = keras.layers.Dense(2, kernel_initializer="zeros", bias_initializer="zeros")(inputs)
    return inputs, outputs


def _clip_by_norm(g, limit):
    norm = np.linalg.norm(g)
    return g * min(1.0, limit / norm)


@pytest.mark.parametrize(
    ("clip", "expected"),
    [
        ({"clipnorm": 1.5}, lambda grads: [_clip_by_norm(g, 1.5) for g in grads]),
        ({"clipvalue": 3.0}, lambda grads: [np.clip(g, -3.0, 3.0) for g in grads]),
        (
            {"global_clipnorm": 2.0},
            lambda grads: [
                g * min(1.0, 2.0 / np.sqrt(sum(np.sum(h**2) for h in grads))) for g in grads
            ],
        ),
    ],
)
def test_clipping_keys_match_a_hand_clipped_update(clip, expected):
    weights, grads = one_sgd_step(clip)
    clipped = expected(grads)
    for weight, gradient in zip(weights, clipped, strict=True):
        np.testing.assert_allclose(weight, -gradient, rtol=1e-6, atol=1e-6)
    unclipped, _ = one_sgd_step({})
    np.testing.assert_allclose(unclipped[0], -grads[0], rtol=1e-6)  # the hand gradient is right


# -- optimizers are `_target_` nodes, as models and loaders are ------------------------------

MY_OPTIMIZER = """
import keras


class HalvedSGD(keras.optimizers.SGD):
    \"\"\"SGD whose learning rate is half the configured one.\"\"\"

    def __init__(self, learning_rate: float = 0.1, **kwargs):
        super().__init__(learning_rate=learning_rate / 2, **kwargs)
"""


def test_an_optimizer_is_named_by_target_keras_own_or_a_users(compose, tmp_path, monkeypatch):
    (tmp_path / "my_optimizers.py").write_text(MY_OPTIMIZER)
    monkeypatch.syspath_prepend(str(tmp_path))
    lion = optimizer_of(
        compose(
            [
                "optimizer._target_=keras.optimizers.Lion",
                "~optimizer.amsgrad",
                "~optimizer.epsilon",
                "optimizer.learning_rate=0.0003",
            ]
        ).optimizer
    )
    assert isinstance(lion, keras.optimizers.Lion) and float(lion.learning_rate) == pytest.approx(
        3e-4
    )
    cfg = compose(
        [
            "optimizer=sgd",
            "optimizer._target_=my_optimizers.HalvedSGD",
            "~optimizer.momentum",
            "~optimizer.nesterov",
        ]
    )
    mine = optimizer_of(cfg.optimizer)
    assert type(mine).__name__ == "HalvedSGD" and float(mine.learning_rate) == pytest.approx(0.005)
    adamw = optimizer_of(compose(["optimizer=adamw"]).optimizer, 2)
    assert isinstance(adamw, keras.optimizers.AdamW) and adamw.weight_decay == 0.004
    assert adamw.gradient_accumulation_steps == 2


@pytest.mark.parametrize(
    ("overrides", "use_ema"),
    [
        ([], False),
        (["optimizer.ema=true"], True),  # tapefit's short name
        (["optimizer.use_ema=true"], True),  # Keras' own name works too
        (["optimizer.ema=true", "optimizer.use_ema=false"], False),  # Keras' name, when set, wins
        (["optimizer=sgd", "~optimizer.use_ema", "optimizer.ema=true"], True),  # ema only
        (["optimizer=adamw", "~optimizer.ema", "optimizer.use_ema=true"], True),  # use_ema only
    ],
)
def test_optimizer_ema_is_keras_use_ema(compose, overrides, use_ema):
    cfg = compose(overrides)
    optimizer = optimizer_of(cfg.optimizer)
    assert optimizer.use_ema is use_ema
    assert optimizer.ema_momentum == cfg.optimizer.ema_momentum


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["+optimizer.beta1=0.5"],
            r"Adam takes no argument 'beta1' \(did you mean optimizer\.beta_1\?\)",
        ),
        (["optimizer.learning_rate=fast"], "optimizer.learning_rate='fast' must be a number"),
        (["optimizer.learning_rate=0"], r"optimizer.learning_rate=0 must be > 0"),
        (
            ["optimizer=sgd", "optimizer._target_=builtins.dict"],
            "built a dict, not a keras.optimizers.Optimizer",
        ),
        (["optimizer.ema=often"], r"optimizer.ema=often must be true or false"),
    ],
)
def test_a_bad_optimizer_node_is_one_line_before_training(compose, overrides, message):
    from tapefit.runner.validation import check_config

    cfg = compose(overrides)
    with pytest.raises(tapefit.TapefitError, match=message):
        check_config(cfg)
        optimizer_of(cfg.optimizer)
