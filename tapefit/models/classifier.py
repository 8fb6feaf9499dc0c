"""Image classifier: the CNN and the MLP of the MNIST tutorials, as a TapeModel subclass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import keras
from keras import layers

from tapefit.choices import parse_choice
from tapefit.errors import TapefitError
from tapefit.files import write_json
from tapefit.step.tape_model import TapeModel


class Architecture(str, Enum):
    """Classifier bodies: the tutorial CNN or the tutorial MLP."""

    cnn = "cnn"
    mlp = "mlp"


# (filters, number of convolutions) per block of the tutorial CNN; each block ends in BN + pool.
CNN_BLOCKS = ((16, 1), (32, 2), (64, 3))


def cnn_layers(
    image_shape: Sequence[int], dropout: float, bn_momentum: float, dense_units: int = 256
) -> list[layers.Layer]:
    """Conv 16 -> BN -> pool; 2x conv 32 -> BN -> pool; 3x conv 64 -> BN -> pool; dense 256.

    Pooling is skipped once the feature map is smaller than 2x2, so 8x8 digits and 28x28 MNIST
    both fit. BatchNormalization is `synchronized`: under `tf.distribute` it normalises with the
    global batch's statistics, so every replica and worker keeps the same moving statistics
    (without a strategy it is the plain layer).
    """
    stack: list[layers.Layer] = []
    height, width = image_shape[0], image_shape[1]
    for filters, convolutions in CNN_BLOCKS:
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
class Classifier(TapeModel):
    """Softmax image classifier trained by TapeModel's step; `architecture` is `cnn` or `mlp`.

    The final softmax runs in float32 so mixed precision keeps the loss stable.

    Example:

    ```python
    model = Classifier(image_shape=(8, 8, 1), num_classes=10, architecture="mlp")
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    ```
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.check_options(
            {"dropout": dropout, "bn_momentum": bn_momentum, "hidden_units": hidden_units}
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
        # What each output means (image folders: the class subfolders), saved with the model.
        self.class_names = None if class_names is None else [str(n) for n in class_names]
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise TapefitError(
                f"Classifier got {len(self.class_names)} class_names for {self.num_classes} "
                "classes: give one name per class"
            )
        body = (
            cnn_layers(self.image_shape, self.dropout, self.bn_momentum)
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
        """Create every weight now, so the model can be summarised, saved and reloaded at once."""
        self.body.build(input_shape)
        self.logits.build(self.body.compute_output_shape(input_shape))
        self.built = True

    def call(self, images: Any, training: bool | None = None) -> Any:
        """Class probabilities for a batch of images."""
        return self.probabilities(self.logits(self.body(images, training=training)))

    # -- what a tapefit run asks of its model (all optional; see tapefit.protocols) ------------
    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse dropout, momentum and layer sizes no model can use, before anything is built.

        Args:
            options: The configured constructor arguments (those not given keep defaults).

        Raises:
            TapefitError: naming the key, e.g. `model.dropout=1.5 must lie in [0, 1)`.
        """
        for key in ("dropout", "bn_momentum"):
            if key in options and not 0.0 <= options[key] < 1.0:
                raise TapefitError(f"model.{key}={options[key]} must lie in [0, 1)")
        if "hidden_units" in options:
            units = list(options["hidden_units"])
            if not units or min(units) < 1:
                raise TapefitError(f"model.hidden_units={units} must be positive sizes")

    @classmethod
    def default_objective(cls, data: Mapping[str, Any]) -> str:
        """The metric a run selects on when the config names none: `val_accuracy`."""
        return "val_accuracy"

    def report(self, data: Any, run_dir: Path) -> dict[str, Any]:
        """`classes.json`: the class names by output index, when the data have names."""
        if self.class_names is not None:
            write_json(run_dir / "classes.json", self.class_names)
        return {}

    def serving_endpoints(self) -> dict[str, tuple[Any, list[Any]]]:
        """`serve(images)`: float32 images `(batch, height, width, channels)` in [0, 1], the
        shape the model trained on -> float32 class probabilities `(batch, classes)`."""
        spec = keras.InputSpec(shape=(None, *self.image_shape), dtype="float32")

        def serve(images: Any) -> Any:
            return self(images, training=False)

        return {"serve": (serve, [spec])}

    def compile_defaults(self) -> dict[str, Any]:
        """The loss and metrics a tapefit run compiles the classifier with unless the config
        names others (`compile.loss`, `compile.metrics`): what it needs comes with the model,
        so a subclass named by `model._target_` trains with no other config.

        Returns:
            `{"loss": ..., "metrics": [...]}` for `Model.compile`.
        """
        return {"loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]}

    def get_config(self) -> dict:
        """Everything `__init__` needs, so `.keras` files reload without custom code."""
        return {
            "name": self.name,
            "image_shape": list(self.image_shape),
            "num_classes": self.num_classes,
            "architecture": self.architecture,
            "dropout": self.dropout,
            "bn_momentum": self.bn_momentum,
            "hidden_units": list(self.hidden_units),
            "class_names": self.class_names,
        }
