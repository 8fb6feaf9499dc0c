"""Siamese cosine-similarity model: one text encoder shared by two inputs, trained by the tape.

It is the model of the GradientTape tutorial (Embedding + LSTM, maximise the cosine of two
inputs) made complete: raw strings in (a `TextVectorization` saved with the model) or token ids,
pair losses that see both embeddings inside the tape, and `encode`/`similarity` for use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from tapefit.choices import parse_choice
from tapefit.data.pairs import adapt_vocabulary
from tapefit.errors import TapefitError
from tapefit.models.layers import TextEncoder
from tapefit.models.losses import PairLoss, losses_for_labels, make_pair_loss, pair_cosine
from tapefit.models.metrics import SplitMetrics, pair_metrics
from tapefit.models.plots import plot_similarity
from tapefit.step.tape_model import StepOutput, TapeModel

FINGERPRINT_BUCKETS = 2**24  # exact in float32, which Keras losses cast labels to


def text_fingerprint(texts: tf.Tensor) -> tf.Tensor:
    """An integer id per text (raw strings or token-id rows); equal texts get equal ids."""
    if texts.dtype != tf.string:
        texts = tf.strings.reduce_join(tf.strings.as_string(texts), axis=-1, separator=" ")
    return tf.strings.to_hash_bucket_fast(texts, FINGERPRINT_BUCKETS)


class EncoderOptions(TypedDict, total=False):
    """`model.encoder`: the shared text encoder (`tapefit.models.TextEncoder`'s arguments)."""

    embedding_dim: int
    rnn: Literal["lstm", "gru"]
    units: int
    num_layers: int
    bidirectional: bool
    pooling: Literal["last", "mean"]
    recurrent_dropout: float
    mask_padding: bool


class PairLossOptions(TypedDict, total=False):
    """`model.loss`: the pair loss and its options (each loss reads only its own)."""

    name: Literal["cosine", "cosine_mse", "contrastive", "in_batch_negatives"]
    target_range: list[float]  # cosine_mse: the cosine range graded labels are mapped onto
    margin: float  # contrastive: how far apart different pairs are pushed
    scale: float  # in_batch_negatives: the softmax temperature's inverse


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
        encoder: EncoderOptions | None = None,
        loss: PairLossOptions | None = None,
        label_type: Literal["graded", "binary"] = "graded",
        label_range: Sequence[float] = (0.0, 5.0),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if vocabulary is None and vocab_size is None:
            raise TapefitError(
                "SiameseModel needs a vocabulary (string inputs) or a vocab_size (token ids)"
            )
        self.check_options({"encoder": encoder or {}, "loss": loss or {}})
        self.vocabulary = list(vocabulary) if vocabulary is not None else None
        self.sequence_length = int(sequence_length)
        self.encoder_settings = dict(encoder or {})
        self.loss_settings = dict(loss or {})
        self.label_type = str(label_type)
        self.label_range = [float(v) for v in label_range]
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
        encoder: EncoderOptions | None = None,
        **kwargs: Any,
    ) -> SiameseModel:
        """Adapt a `TextVectorization` on `texts` and build a model that takes raw strings."""
        vocabulary = adapt_vocabulary(texts, max_tokens)
        return cls(
            vocabulary=vocabulary, sequence_length=sequence_length, encoder=encoder, **kwargs
        )

    # -- what a tapefit run asks of its model (all optional; see tapefit.protocols) ------------
    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse encoder sizes and dropout no model can use, before anything is built.

        Raises:
            TapefitError: naming the key, e.g. `model.encoder.units=0 must be at least 1`.
        """
        encoder = dict(options.get("encoder") or {})
        for key in ("embedding_dim", "units", "num_layers"):
            if key in encoder and encoder[key] < 1:
                raise TapefitError(f"model.encoder.{key}={encoder[key]} must be at least 1")
        dropout = encoder.get("recurrent_dropout", 0.0)
        if not 0.0 <= dropout < 1.0:
            raise TapefitError(f"model.encoder.recurrent_dropout={dropout} must lie in [0, 1)")
        loss = dict(options.get("loss") or {})
        if "name" in loss:
            parse_choice(PairLoss, loss["name"], "model.loss.name")

    @classmethod
    def default_objective(cls, data: Mapping[str, Any]) -> str:
        """`val_spearman` for graded labels, `val_auc` for binary ones (`data.label_type`)."""
        return "val_auc" if data.get("label_type") == "binary" else "val_spearman"

    def compile_defaults(self) -> dict[str, Any]:
        """The pair loss `loss.name` (cosine_mse unless configured), scaled from the labels'
        range, checked to fit the labels' type.

        Raises:
            TapefitError: for a loss that needs the other kind of labels, naming both fixes.
        """
        options = dict(self.loss_settings)
        name = options.pop("name", "cosine_mse")
        loss = make_pair_loss(name, label_range=self.label_range, **options)
        if loss.label_type not in (None, self.label_type):
            others = losses_for_labels(self.label_type)
            words = {"graded": "graded", "binary": "binary 0/1"}
            raise TapefitError(
                f"loss={name} needs {words[loss.label_type]} labels: set "
                f"data.label_type={loss.label_type}, or use model.loss.name={others[0]} for "
                f"{self.label_type} labels"
            )
        return {"loss": loss}

    def training_callbacks(self, data: Any) -> list[keras.callbacks.Callback]:
        """Whole-validation-split correlation (graded) or AUC (binary) in the epoch logs."""
        if data.val is None or "val" not in getattr(data, "splits", {}):
            return []
        labels = data.splits["val"][2]
        return [SplitMetrics(data.inputs("val"), labels, data.label_type, prefix="val_")]

    def report(self, data: Any, run_dir: Path) -> dict[str, Any]:
        """Test-split correlation or AUC, `similarity.png`, and the lines the reader skipped."""
        report: dict[str, Any] = dict(data.read_counts())
        if "test" not in data.splits:  # streamed data without data.test_path
            return report
        scores = self.predict(data.inputs("test"), verbose=0)
        gold = data.splits["test"][2]
        plot_similarity(scores, gold, data.label_type, run_dir / "similarity.png")
        metrics = pair_metrics(scores, gold, data.label_type)
        report.update({f"test_{name}": value for name, value in metrics.items()})
        return report

    def serving_endpoints(self) -> dict[str, tuple[Any, list[Any]]]:
        """`serve(texts_a, texts_b)`: two string tensors `(batch,)`, the raw texts of each pair
        -> float32 cosine similarity `(batch,)`; `encode(texts)`: strings `(batch,)` ->
        L2-normalised float32 embeddings `(batch, dim)`. The vectoriser is inside both."""
        texts = tf.TensorSpec((None,), tf.string)

        def serve(texts_a: tf.Tensor, texts_b: tf.Tensor) -> tf.Tensor:
            return self((texts_a, texts_b), training=False)

        def encode(texts: tf.Tensor) -> tf.Tensor:
            return self.embed(texts, training=False)

        return {"serve": (serve, [texts, texts]), "encode": (encode, [texts])}

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
            "loss": self.loss_settings,
            "label_type": self.label_type,
            "label_range": self.label_range,
        }
