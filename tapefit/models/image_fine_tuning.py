"""The settings of `BackboneClassifier` (`model.backbone`, `model.fine_tuning`,
`model.augment`), their checks, and the callback that ends the frozen epochs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypedDict

import keras

from tapefit.errors import TapefitError
from tapefit.models.image_backbone import POOLINGS

log = logging.getLogger("tapefit")


class BackboneSettings(TypedDict, total=False):
    """`model.backbone`: which pretrained backbone, its input size and pooling."""

    preset: str | None  # a KerasHub preset name or folder, or a timm / Hugging Face folder
    application: str | None  # or a keras.applications model (ResNet50, EfficientNetB0, ...)
    weights: str | None  # application: its weights file without the top; null: random
    image_size: list[int] | None  # [height, width]; null: the preset's (application: 224)
    pooling: str  # avg | max | cls (a ViT's first token)


class ImageFineTuning(TypedDict, total=False):
    """`model.fine_tuning`: the two-phase recipe."""

    freeze_backbone_epochs: int  # the first N epochs train the head only
    unfreeze_top_layers: int | None  # then the top k layers with weights; null: all
    backbone_training: bool  # run the backbone in training mode (BatchNorm statistics move)


def check_settings(backbone: Mapping[str, Any], fine_tuning: Mapping[str, Any]) -> None:
    """Refuse keys and values that cannot work, naming the key.

    Raises:
        TapefitError: an unknown key, no preset, an unknown pooling, a negative count.

    Example:
        >>> check_settings({"preset": "m", "pooling": "mean"}, {})
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.backbone.pooling=mean must be one of avg, max, cls
    """
    for node, typed in (("backbone", BackboneSettings), ("fine_tuning", ImageFineTuning)):
        given = backbone if node == "backbone" else fine_tuning
        unknown = sorted(set(given) - set(typed.__annotations__))
        if unknown:
            raise TapefitError(
                f"model.{node}.{unknown[0]} is not a key of model.{node}: it takes "
                f"{', '.join(typed.__annotations__)}"
            )
    if backbone.get("preset") and backbone.get("application"):
        raise TapefitError(
            "model.backbone.preset and model.backbone.application both name a backbone: set one"
        )
    if backbone.get("weights") and not backbone.get("application"):
        raise TapefitError(
            "model.backbone.weights is a keras.applications model's weights file: set "
            "model.backbone.application too (a preset brings its own weights)"
        )
    pooling = backbone.get("pooling", "avg")
    if pooling not in POOLINGS:
        raise TapefitError(f"model.backbone.pooling={pooling} must be one of {', '.join(POOLINGS)}")
    epochs = fine_tuning.get("freeze_backbone_epochs", 0) or 0
    if epochs < 0:
        raise TapefitError(f"model.fine_tuning.freeze_backbone_epochs={epochs} must be at least 0")
    top = fine_tuning.get("unfreeze_top_layers")
    if top is not None and top < 1:
        raise TapefitError(
            f"model.fine_tuning.unfreeze_top_layers={top} must be at least 1 (null: all layers)"
        )


def checked_augmentation(layer: Any) -> keras.layers.Layer:
    """A layer `model.augment` names, refused in one line if it is not a Keras layer.

    Example:
        >>> checked_augmentation("flip")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.augment: 'flip' is not a Keras layer; name one by ...
    """
    if not isinstance(layer, keras.layers.Layer):
        raise TapefitError(
            f"model.augment: {layer!r} is not a Keras layer; name one by _target_, e.g. "
            "{_target_: keras.layers.RandomFlip, mode: horizontal}"
        )
    return layer


class BackboneUnfreezing(keras.callbacks.Callback):
    """Unfreezes the backbone at the first epoch past `freeze_backbone_epochs` (also the first
    epoch a resumed run trains), and has Keras trace the train step again with its variables."""

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        model = self.model
        frozen = epoch < model.frozen_epochs
        if frozen == (not model.backbone.trainable):
            return
        model.set_backbone_frozen(frozen)
        model.make_train_function(force=True)
        if not frozen:
            _, backbone = model.tunable_variables()
            log.info(
                "epoch %d: backbone unfrozen after %d head-only epoch%s: %d of its variables "
                "train from now on",
                epoch + 1,
                model.frozen_epochs,
                "" if model.frozen_epochs == 1 else "s",
                len(backbone),
            )
