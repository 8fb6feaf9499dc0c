"""The Siamese model's pretrained encoder: its options checked, and the layer built from a
KerasHub preset or a Hugging Face-format folder (`model.encoder.preset`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import keras

from tapefit.errors import TapefitError
from tapefit.models.pretrained_encoder import POOLINGS, PretrainedTextEncoder
from tapefit.text.pretrained import load_pretrained

log = logging.getLogger("tapefit")

# What `model.encoder` takes beside a preset: the rest belongs to the encoder built from scratch.
PRETRAINED_KEYS = ("preset", "pooling", "projection")


def uses_pretrained(encoder: Mapping[str, Any] | None) -> bool:
    """Whether `model.encoder` names a pretrained backbone.

    Example:
        >>> uses_pretrained({"preset": "models/minilm"}), uses_pretrained({"units": 8})
        (True, False)
    """
    return "preset" in (encoder or {})


def check_pretrained_options(encoder: Mapping[str, Any], tokenizer: str) -> None:
    """Refuse `model.encoder` keys that mean nothing beside a preset, an unknown pooling, and a
    tokenizer other than the backbone's own.

    Args:
        encoder: `model.encoder`, with `preset` set.
        tokenizer: `model.tokenizer` (the data's `tokenizer`).

    Raises:
        TapefitError: naming the key and the fix.

    Example:
        >>> check_pretrained_options({"preset": "m", "units": 64}, "pretrained")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.encoder.units means nothing beside ...
    """
    if not encoder.get("preset"):
        raise TapefitError(
            "model.encoder.preset is not set: name a KerasHub preset folder or a Hugging "
            "Face-format folder, e.g. model.encoder.preset=models/all-MiniLM-L6-v2"
        )
    others = [key for key in encoder if key not in PRETRAINED_KEYS]
    if others:
        raise TapefitError(
            f"model.encoder.{others[0]} means nothing beside model.encoder.preset (the "
            f"pretrained backbone is the encoder): drop model.encoder.{others[0]}; a pretrained "
            f"encoder (model=siamese_pretrained) takes {', '.join(PRETRAINED_KEYS)} only"
        )
    pooling = encoder.get("pooling")
    if pooling is not None and pooling not in POOLINGS:
        raise TapefitError(
            f"model.encoder.pooling={pooling}: a pretrained encoder pools by mean, cls or max "
            "(null: the checkpoint's own pooling, else mean)"
        )
    projection = encoder.get("projection")
    if projection is not None and projection < 1:
        raise TapefitError(
            f"model.encoder.projection={projection} must be null (no head) or at least 1"
        )
    if tokenizer not in ("word", "pretrained"):  # "word": the constructor's default
        raise TapefitError(
            f"model.tokenizer={tokenizer}: model.encoder.preset brings its own tokenizer; set "
            "data.tokenizer=pretrained"
        )


def check_no_vocabulary(vocabulary: Any, vocab_size: Any) -> None:
    """A pretrained encoder has its own vocabulary: one passed beside it is refused.

    Raises:
        TapefitError: naming the data setting that learnt it.
    """
    if vocabulary is not None or vocab_size is not None:
        raise TapefitError(
            "model.encoder.preset brings its own tokenizer and vocabulary, so the data must "
            "not learn one: set data.tokenizer=pretrained"
        )


def build_pretrained_encoder(
    settings: Mapping[str, Any], sequence_length: int
) -> tuple[PretrainedTextEncoder, dict[str, Any]]:
    """The encoder layer `settings` (`model.encoder`) name, and the settings a saved model
    keeps (the pooling resolved, no preset: the `.keras` file holds the backbone itself).

    Args:
        settings: `preset`, and optionally `pooling` and `projection`.
        sequence_length: The most tokens per text.

    Returns:
        The layer, and the settings to save.
    """
    parts = load_pretrained(str(settings["preset"]))
    pooling = settings.get("pooling") or parts.pooling or "mean"
    log.info(
        "pretrained encoder %s: %s, %d parameters, %s pooling, up to %d tokens a text",
        parts.source,
        type(parts.backbone).__name__,
        parts.backbone.count_params(),
        pooling,
        sequence_length,
    )
    encoder = PretrainedTextEncoder(
        parts.backbone,
        parts.tokenizer,
        sequence_length=sequence_length,
        pooling=pooling,
        projection=settings.get("projection"),
        name="encoder",
    )
    return encoder, {"pooling": pooling, "projection": settings.get("projection")}


def pretrained_encoder_layer(
    settings: dict[str, Any], layer: Any, sequence_length: int, tokenizer: str
) -> tuple[PretrainedTextEncoder, dict[str, Any]]:
    """The Siamese model's pretrained encoder and the settings it saves: built from
    `settings` (`model.encoder`, with `preset`), or, on reload, the saved `layer` (the
    layer itself or its serialised config).

    Example:
        >>> pretrained_encoder_layer({"preset": None}, None, 16, "pretrained")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.encoder.preset is not set: ...
    """
    if layer is None:
        check_pretrained_options(settings, tokenizer)
        return build_pretrained_encoder(settings, sequence_length)
    if isinstance(layer, dict):
        layer = keras.saving.deserialize_keras_object(layer)
    return layer, settings
