"""An image classifier over a pretrained backbone: the Keras guide "Transfer learning &
fine-tuning" as a TapeModel subclass.

Images come in as the data give them (floats in [0, 1], any size, grey or RGB); inside the
model a grey image is repeated to three channels where the backbone reads three, and the
backbone's own converter resizes it and applies the scale and offset it was trained with. The
backbone's output is pooled, then dropout and a dense softmax head (in float32 under mixed
precision). The saved model holds the backbone and converter themselves: it reloads and serves
without the preset folder.

The two-phase recipe (`fine_tuning`): for `freeze_backbone_epochs` epochs only the head trains
(the backbone is frozen, so its gradients are not even computed); then the backbone (or its top
`unfreeze_top_layers` layers with weights) trains too, at the learning rate of a second
optimizer named `backbone` if the run gives one. The backbone runs in inference mode throughout
unless `backbone_training` (BatchNorm keeps its statistics: the guide's advice).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import keras

from tapefit.errors import TapefitError
from tapefit.models.classifier_outputs import ClassifierOutputs
from tapefit.models.fine_tuning import BACKBONE_OPTIMIZER, apply_fine_tuning_gradients
from tapefit.models.image_backbone import load_application, load_image_backbone
from tapefit.models.image_fine_tuning import (
    BackboneSettings,
    BackboneUnfreezing,
    ImageFineTuning,
    check_settings,
    checked_augmentation,
)
from tapefit.models.mixing import BatchMixing
from tapefit.step.tape_model import StepOutput, TapeModel

log = logging.getLogger("tapefit")


@keras.saving.register_keras_serializable(package="tapefit")
class BackboneClassifier(ClassifierOutputs, TapeModel):
    """Softmax classifier over a pretrained image backbone, fine-tuned through the tape step.

    Args:
        image_shape: `(height, width, channels)` of the images the data give.
        num_classes: How many classes the softmax scores.
        backbone: `preset` (a KerasHub preset name or folder, a timm or Hugging Face folder),
            `image_size` (`[height, width]` the backbone sees; None: the preset's) and
            `pooling` (`avg`, `max`, or `cls`: a transformer's first token).
        dropout: Dropout before the head, in [0, 1).
        fine_tuning: `freeze_backbone_epochs`, `unfreeze_top_layers`, `backbone_training`
            (see the module).
        class_names: What each output means, saved with the model; one per class.
        mixing: `{"kind": "mixup" | "cutmix", "alpha": ...}`: training batches mixed with a
            shuffled copy of themselves, the loss the cross-entropy with the mixed labels
            (`tapefit.models.mixing`); None: none.
        augment: Keras preprocessing layers (`RandomFlip`, `RandomRotation`, `RandomZoom`,
            `RandomTranslation`, `RandomContrast`, `RandAugment`, ...) or their serialised
            configs, applied in order to training batches only, on pixel values in [0, 255].
        backbone_layer: The backbone itself or its serialised config (a reload).
        converter: Its image converter, or the converter's serialised config (a reload).
        **kwargs: `keras.Model`'s keyword arguments.

    Example:
        >>> import keras_hub, numpy as np
        >>> backbone = keras_hub.models.ResNetBackbone(
        ...     input_conv_filters=[64], input_conv_kernel_sizes=[3],
        ...     stackwise_num_filters=[64], stackwise_num_blocks=[1], stackwise_num_strides=[1],
        ...     block_type="basic_block")
        >>> converter = keras_hub.layers.ImageConverter(image_size=(16, 16), scale=1 / 255)
        >>> model = BackboneClassifier((20, 24, 1), 3, backbone_layer=backbone,
        ...                            converter=converter)
        >>> tuple(model(np.random.rand(2, 20, 24, 1)).shape)
        (2, 3)
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        num_classes: int = 10,
        backbone: BackboneSettings | None = None,
        dropout: float = 0.2,
        fine_tuning: ImageFineTuning | None = None,
        class_names: Sequence[str] | None = None,
        augment: Sequence[Any] | None = None,
        mixing: Mapping[str, Any] | None = None,
        backbone_layer: Any = None,
        converter: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        settings, fine_tuning = dict(backbone or {}), dict(fine_tuning or {})
        self.check_options({"backbone": settings, "fine_tuning": fine_tuning, "dropout": dropout})
        if len(image_shape) != 3:
            raise TapefitError(
                f"BackboneClassifier needs (height, width, channels); got {image_shape}"
            )
        self.image_shape = tuple(int(d) for d in image_shape)
        self.num_classes, self.dropout = int(num_classes), float(dropout)
        self.class_names = None if class_names is None else [str(n) for n in class_names]
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise TapefitError(
                f"BackboneClassifier got {len(self.class_names)} class_names for "
                f"{self.num_classes} classes: give one name per class"
            )
        if backbone_layer is None:
            if settings.get("application"):
                parts = load_application(
                    str(settings["application"]),
                    settings.get("weights"),
                    settings.get("image_size"),
                )
            elif not settings.get("preset"):
                raise TapefitError(
                    "model.backbone.preset is not set: name a KerasHub preset folder or name, or "
                    "a timm or Hugging Face folder, e.g. model.backbone.preset=models/resnet_18"
                )
            else:
                parts = load_image_backbone(str(settings["preset"]), settings.get("image_size"))
            backbone_layer, converter = parts.backbone, parts.converter
            log.info(
                "pretrained backbone %s: %s, %d parameters, images resized to %s",
                parts.source,
                type(parts.backbone).__name__,
                parts.backbone.count_params(),
                "x".join(str(s) for s in parts.converter.image_size),
            )
        self.backbone = _layer(backbone_layer)
        self.converter = _layer(converter)
        self.augment = [checked_augmentation(_layer(layer)) for layer in augment or ()]
        self.mixing_settings = dict(mixing) if mixing else None
        self.mixing = BatchMixing(**self.mixing_settings) if mixing else None
        self.settings = {"pooling": settings.get("pooling", "avg"), **settings}
        self.fine_tuning = fine_tuning
        self.freeze_backbone_steps = 0  # fine_tuning's step counter: epochs freeze here
        self.backbone_channels = int(self.backbone.input.shape[-1] or 3)
        self.head_dropout = keras.layers.Dropout(self.dropout, name="head_dropout")
        self.logits = keras.layers.Dense(self.num_classes, name="logits")
        output_dtype = "float64" if keras.config.floatx() == "float64" else "float32"
        self.probabilities = keras.layers.Activation("softmax", dtype=output_dtype, name="softmax")
        features = self.pooled(self.backbone_features(keras.ops.zeros((1, *self.image_shape))))
        self.logits.build(features.shape)
        self.set_backbone_frozen(self.frozen_epochs > 0)
        self.built = True

    # -- the network --------------------------------------------------------------------------
    @property
    def frozen_epochs(self) -> int:
        """Epochs that train the head only (`fine_tuning.freeze_backbone_epochs`)."""
        return int(self.fine_tuning.get("freeze_backbone_epochs", 0) or 0)

    @property
    def pretrained_backbone(self) -> keras.Model:
        """The backbone `tapefit.models.fine_tuning` updates with its own optimizer."""
        return self.backbone

    def backbone_features(self, images: Any, training: bool | None = None) -> Any:
        """The backbone's output for images in [0, 1]: channels matched, converted, run."""
        channels = images.shape[-1]
        if channels == 1 and self.backbone_channels == 3:
            images = keras.ops.repeat(images, 3, axis=-1)
        elif channels != self.backbone_channels:
            raise TapefitError(
                f"the backbone reads {self.backbone_channels}-channel images, the data give "
                f"{channels}: set data.color_mode to match"
            )
        pixels = keras.ops.cast(images, "float32") * 255.0
        if training:  # Keras' random layers change nothing outside training either
            for layer in self.augment:
                pixels = layer(pixels, training=True)
        pixels = self.converter(pixels)
        mode = training if self.fine_tuning.get("backbone_training", False) else False
        return self.backbone(pixels, training=mode)

    def pooled(self, features: Any) -> Any:
        """One vector per image: avg or max over positions (or tokens), or the first token."""
        axes = tuple(range(1, len(features.shape) - 1))
        pooling = self.settings["pooling"]
        if pooling == "cls":
            if len(features.shape) != 3:
                raise TapefitError(
                    "model.backbone.pooling=cls needs a transformer backbone's token sequence; "
                    "this backbone gives a feature map: use avg or max"
                )
            return features[:, 0]
        return (
            keras.ops.max(features, axis=axes)
            if pooling == "max"
            else keras.ops.mean(features, axis=axes)
        )

    def call(self, images: Any, training: bool | None = None) -> Any:
        """Class probabilities `(batch, num_classes)` for images in [0, 1]."""
        features = self.pooled(self.backbone_features(images, training))
        return self.probabilities(self.logits(self.head_dropout(features, training=training)))

    # -- the two-phase recipe -----------------------------------------------------------------
    def set_backbone_frozen(self, frozen: bool) -> None:
        """Freeze the backbone, or unfreeze it (its top `unfreeze_top_layers` layers with
        weights, or all)."""
        self.backbone.trainable = not frozen
        top = self.fine_tuning.get("unfreeze_top_layers")
        if frozen or top is None:
            return
        weighted = [layer for layer in self.backbone.layers if layer.weights]
        for layer in weighted[: max(len(weighted) - int(top), 0)]:
            layer.trainable = False

    def tunable_variables(self) -> tuple[list, list]:
        """The head's variables and the backbone's that train once it is unfrozen."""
        frozen = not self.backbone.trainable
        self.set_backbone_frozen(False)
        backbone = list(self.backbone.trainable_variables)
        self.set_backbone_frozen(frozen)
        owned = {id(v) for v in self.backbone.weights}
        return [v for v in self.trainable_variables if id(v) not in owned], backbone

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """`TapeModel.compile`, then every optimizer built over all it will ever update: a
        frozen backbone's variables get their slots now, so unfreezing needs no new ones (and
        a checkpoint has the same variables in both phases)."""
        loss = kwargs.get("loss", args[1] if len(args) > 1 else None)
        if self.mixing is not None and loss not in (None, "sparse_categorical_crossentropy"):
            raise TapefitError(
                f"compile.loss={loss} would not be the training loss: with model.mixing the "
                "step trains on the cross-entropy with the mixed labels; leave compile.loss unset"
            )
        super().compile(*args, **kwargs)
        head, backbone = self.tunable_variables()
        if BACKBONE_OPTIMIZER in self.optimizers:
            self.get_optimizer().build(head)
            self.get_optimizer(BACKBONE_OPTIMIZER).build(backbone)
        else:
            self.get_optimizer().build(head + backbone)

    def forward(self, data: Any, training: bool) -> StepOutput:
        """`TapeModel.forward`; in training with `mixing`, the batch mixed first and the loss
        the cross-entropy with the mixed labels (the metrics read the batch's own labels)."""
        if not training or self.mixing is None:
            return super().forward(data, training)
        images, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        classes = keras.ops.cast(keras.ops.reshape(labels, [-1]), "int32")
        images, soft = self.mixing(images, keras.ops.one_hot(classes, self.num_classes))
        y_pred = self(images, training=True)
        losses = keras.losses.categorical_crossentropy(soft, keras.ops.cast(y_pred, soft.dtype))
        if sample_weight is not None:
            losses = losses * keras.ops.cast(keras.ops.reshape(sample_weight, [-1]), losses.dtype)
        loss = keras.ops.mean(losses)
        if self.losses:
            loss = loss + keras.ops.sum(self.losses)
        return StepOutput(loss, labels, y_pred, sample_weight)

    def apply_tape_gradients(
        self, tape: Any, loss: Any, variables: Any = None, optimizer: str | None = None
    ) -> list:
        """`TapeModel.apply_tape_gradients`; with a `backbone` optimizer, the backbone's
        gradients go to it (`tapefit.models.fine_tuning`)."""
        if variables is None and optimizer is None and BACKBONE_OPTIMIZER in self.optimizers:
            return apply_fine_tuning_gradients(self, tape, loss)
        return super().apply_tape_gradients(tape, loss, variables, optimizer)

    def training_callbacks(self, data: Any) -> list[keras.callbacks.Callback]:
        """The callback that unfreezes the backbone after `freeze_backbone_epochs` epochs."""
        return [BackboneUnfreezing()] if self.frozen_epochs else []

    # -- what a run asks of it ----------------------------------------------------------------
    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse `backbone`, `fine_tuning` and `dropout` values no model can use.

        Raises:
            TapefitError: naming the key.

        Example:
            >>> BackboneClassifier.check_options({"dropout": 1.0})
            Traceback (most recent call last):
            tapefit.errors.TapefitError: model.dropout=1.0 must lie in [0, 1)
        """
        if "dropout" in options and not 0.0 <= options["dropout"] < 1.0:
            raise TapefitError(f"model.dropout={options['dropout']} must lie in [0, 1)")
        check_settings(options.get("backbone") or {}, options.get("fine_tuning") or {})

    def get_config(self) -> dict:
        """Everything `__init__` needs: the backbone and converter themselves, not the preset
        (a saved model reloads without the folder)."""
        return {
            "name": self.name,
            "image_shape": list(self.image_shape),
            "num_classes": self.num_classes,
            "backbone": {k: v for k, v in self.settings.items() if k not in ("preset", "weights")},
            "dropout": self.dropout,
            "fine_tuning": self.fine_tuning,
            "class_names": self.class_names,
            "augment": [keras.saving.serialize_keras_object(layer) for layer in self.augment],
            "mixing": self.mixing_settings,
            "backbone_layer": keras.saving.serialize_keras_object(self.backbone),
            "converter": keras.saving.serialize_keras_object(self.converter),
        }


def _layer(value: Any) -> Any:
    return keras.saving.deserialize_keras_object(value) if isinstance(value, dict) else value
