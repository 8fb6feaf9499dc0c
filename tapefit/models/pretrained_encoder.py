"""A pretrained transformer as the Siamese model's text encoder: raw strings in, one vector per
text out, with the backbone's own tokenizer and packing inside the layer.

The layer holds a KerasHub backbone (BERT, DistilBERT, RoBERTa, XLM-RoBERTa, ALBERT, ...) and
its tokenizer. Each batch is tokenised, cut to `sequence_length` tokens with the start and end
tokens ([CLS]/[SEP], or <s>/</s>), and padded to the batch's longest text only, not to a fixed
length: sentence-length texts then cost a few dozen positions, not `sequence_length`. The
shape is dynamic inside one traced function (strings in, no retracing per length). The
backbone's sequence output is pooled over the real tokens (its padding mask): `mean` (as
sentence-transformers' mean pooling), `cls` (the first token) or `max`, then optionally
projected. Its config holds the backbone's and tokenizer's configs, and the tokenizer's
vocabulary is saved as an asset of the `.keras` file: a saved model reloads in a fresh
process without the preset folder and without network.
"""

from __future__ import annotations

from typing import Any, Literal

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.precision import at_least_float32
from tapefit.text.traced_once import TracedOnce

Pooling = Literal["mean", "cls", "max"]
POOLINGS = ("mean", "cls", "max")
# Backbone layers only its `pooled_output` reads, which the pooling here never uses: frozen, so
# no step sees variables without gradients.
UNUSED_HEADS = ("pooled_dense",)


def special_token_ids(tokenizer: Any) -> dict[str, int]:
    """The ids a text is packed with: start ([CLS] or <s>), end ([SEP] or </s>) and padding.

    Raises:
        TapefitError: a tokenizer that has no start, end or padding token.
    """
    found = {
        "start": _first(tokenizer, ("cls_token_id", "start_token_id", "bos_token_id")),
        "end": _first(tokenizer, ("sep_token_id", "end_token_id", "eos_token_id")),
        "pad": _first(tokenizer, ("pad_token_id",)),
    }
    missing = [name for name, value in found.items() if value is None]
    if missing:
        raise TapefitError(
            f"model.encoder.preset: {type(tokenizer).__name__} has no {', '.join(missing)} token "
            "id, so texts cannot be packed for its backbone"
        )
    return {name: int(value) for name, value in found.items()}


