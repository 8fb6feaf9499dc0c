"""The hooks a tapefit run calls on `SiameseModel` (`tapefit.protocols`): its options checked
before anything is built, the default objective and loss, the validation callbacks, the test
report, the prediction columns and the serving signatures.

They live here, as a mixin `SiameseModel` inherits, so that the model's module holds what the
model is (encoding, the tape step, fine-tuning, use) and this one what a run asks of it. The
hooks work from the model's settings (`loss_settings`, `label_range`, `label_type`,
`hard_negatives`, `retrieval_settings`, `matryoshka_dims`) and, for the report, its `predict`
and `encode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import keras
import numpy as np

from tapefit.errors import TapefitError
from tapefit.evaluation.retrieval import RetrievalTask, pair_task
from tapefit.models.siamese_evaluation import pair_report, validation_callbacks
from tapefit.models.siamese_inference import prediction_columns, serving_endpoints
from tapefit.models.siamese_options import check_siamese_options, configured_pair_loss


class SiameseRunHooks:
    """What a tapefit run asks of `SiameseModel`; every hook is optional for a model of
    your own (`tapefit.protocols`).

    Examples:
        >>> from tapefit import SiameseModel
        >>> issubclass(SiameseModel, SiameseRunHooks)
        True
        >>> SiameseModel.default_objective({"label_type": "graded"})
        'val_spearman'
    """

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse encoder sizes and dropout no model can use, before anything is built.

        A run calls it on the configured arguments before loading data, so a bad value
        fails in a second with a message naming its config key.

        Args:
            options: The configured constructor arguments (`encoder`, `loss`, `retrieval`,
                `tokenizer`).

        Raises:
            TapefitError: naming the key, e.g. `model.encoder.units=0 must be at least 1`.
        """
        check_siamese_options(options)

    @classmethod
    def default_objective(cls, data: Mapping[str, Any]) -> str:
        """The metric a run selects on when the config names none.

        Args:
            data: The configured data options; their `label_type` decides, and pair files
                without labels (`label_column: null`, every pair positive), which leave no
                correlation to rank on, select on the validation loss.

        Returns:
            `val_spearman` for graded labels, `val_auc` for binary ones, `val_loss` without
            labels.

        Examples:
            >>> from tapefit import SiameseModel
            >>> SiameseModel.default_objective({"label_type": "binary"})
            'val_auc'
            >>> SiameseModel.default_objective({"label_column": None})
            'val_loss'
        """
        if "label_column" in data and data["label_column"] is None:
            return "val_loss"
        return "val_auc" if data.get("label_type") == "binary" else "val_spearman"

    def prediction_columns(self, pairs: Any, similarities: Any) -> dict[str, Any]:
        """The columns `python -m tapefit.predict` writes for a batch of pairs.

        Both texts (when the inputs are raw strings), then their cosine similarity.

        Args:
            pairs: `(texts_a, texts_b)` of the batch.
            similarities: The model's outputs, one cosine per pair.

        Returns:
            `{"text1": ..., "text2": ..., "similarity": ...}` (no texts for token ids).
        """
        return prediction_columns(pairs, similarities)

    def similarity_to_label(self, similarities: Any) -> np.ndarray:
        """Similarities on the labels' scale (`label_range`), as a `cosine_mse` run learnt it.

        The inverse of the loss's rescaling, clipped to the range
        (`python -m tapefit.predict ... scale=label`).

        Args:
            similarities: The model's outputs, one cosine per pair.

        Returns:
            One label-scale score per pair.

        Raises:
            TapefitError: the model's loss is not `cosine_mse` (it ranks pairs without
                regressing the labels, so no scale was learnt).

        Examples:
            >>> from tapefit import SiameseModel
            >>> model = SiameseModel(vocabulary=["a"], label_range=[0.0, 5.0])
            >>> model.similarity_to_label([0.2, 0.9]).round(6).tolist()
            [1.0, 4.5]
        """
        loss = self.compile_defaults()["loss"]
        to_label_scale = getattr(loss, "to_label_scale", None)
        if to_label_scale is None:
            raise TapefitError(
                f"scale=label: model.loss.name={self.loss_settings.get('name')} learns "
                "similarities that rank pairs, not the labels' scale; only cosine_mse regresses "
                "the cosine onto the labels: leave scale= out, or train with "
                "model.loss.name=cosine_mse"
            )
        return to_label_scale(similarities)

    def compile_defaults(self) -> dict[str, Any]:
        """The pair loss a tapefit run compiles the model with unless the config names one.

        `loss.name` (cosine_mse unless configured), scaled from the labels' range and
        checked to fit the labels' type.

        Returns:
            `{"loss": ...}` for `Model.compile`.

        Raises:
            TapefitError: for a loss that needs the other kind of labels, naming both fixes,
                or hard negatives for a loss that cannot use them.
        """
        loss = configured_pair_loss(
            self.loss_settings, self.label_range, self.label_type, self.hard_negatives
        )
        return {"loss": loss}

    def training_callbacks(self, data: Any) -> list[keras.callbacks.Callback]:
        """Whole-validation-split correlation (graded) or AUC (binary) in the epoch logs.

        Per-batch means of a rank correlation are not the split's correlation, so a callback
        computes it once per epoch on the whole validation split.

        Args:
            data: The run's data object.

        Returns:
            The callbacks to add (none without a validation split in memory).
        """
        task = self.retrieval_task if self.retrieval_settings.get("enabled") else None
        return validation_callbacks(data, task, self.matryoshka_dims)

    def retrieval_task(self, split: Any) -> RetrievalTask:
        """The retrieval task of a split (a `PairSplit`: `texts_a`, `texts_b`, `labels`).

        Its `texts_b` are the corpus; each `texts_a` of a positive pair (graded label at
        least `model.retrieval.positive_label`, or binary 1) is a query.

        Args:
            split: The split's arrays.

        Returns:
            The queries, corpus and relevance `RetrievalMetrics` and `report` score.
        """
        positive = float(self.retrieval_settings.get("positive_label", 4.0))
        return pair_task(
            split.texts_a,
            split.texts_b,
            split.labels,
            label_type=self.label_type,
            positive_label=positive,
        )

    def report(self, data: Any, run_dir: Path) -> dict[str, Any]:
        """Test-split metrics, `similarity.png`, and the lines the reader skipped.

        The metrics: correlation (graded); or AUC, best accuracy and F1, and the test
        accuracy and F1 at the thresholds chosen on validation (binary); and retrieval
        metrics when `model.retrieval.enabled`.

        A run calls it after training and adds the metrics to `metrics.json`.

        Args:
            data: The run's data object.
            run_dir: The run directory, where `similarity.png` is written.

        Returns:
            `test_<metric>` values and `skipped_lines`.
        """
        task = self.retrieval_task if self.retrieval_settings.get("enabled") else None
        return pair_report(self, data, run_dir, task, self.matryoshka_dims)

    def serving_endpoints(self) -> dict[str, tuple[Any, list[Any]]]:
        """The signatures a SavedModel export of the model offers.

        `serve(texts_a, texts_b)`: two string tensors `(batch,)`, the raw texts of each pair
        -> float32 cosine similarity `(batch,)`; `encode(texts)`: strings `(batch,)` ->
        L2-normalised float32 embeddings `(batch, dim)`. The vectoriser is inside both. With
        `tokenizer="wordpiece"` it runs tensorflow-text ops: a serving process must
        `import tensorflow_text` before `tf.saved_model.load` (else: "Op type not
        registered 'RegexSplitWithOffsets'").

        Returns:
            `{name: (function, input specs)}` for the export.
        """
        return serving_endpoints(self)
