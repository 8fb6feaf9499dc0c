"""What every tapefit image classifier offers a run beside its network: the default objective,
`classes.json`, the loss and metric it compiles with, its serving signature and the columns
`tapefit.predict` writes. `Classifier` (built from scratch) and `BackboneClassifier` (a
pretrained backbone) share them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import keras

from tapefit.files import write_json


class ClassifierOutputs:
    """A mixin for a `TapeModel` with `image_shape`, `num_classes` and `class_names` whose
    output is one probability per class."""

    image_shape: tuple[int, ...]
    num_classes: int
    class_names: list[str] | None

    @classmethod
    def default_objective(cls, data: Mapping[str, Any]) -> str:
        """The metric a run selects on when the config names none: `val_accuracy`.

        Args:
            data: The configured data options (not used: every classifier selects on
                accuracy).

        Returns:
            The metric's name in the epoch logs.
        """
        return "val_accuracy"

    def report(self, data: Any, run_dir: Path) -> dict[str, Any]:
        """Write `classes.json`: the class names by output index, when the data have names.

        A run calls it after training, so that predictions can be read as class names.

        Args:
            data: The run's data object.
            run_dir: The run directory to write into.

        Returns:
            Metrics to add to `metrics.json`: none.
        """
        if self.class_names is not None:
            write_json(run_dir / "classes.json", self.class_names)
        return {}

    def serving_endpoints(self) -> dict[str, tuple[Any, list[Any]]]:
        """The signatures a SavedModel export of the classifier offers.

        `serve(images)`: float32 images `(batch, height, width, channels)` in [0, 1], the
        shape the model trained on -> float32 class probabilities `(batch, classes)`.

        Returns:
            `{name: (function, input specs)}` for the export.
        """
        spec = keras.InputSpec(shape=(None, *self.image_shape), dtype="float32")

        def serve(images: Any) -> Any:
            return self(images, training=False)

        return {"serve": (serve, [spec])}

    def compile_defaults(self) -> dict[str, Any]:
        """The loss and metrics a tapefit run compiles the classifier with by default.

        They apply unless the config names others (`compile.loss`, `compile.metrics`): what
        the model needs comes with it, so a subclass named by `model._target_` trains with no
        other config.

        Returns:
            `{"loss": ..., "metrics": [...]}` for `Model.compile`.
        """
        return {"loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]}

    def prediction_columns(self, images: Any, probabilities: Any) -> dict[str, Any]:
        """The columns `python -m tapefit.predict` writes for a batch of images.

        The predicted label (its class name when the data named the classes), then each
        class's probability.

        Args:
            images: The batch's images (unused: a row is identified by its position).
            probabilities: The model's softmax outputs, `(batch, num_classes)`.

        Returns:
            `{"label": ..., "prob_<class>": ...}`, one value per image each.

        Examples:
            >>> import numpy as np
            >>> from tapefit import Classifier
        >>> model = Classifier(image_shape=(8, 8, 1), num_classes=2, architecture="mlp")
            >>> model.prediction_columns(None, np.array([[0.2, 0.8]]))["label"]
            [1]
        """
        names = self.class_names or [str(i) for i in range(self.num_classes)]
        probabilities = keras.ops.convert_to_numpy(probabilities)
        picked = probabilities.argmax(axis=-1).tolist()
        columns: dict[str, Any] = {
            "label": [names[i] for i in picked] if self.class_names else picked
        }
        for index, name in enumerate(names):
            columns[f"prob_{name}"] = probabilities[:, index].tolist()
        return columns
