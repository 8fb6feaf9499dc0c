"""Image classifier: the CNN and the MLP of the MNIST tutorials, as a TapeModel subclass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, Literal

import keras
from keras import layers

from tapefit.choices import parse_choice
from tapefit.errors import TapefitError
from tapefit.models.classifier_outputs import ClassifierOutputs
from tapefit.step.tape_model import TapeModel


class Architecture(str, Enum):
    """Classifier bodies: the tutorial CNN or the tutorial MLP."""

    cnn = "cnn"
    mlp = "mlp"


# (filters, number of convolutions) per block of the tutorial CNN; each block ends in BN + pool.
CNN_BLOCKS = ((16, 1), (32, 2), (64, 3))
DENSE_UNITS = 256


def cnn_layers(
    image_shape: Sequence[int],
    dropout: float,
    bn_momentum: float,
    dense_units: int = DENSE_UNITS,
    conv_blocks: Sequence[Sequence[int]] = CNN_BLOCKS,
) -> list[layers.Layer]:
    """Conv 16 -> BN -> pool; 2x conv 32 -> BN -> pool; 3x conv 64 -> BN -> pool; dense 256.

    `conv_blocks` lists each block's (filters, convolutions); every block ends in
    BatchNormalization and pooling. Pooling is skipped once the feature map is smaller than
    2x2, so 8x8 digits and 28x28 MNIST both fit. BatchNormalization is `synchronized`: under
    `tf.distribute` it normalises with the global batch's statistics, so every replica and
    worker keeps the same moving statistics.
    """
    stack: list[layers.Layer] = []
    height, width = image_shape[0], image_shape[1]
    for filters, convolutions in conv_blocks:
        stack += [
            layers.Conv2D(filters, 3, padding="same", activation="relu")
            for _ in range(convolutions)
        ]
        stack.append(layers.BatchNormalization(momentum=bn_momentum, synchronized=True))
        if min(height, width) >= 2:
            stack.append(layers.MaxPooling2D())
            height, width = height // 2, width // 2
    stack += [
        layers.Flatten(),
        layers.Dense(dense_units, activation="relu"),
        layers.BatchNormalization(momentum=bn_momentum, synchronized=True),
        layers.Dropout(dropout),
    ]
    return stack


def mlp_layers(hidden_units: Sequence[int]) -> list[layers.Layer]:
    """Flatten then one ReLU dense layer per entry of `hidden_units` (64 -> 64 by default)."""
    return [layers.Flatten()] + [layers.Dense(units, activation="relu") for units in hidden_units]


@keras.saving.register_keras_serializable(package="tapefit")
class Classifier(ClassifierOutputs, TapeModel):
    """Softmax image classifier trained by TapeModel's step; `architecture` is `cnn` or `mlp`.

    The CNN and MLP of the MNIST tutorials as one model that a run builds from
    `conf/model/classifier.yaml`, saves to `.keras` files that reload without custom code,
    and exports for serving. The final softmax runs in float32 so mixed precision keeps the
    loss stable. All weights are created in the constructor.

    Args:
        image_shape: `(height, width, channels)` of the images (the data's `image_shape`).
        num_classes: How many classes the softmax scores.
        architecture: `cnn` (conv 16, 2x conv 32, 3x conv 64, each block batch-normalised
            and pooled, then dense 256 with dropout) or `mlp` (dense layers).
        dropout: The CNN's dropout rate before the logits, in [0, 1).
        bn_momentum: The CNN's batch-normalisation momentum, in [0, 1).
        hidden_units: The MLP's ReLU layer sizes.
        conv_blocks: The CNN's blocks, `[filters, convolutions]` each (the tutorial's
            `[[16, 1], [32, 2], [64, 3]]` by default); fewer or narrower blocks give a smaller
            network, e.g. `[[8, 1]]`.
        dense_units: The CNN's ReLU units after the blocks (256).
        class_names: What each output means (image folders: the class subfolders), saved
            with the model; one per class.
        **kwargs: `keras.Model`'s keyword arguments (`name`, `dtype`, ...).

    Raises:
        TapefitError: an option out of its range, an unknown architecture, an image shape
            that is not 3-dimensional, or class names that do not match `num_classes`.

    Examples:
        >>> import numpy as np
        >>> from tapefit import Classifier
        >>> model = Classifier(image_shape=(8, 8, 1), num_classes=10, architecture="mlp")
        >>> model.compile("adam", **model.compile_defaults())
        >>> images, labels = np.random.rand(32, 8, 8, 1), np.arange(32) % 10
        >>> history = model.fit(images, labels, epochs=1, verbose=0)
        >>> sorted(history.history)
        ['accuracy', 'loss']
        >>> tuple(model(images[:2]).shape)
        (2, 10)
        >>> small = Classifier(image_shape=(8, 8, 1), conv_blocks=[[8, 1]], dense_units=32)
        >>> [layer.filters for layer in small.body.layers if hasattr(layer, "filters")]
        [8]
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        num_classes: int = 10,
        architecture: Literal["cnn", "mlp"] = "cnn",
        dropout: float = 0.5,
        bn_momentum: float = 0.9,
        hidden_units: Sequence[int] = (64, 64),
        class_names: Sequence[str] | None = None,
        conv_blocks: Sequence[Sequence[int]] = CNN_BLOCKS,
        dense_units: int = DENSE_UNITS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.check_options(
            {
                "dropout": dropout,
                "bn_momentum": bn_momentum,
                "hidden_units": hidden_units,
                "conv_blocks": conv_blocks,
                "dense_units": dense_units,
            }
        )
        architecture = parse_choice(Architecture, architecture, "model.architecture").value
        if len(image_shape) != 3:
            raise TapefitError(
                f"Classifier needs images shaped (height, width, channels); got {image_shape}"
            )
        self.image_shape = tuple(int(d) for d in image_shape)
        self.num_classes = int(num_classes)
        self.architecture = architecture
        self.dropout = float(dropout)
        self.bn_momentum = float(bn_momentum)
        self.hidden_units = tuple(int(u) for u in hidden_units)
        self.conv_blocks = tuple((int(f), int(n)) for f, n in conv_blocks)
        self.dense_units = int(dense_units)
        # What each output means (image folders: the class subfolders), saved with the model.
        self.class_names = None if class_names is None else [str(n) for n in class_names]
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise TapefitError(
                f"Classifier got {len(self.class_names)} class_names for {self.num_classes} "
                "classes: give one name per class"
            )
        body = (
            cnn_layers(
                self.image_shape,
                self.dropout,
                self.bn_momentum,
                self.dense_units,
                self.conv_blocks,
            )
            if architecture == Architecture.cnn
            else mlp_layers(self.hidden_units)
        )
        self.body = keras.Sequential(body, name=f"{architecture}_body")
        self.logits = layers.Dense(self.num_classes, name="logits")
        # Probabilities in float32 under mixed precision (float64 when Keras computes in it).
        output_dtype = "float64" if keras.config.floatx() == "float64" else "float32"
        self.probabilities = layers.Activation("softmax", dtype=output_dtype, name="softmax")
        self.build((None, *self.image_shape))

    def build(self, input_shape: tuple) -> None:
        """Create every weight now, so the model can be summarised, saved and reloaded at once.

        Args:
            input_shape: `(batch, height, width, channels)`; the batch size may be None.
        """
        self.body.build(input_shape)
        self.logits.build(self.body.compute_output_shape(input_shape))
        self.built = True

    def call(self, images: Any, training: bool | None = None) -> Any:
        """Class probabilities for a batch of images.

        Args:
            images: Float images `(batch, height, width, channels)`, scaled to [0, 1].
            training: Whether dropout and batch normalisation run in training mode.

        Returns:
            Probabilities `(batch, num_classes)` (float32 under mixed precision).
        """
        return self.probabilities(self.logits(self.body(images, training=training)))

    # -- what a tapefit run asks of its model (all optional; see tapefit.protocols) ------------
    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse dropout, momentum and layer sizes no model can use, before anything is built.

        A run calls it on the configured arguments before loading data, so a bad value
        fails in a second with a message naming its config key.

        Args:
            options: The configured constructor arguments (those not given keep defaults).

        Raises:
            TapefitError: naming the key, e.g. `model.dropout=1.5 must lie in [0, 1)`.

        Examples:
            >>> from tapefit import Classifier
            >>> Classifier.check_options({"dropout": 0.3, "hidden_units": [32]})
            >>> Classifier.check_options({"dropout": 1.5})
            Traceback (most recent call last):
            ...
            tapefit.errors.TapefitError: model.dropout=1.5 must lie in [0, 1)
            >>> Classifier.check_options({"conv_blocks": [[8]]})
            Traceback (most recent call last):
            ...
            tapefit.errors.TapefitError: model.conv_blocks=[[8]] must list [filters, ...] ...
        """
        for key in ("dropout", "bn_momentum"):
            if key in options and not 0.0 <= options[key] < 1.0:
                raise TapefitError(f"model.{key}={options[key]} must lie in [0, 1)")
        if "hidden_units" in options:
            units = list(options["hidden_units"])
            if not units or min(units) < 1:
                raise TapefitError(f"model.hidden_units={units} must be positive sizes")
        if "conv_blocks" in options:
            blocks = [list(block) for block in options["conv_blocks"]]
            if not blocks or any(len(b) != 2 or min(b) < 1 for b in blocks):
                raise TapefitError(
                    f"model.conv_blocks={blocks} must list [filters, convolutions] pairs of "
                    "positive integers, e.g. [[8, 1], [16, 2]]"
                )
        if "dense_units" in options and options["dense_units"] < 1:
            raise TapefitError(f"model.dense_units={options['dense_units']} must be at least 1")

    def get_config(self) -> dict:
        """Everything `__init__` needs, so `.keras` files reload without custom code.

        Returns:
            The constructor's arguments, JSON-serialisable.
        """
        return {
            "name": self.name,
            "image_shape": list(self.image_shape),
            "num_classes": self.num_classes,
            "architecture": self.architecture,
            "dropout": self.dropout,
            "bn_momentum": self.bn_momentum,
            "hidden_units": list(self.hidden_units),
            "class_names": self.class_names,
            "conv_blocks": [list(block) for block in self.conv_blocks],
            "dense_units": self.dense_units,
        }
