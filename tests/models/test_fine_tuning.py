"""The fine-tuning recipe of a pretrained encoder: the backbone frozen for the first steps, its
own optimizer, AdamW's weight decay off LayerNorm and bias, mixed precision; each refusal."""

import keras
import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")

from tapefit import SiameseModel
from tapefit.errors import TapefitError
from tests.step.tracing import traced_steps
from tests.text.pretrained_checkpoints import LABELS, TEXTS_A, TEXTS_B, scored_pairs


def weights_of(layer):
    return [np.array(w) for w in layer.trainable_weights]


def changed(before, after):
    return any(np.abs(a - b).max() > 0 for a, b in zip(before, after, strict=True))


def model_with(preset, **fine_tuning):
    keras.utils.set_random_seed(0)
    return SiameseModel(
        encoder={"preset": preset, "projection": 8}, sequence_length=16, fine_tuning=fine_tuning
    )


@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_a_frozen_backbone_waits_its_steps_while_the_head_trains(preset):
    model = model_with(preset, freeze_backbone_steps=2)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2), **model.compile_defaults())
    backbone, head = weights_of(model.encoder.backbone), weights_of(model.encoder.projection)
    model.fit(scored_pairs(), epochs=1, verbose=0)  # steps 1 and 2: frozen
    assert not changed(backbone, weights_of(model.encoder.backbone))
    assert changed(head, weights_of(model.encoder.projection))
    assert int(model.optimizer.iterations) == 2
    model.fit(scored_pairs(), epochs=1, verbose=0)
    assert changed(backbone, weights_of(model.encoder.backbone))
    assert int(model.optimizer.iterations) == 4


@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_the_backbone_optimizer_updates_the_backbone_only_after_the_frozen_steps(preset):
    model = model_with(preset, freeze_backbone_steps=2)
    optimizers = {
        "head": keras.optimizers.AdamW(1e-2),
        "backbone": keras.optimizers.AdamW(1e-4),
    }
    model.compile(optimizer=optimizers, **model.compile_defaults())
    traces = traced_steps(model)
    model.fit(scored_pairs(), epochs=3, verbose=0)  # 6 steps
    # both optimizers built on their parts before the step was traced: traced once, not twice
    assert len(traces) == 1
    backbone = model.encoder.backbone.trainable_variables
    assert len(model.optimizers["backbone"].variables) == 2 + 2 * len(backbone)  # AdamW's slots
    head = len(model.trainable_variables) - len(backbone)
    assert len(model.optimizers["head"].variables) == 2 + 2 * head
    assert int(model.optimizers["head"].iterations) == 6
    assert int(model.optimizers["backbone"].iterations) == 4
    assert model.optimizers["backbone"].learning_rate.numpy() == pytest.approx(1e-4)


def test_adamw_leaves_layernorm_and_biases_out_of_weight_decay(preset):
    for decay_all in (False, True):
        model = model_with(preset, decay_norms_and_biases=decay_all)
        model.compile(optimizer=keras.optimizers.AdamW(1e-3, weight_decay=0.1), loss="mse")
        optimizer = model.optimizer
        optimizer.build(model.trainable_variables)
        decayed = {v.path: optimizer._use_weight_decay(v) for v in model.trainable_variables}
        norms = [path for path in decayed if path.endswith(("gamma", "beta", "bias"))]
        kernels = [path for path in decayed if path.endswith(("kernel", "embeddings"))]
        assert norms and kernels
        assert all(decayed[path] == decay_all for path in norms)
        assert all(decayed[path] for path in kernels)


@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_mixed_precision_runs_the_backbone_in_float16_with_layernorm_and_loss_in_float32(preset):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = SiameseModel(encoder={"preset": preset}, sequence_length=16)
        model.compile(optimizer=keras.optimizers.AdamW(1e-3), **model.compile_defaults())
        history = model.fit(scored_pairs(), epochs=1, verbose=0)
        backbone = model.encoder.backbone
        assert backbone.compute_dtype == "float16"
        norm = backbone.get_layer("embeddings_layer_norm")
        assert norm.gamma.dtype == "float32" and np.isfinite(history.history["loss"]).all()
        assert model.embed(["a cat"]).dtype == tf.float32  # the loss sees float32 vectors
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize(
    ("encoder", "fine_tuning", "message"),
    [
        (
            {"units": 8},
            {"freeze_backbone_steps": 5},
            "model.fine_tuning applies to a pretrained encoder",
        ),
        (
            {"preset": "X"},
            {"freeze_backbone_steps": 5},
            "model.fine_tuning.freeze_backbone_steps=5 leaves nothing to train",
        ),
        ({"preset": "X"}, {"warmup": 5}, "model.fine_tuning.warmup is not a fine-tuning option"),
        ({"preset": "X"}, {"freeze_backbone_steps": -1}, "must be at least 0"),
    ],
    ids=["scratch", "no-head", "unknown", "negative"],
)
def test_fine_tuning_settings_that_cannot_work_are_refused(preset, encoder, fine_tuning, message):
    encoder = {k: preset if v == "X" else v for k, v in encoder.items()}
    arguments = {"vocabulary": ["a", "cat"]} if "preset" not in encoder else {}
    with pytest.raises(TapefitError, match=message):
        SiameseModel(encoder=encoder, fine_tuning=fine_tuning, **arguments)


@pytest.mark.slow
def test_gradcheck_agrees_with_the_tape_through_a_pretrained_backbone(preset):
    """The model rebuilt in float64 from its config alone (the backbone's, and the tokenizer's
    vocabulary in it) and differentiated: the tape's gradients match central differences and
    every trainable variable gets one (BERT's unused pooler is frozen)."""
    import tapefit

    model = SiameseModel(encoder={"preset": preset, "projection": 4}, sequence_length=16)
    model.compile(optimizer="adam", **model.compile_defaults())
    batch = ((np.array(TEXTS_A[:2]), np.array(TEXTS_B[:2])), LABELS[:2])
    check = tapefit.gradcheck(model, batch, samples=4)
    # float64, but entries of 1e-5 under a CoSENT loss near 6: central differences carry
    # 1e-9 of noise, a relative 1e-4; a wrong gradient is off by its own size
    assert check.max_relative_error < 1e-3
    assert check.checked > 0
    assert check.unreached == {}
