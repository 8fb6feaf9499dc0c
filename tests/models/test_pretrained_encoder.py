"""A pretrained backbone as the Siamese model's encoder: strings in, packed per batch, pooled
over real tokens; it trains through the tape step exactly as Keras' own step trains it, and a
saved model reloads in a fresh process without the checkpoint folder."""

import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")

from tapefit import SiameseModel, TapeModel
from tapefit.models.pretrained_encoder import PretrainedTextEncoder
from tapefit.text.pretrained import load_pretrained
from tests.helpers import run_in
from tests.text.pretrained_checkpoints import TEXTS_A, TEXTS_B, scored_pairs, tiny_backbone


def test_texts_are_packed_and_padded_to_the_longest_text_of_the_batch(preset):
    parts = load_pretrained(str(preset))
    encoder = PretrainedTextEncoder(parts.backbone, parts.tokenizer, sequence_length=6)
    features = encoder.features(tf.constant(["a cat", "the cat sat on the mat today"]))
    ids, mask = features["token_ids"].numpy(), features["padding_mask"].numpy()
    cls, sep = encoder.special_ids["start"], encoder.special_ids["end"]
    assert ids.shape == (2, 6)  # the second text cut to 4 pieces + [CLS] and [SEP]
    assert list(ids[0]) == [cls, *parts.tokenizer(["a cat"])[0], sep, 0, 0]
    assert ids[1][0] == cls and ids[1][-1] == sep
    assert mask.sum(axis=1).tolist() == [4, 6]
    short = encoder.features(tf.constant(["a cat", "a dog"]))["token_ids"]
    assert short.shape == (2, 4)  # no fixed length: the batch's longest


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_pooling_reads_only_the_real_tokens(preset, pooling):
    parts = load_pretrained(str(preset))
    encoder = PretrainedTextEncoder(parts.backbone, parts.tokenizer, 16, pooling=pooling)
    texts = tf.constant(["a cat", "the quick brown fox jumps over the lazy dog"])
    features = encoder.features(texts)
    sequence = parts.backbone(features)["sequence_output"].numpy()
    real = features["padding_mask"].numpy()[0]
    first = sequence[0][real]
    expected = {"mean": first.mean(0), "cls": first[0], "max": first.max(0)}[pooling]
    np.testing.assert_allclose(encoder(texts).numpy()[0], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_a_saved_model_reloads_in_a_fresh_process_without_the_folder(preset, tmp_path):
    model = SiameseModel(encoder={"preset": str(preset)}, sequence_length=16)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), **model.compile_defaults())
    model.fit(scored_pairs(), epochs=2, verbose=0)
    model.save(tmp_path / "model.keras")
    expected = model.similarity(TEXTS_A, TEXTS_B)
    np.save(tmp_path / "expected.npy", expected)
    folder = Path(preset)
    moved = folder.parent / "elsewhere"
    folder.rename(moved)
    try:
        script = (
            "import sys, json, keras, numpy as np, tapefit\n"
            "model = keras.models.load_model('model.keras')\n"
            f"got = model.similarity({TEXTS_A!r}, {TEXTS_B!r})\n"
            "np.testing.assert_array_equal(got, np.load('expected.npy'))\n"
            "print(type(model.encoder).__name__, model.encoder.pooling)\n"
        )
        done = run_in(tmp_path, [sys.executable, "-c", script])
    finally:
        moved.rename(folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["PretrainedTextEncoder", "mean"]


class PooledBackbone:
    """A pretrained backbone, masked mean pooling and a head: one `call` for both bases."""

    def __init__(self, backbone, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.head = keras.layers.Dense(1)

    def call(self, x, training=None):
        sequence = self.backbone(x, training=training)["sequence_output"]
        return self.head(self.pool(sequence, mask=x["padding_mask"]))


class KerasPooled(PooledBackbone, keras.Model):
    pass


class TapePooled(PooledBackbone, TapeModel):
    pass


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.slow  # trains whole runs (make test-fast leaves it out)
def test_tapemodel_trains_a_pretrained_backbone_as_keras_own_step(preset):
    """Bitwise: the same loaded BERT backbone (dropout on), pooling and head, trained by
    Keras' step and by the tape's. (A functional `TapeModel(inputs, outputs)` wraps its
    network in one more call, and TensorFlow's graph optimiser then rewrites a transformer's
    step in a different order: equal to a few ulp, not to the bit.)"""
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(5, 30, (16, 7)).astype("int32"),
        "segment_ids": np.zeros((16, 7), "int32"),
        "padding_mask": np.arange(7)[None, :] < rng.integers(3, 8, (16, 1)),
    }
    y = rng.normal(size=(16, 1)).astype("float32")
    results = []
    for model_class in (KerasPooled, TapePooled):
        keras.utils.set_random_seed(3)  # the backbone's dropout seeds are drawn as it is built
        backbone = load_pretrained(str(preset)).backbone
        backbone.get_layer("pooled_dense").trainable = False
        model = model_class(backbone)
        model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss="mse")
        keras.utils.set_random_seed(11)
        history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        results.append((model.get_weights(), history.history["loss"]))
    (keras_weights, keras_loss), (tape_weights, tape_loss) = results
    assert tape_loss == keras_loss
    for expected, actual in zip(keras_weights, tape_weights, strict=True):
        np.testing.assert_array_equal(actual, expected)
    start = tiny_backbone(num_layers=1).get_weights()  # what the preset holds
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(start, tape_weights, strict=False))