def _first(tokenizer: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        value = getattr(tokenizer, name, None)
        if value is not None:
            return value
    return None


def _tokenizer_config(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer's serialised config, with its WordPiece vocabulary written in (KerasHub
    keeps it only as a `.keras` asset, which `from_config` alone, as `clone_model` and
    `gradcheck` use it, would not have)."""
    config = keras.saving.serialize_keras_object(tokenizer)
    import keras_hub

    inner = config.get("config", {})
    wordpiece = isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer)
    if wordpiece and inner.get("vocabulary") is None:
        inner["vocabulary"] = list(tokenizer.get_vocabulary())
    return config


@keras.saving.register_keras_serializable(package="tapefit")
class PretrainedTextEncoder(keras.layers.Layer):
    """Strings -> pooled vectors through a pretrained backbone and its own tokenizer.

    Args:
        backbone: A KerasHub text backbone (or its serialised config, when reloading).
        tokenizer: Its KerasHub tokenizer (or its serialised config).
        sequence_length: The most tokens per text, start and end tokens included (at most
            the backbone's `max_sequence_length`).
        pooling: `mean` over the text's tokens, `cls` (the first token) or `max`.
        projection: A linear head of this width after the pooling; None: none.
        special_ids: The start, end and padding ids (taken from the tokenizer when None;
            kept in the config because a reloaded tokenizer gets its vocabulary only later).
        **kwargs: `keras.layers.Layer`'s keyword arguments.

    Example:
        >>> import keras_hub
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "sat"]
        >>> tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary)
        >>> backbone = keras_hub.models.BertBackbone(
        ...     vocabulary_size=8, num_layers=1, num_heads=1, hidden_dim=4,
        ...     intermediate_dim=8, max_sequence_length=16)
        >>> encoder = PretrainedTextEncoder(backbone, tokenizer, sequence_length=8)
        >>> tuple(encoder(tf.constant(["a cat sat", "a cat"])).shape)
        (2, 4)
        >>> [int(n) for n in encoder.features(tf.constant(["a cat sat"]))["padding_mask"][0]]
        [1, 1, 1, 1, 1]
    """

    def __init__(
        self,
        backbone: Any,
        tokenizer: Any,
        sequence_length: int = 128,
        pooling: Pooling = "mean",
        projection: int | None = None,
        special_ids: dict[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if pooling not in POOLINGS:
            raise TapefitError(f"model.encoder.pooling={pooling} must be one of mean, cls, max")
        limit = getattr(backbone, "max_sequence_length", None)
        if sequence_length < 3 or (limit is not None and sequence_length > limit):
            raise TapefitError(
                f"model.sequence_length={sequence_length} must lie in [3, {limit}] for this "
                f"backbone (its max_sequence_length is {limit})"
            )
        self.backbone, self.tokenizer = backbone, tokenizer
        for layer in backbone.layers:  # BERT's pooler ([CLS] dense): no pooling here reads it
            if layer.name in UNUSED_HEADS:
                layer.trainable = False
        self.sequence_length, self.pooling = int(sequence_length), pooling
        self.special_ids = dict(special_ids or special_token_ids(tokenizer))
        self.projection_width = projection
        width = int(backbone.hidden_dim)
        self.projection = None
        if projection:
            self.projection = keras.layers.Dense(int(projection), name="projection")
            self.projection.build((None, width))
        self.output_width = int(projection) if projection else width
        self.tokenization = TracedOnce()  # one graph for every step that tokenises
        self.built = True

    def features(self, texts: Any) -> dict[str, tf.Tensor]:
        """The backbone's inputs for a batch of strings, padded to its longest text.

        Args:
            texts: Strings `(batch,)`.

        Returns:
            `token_ids`, `padding_mask` (and `segment_ids` where the backbone reads them),
            `(batch, longest)`.
        """
        return self.tokenization(self._features, texts)

    def _features(self, texts: tf.Tensor) -> dict[str, tf.Tensor]:
        pieces = self.tokenizer(texts)
        if isinstance(pieces, list):  # eager: KerasHub's tokenizers return Python lists
            pieces = tf.ragged.constant(pieces, dtype=tf.int32, ragged_rank=1)
        elif not isinstance(pieces, tf.RaggedTensor):  # a tokenizer padding to a fixed length
            pieces = tf.RaggedTensor.from_tensor(pieces, padding=self.special_ids["pad"])
        pieces = tf.cast(pieces[:, : self.sequence_length - 2], "int32")
        rows = tf.shape(texts)[0]
        ids = self.special_ids

        def column(value: int) -> tf.RaggedTensor:
            return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], value))

        packed = tf.concat([column(ids["start"]), pieces, column(ids["end"])], axis=1)
        token_ids = packed.to_tensor(default_value=ids["pad"])
        mask = tf.sequence_mask(packed.row_lengths(), tf.shape(token_ids)[1])
        features = {"token_ids": token_ids, "padding_mask": mask}
        if "segment_ids" in self.backbone.input:
            features["segment_ids"] = tf.zeros_like(token_ids)
        return features

    def call(self, texts: Any, training: bool | None = None) -> tf.Tensor:
        """Pooled (and projected) vectors `(batch, width)` of a batch of strings."""
        features = self.features(texts)
        output = self.backbone(features, training=training)
        sequence = output["sequence_output"] if isinstance(output, dict) else output
        sequence = at_least_float32(sequence)  # pooled in float32 under mixed precision
        mask = tf.cast(features["padding_mask"], sequence.dtype)[:, :, None]
        if self.pooling == "cls":
            pooled = sequence[:, 0]
        elif self.pooling == "max":
            lowest = tf.cast(sequence.dtype.min, sequence.dtype)
            pooled = tf.reduce_max(tf.where(mask > 0, sequence, lowest), axis=1)
        else:
            pooled = tf.reduce_sum(sequence * mask, axis=1) / tf.maximum(
                tf.reduce_sum(mask, axis=1), tf.cast(1e-9, sequence.dtype)
            )
        return self.projection(pooled) if self.projection is not None else pooled

    def compute_output_shape(self, input_shape: Any) -> tuple[Any, int]:
        return (input_shape[0], self.output_width)

    def get_config(self) -> dict[str, Any]:
        """The backbone's and tokenizer's configs, the packing ids and the pooling: all a
        reload needs (the weights and the vocabulary come from the `.keras` file; a WordPiece
        vocabulary is in the config too, so `from_config` alone rebuilds a working layer)."""
        return {
            **super().get_config(),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "tokenizer": _tokenizer_config(self.tokenizer),
            "sequence_length": self.sequence_length,
            "pooling": self.pooling,
            "projection": self.projection_width,
            "special_ids": self.special_ids,
        }
