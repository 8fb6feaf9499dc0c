"""Siamese cosine-similarity model: one text encoder shared by two inputs, trained by the tape.

It is the model of the GradientTape tutorial (Embedding + LSTM, maximise the cosine of two
inputs) made complete: raw strings in (a `TextVectorization` saved with the model) or token ids,
pair losses that see both embeddings inside the tape, and `encode`/`similarity` for use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from tapefit.errors import TapefitError
from tapefit.models.layers import TextEncoder
from tapefit.models.losses import pair_cosine
from tapefit.step.tape_model import StepOutput, TapeModel

FINGERPRINT_BUCKETS = 2**24  # exact in float32, which Keras losses cast labels to


def text_fingerprint(texts: tf.Tensor) -> tf.Tensor:
    """An integer id per text (raw strings or token-id rows); equal texts get equal ids."""
    if texts.dtype != tf.string:
        texts = tf.strings.reduce_join(tf.strings.as_string(texts), axis=-1, separator=" ")
    return tf.strings.to_hash_bucket_fast(texts, FINGERPRINT_BUCKETS)


@keras.saving.register_keras_serializable(package="tapefit")
class SiameseModel(TapeModel):
    """Cosine similarity of two texts encoded by one shared `TextEncoder`.

    Inputs are `(texts_a, texts_b)`: strings when `vocabulary` is given (a `TextVectorization`
    with that vocabulary lives in the model), otherwise integer token ids below `vocab_size`.
    `call` returns the cosine of each pair; compile it with a loss from `tapefit.models.losses`.

    Example:

    ```python
    model = SiameseModel.from_texts(train_texts, sequence_length=16)
    model.compile(optimizer="adam", loss=tapefit.models.losses.CosineMSELoss(label_range=(0, 5)))
    model.fit(((texts_a, texts_b), labels), epochs=5)
    model.similarity(["a cat sat"], ["the cat was sitting"])
    ```
    """

    def __init__(
        self,
        vocabulary: Sequence[str] | None = None,
        vocab_size: int | None = None,
        sequence_length: int = 32,
        encoder: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if vocabulary is None and vocab_size is None:
            raise TapefitError(
                "SiameseModel needs a vocabulary (string inputs) or a vocab_size (token ids)"
            )
        self.vocabulary = list(vocabulary) if vocabulary is not None else None
        self.sequence_length = int(sequence_length)
        self.encoder_settings = dict(encoder or {})
        if self.vocabulary is not None:
            self.vectorizer = layers.TextVectorization(
                vocabulary=self.vocabulary, output_sequence_length=self.sequence_length
            )
            vocab_size = self.vectorizer.vocabulary_size()
        else:
            self.vectorizer = None
        self.vocab_size = int(vocab_size)
        self.encoder = TextEncoder(self.vocab_size, **self.encoder_settings, name="encoder")
        self.encoder.build((None, self.sequence_length))
        self.built = True

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        sequence_length: int = 32,
        max_tokens: int | None = 20000,
        encoder: dict | None = None,
        **kwargs: Any,
    ) -> SiameseModel:
        """Adapt a `TextVectorization` on `texts` and build a model that takes raw strings."""
        vectorizer = layers.TextVectorization(max_tokens=max_tokens)
        vectorizer.adapt(tf.data.Dataset.from_tensor_slices(list(texts)).batch(1024))
        vocabulary = vectorizer.get_vocabulary()[2:]  # without the padding and OOV entries
        if not vocabulary:
            raise TapefitError("the training texts hold no tokens: every text is empty")
        return cls(
            vocabulary=vocabulary, sequence_length=sequence_length, encoder=encoder, **kwargs
        )

    # -- encoding ----------------------------------------------------------------------------
    def tokens(self, texts: Any) -> tf.Tensor:
        """Raw strings -> padded token ids (identity for token-id inputs)."""
        if self.vectorizer is None:
            return texts
        return self.vectorizer(tf.reshape(texts, [-1]))

    def embed(self, texts: Any, training: bool | None = None) -> tf.Tensor:
        """L2-normalised embeddings of a batch of texts, in float32 (or float64)."""
        vectors = self.encoder(self.tokens(texts), training=training)
        if vectors.dtype != tf.float64:  # half precision is lifted to float32; float64 stays
            vectors = tf.cast(vectors, tf.float32)
        return tf.math.l2_normalize(vectors, axis=-1)

    def embed_pairs(self, texts_a: Any, texts_b: Any, training: bool | None = None) -> tf.Tensor:
        """Both sides' embeddings stacked to `(batch, 2, dim)`, the form pair losses take."""
        return tf.stack([self.embed(texts_a, training), self.embed(texts_b, training)], axis=1)

    def call(self, inputs: Any, training: bool | None = None) -> tf.Tensor:
        """Cosine similarity of each `(a, b)` pair, shape `(batch,)`."""
        texts_a, texts_b = inputs
        return pair_cosine(self.embed_pairs(texts_a, texts_b, training))

    # -- the tape hook -------------------------------------------------------------------------
    def forward(self, data: Any, training: bool) -> StepOutput:
        """Encode both sides inside the tape; the loss sees the stacked pair embeddings."""
        (texts_a, texts_b), labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        pair = self.embed_pairs(texts_a, texts_b, training)
        if getattr(self.loss, "uses_text_ids", False):
            targets = tf.stack([text_fingerprint(texts_a), text_fingerprint(texts_b)], axis=1)
        elif labels is None:
            targets = tf.zeros(tf.shape(pair)[:1])
        else:
            targets = labels
        loss = self.compute_loss(
            x=(texts_a, texts_b),
            y=targets,
            y_pred=pair,
            sample_weight=sample_weight,
            training=training,
        )
        return StepOutput(loss, labels, pair_cosine(pair), sample_weight)

    # -- use -------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[Any], batch_size: int = 256) -> np.ndarray:
        """L2-normalised embeddings of `texts` as a NumPy array `(n, dim)`."""
        texts = tf.convert_to_tensor(texts)
        chunks = [
            self.embed(texts[start : start + batch_size], training=False).numpy()
            for start in range(0, int(texts.shape[0]), batch_size)
        ]
        return np.concatenate(chunks) if chunks else np.zeros((0, self.encoder.output_dim))

    def similarity(self, texts_a: Sequence[Any], texts_b: Sequence[Any]) -> np.ndarray:
        """Cosine similarity of each pair `(texts_a[i], texts_b[i])`."""
        if len(texts_a) != len(texts_b):
            raise TapefitError(
                f"similarity needs equal lengths; got {len(texts_a)}, {len(texts_b)}"
            )
        return pair_cosine(np.stack([self.encode(texts_a), self.encode(texts_b)], axis=1)).numpy()

    def get_config(self) -> dict:
        """Vocabulary and encoder settings: a `.keras` file reloads with no custom code."""
        return {
            "name": self.name,
            "vocabulary": self.vocabulary,
            "vocab_size": None if self.vocabulary is not None else self.vocab_size,
            "sequence_length": self.sequence_length,
            "encoder": self.encoder_settings,
        }
