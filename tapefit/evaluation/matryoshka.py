"""Each Matryoshka dimension evaluated on its own: a model trained with
`model.loss.matryoshka_dims` reports its pair metrics (`val_spearman_64`, ...) and retrieval
metrics (`val_ndcg_at_10_64`, ...) for the leading `dim` components of its embeddings, as
sentence-transformers' Matryoshka evaluators do, beside the full width's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from tapefit.errors import TapefitError
from tapefit.evaluation.metrics import pair_metrics
from tapefit.evaluation.retrieval import RANKS, RetrievalTask, evaluate_task


def leading_components(vectors: np.ndarray, dim: int, normalize: bool = True) -> np.ndarray:
    """The first `dim` components of each vector (a Matryoshka embedding's smaller size),
    L2-normalised again unless `normalize` is False.

    Raises:
        TapefitError: `dim` is not between 1 and the vectors' width.

    Examples:
        >>> leading_components(np.array([[3.0, 4.0, 12.0]]), 2).round(2).tolist()
        [[0.6, 0.8]]
    """
    width = vectors.shape[-1]
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= width:
        raise TapefitError(f"dim={dim} must be a whole number from 1 to the embeddings' {width}")
    leading = np.asarray(vectors)[:, :dim]
    if not normalize:
        return leading
    norms = np.linalg.norm(leading, axis=1, keepdims=True)
    return leading / np.maximum(norms, 1e-12)


def nested_pair_metrics(
    model: Any,
    texts: tuple[Sequence[Any], Sequence[Any]],
    labels: np.ndarray,
    label_type: str,
    dims: Sequence[int],
    prefix: str,
) -> dict[str, float]:
    """`<prefix><metric>_<dim>` of the pairs' cosines at each of `dims` leading components.

    Examples:
        >>> class Fixed:  # first component agrees, the rest disagrees
        ...     def encode(self, texts, batch_size=256, normalize=True):
        ...         return np.array([[1.0, float(t)] for t in texts])
        >>> got = nested_pair_metrics(
        ...     Fixed(), ([1, 2, 3], [-1, -2, -3]), np.array([0.0, 1, 2]), "graded", [1], "val_")
        >>> sorted(got)
        ['val_pearson_1', 'val_spearman_1']
    """
    vectors_a = np.asarray(model.encode(texts[0], batch_size=256, normalize=False))
    vectors_b = np.asarray(model.encode(texts[1], batch_size=256, normalize=False))
    results = {}
    for dim in dims:
        scores = np.sum(
            leading_components(vectors_a, dim) * leading_components(vectors_b, dim), axis=1
        )
        metrics = pair_metrics(scores, labels, label_type)
        metrics.pop("best_threshold", None)
        results.update({f"{prefix}{name}_{dim}": value for name, value in metrics.items()})
    return results


class _Truncated:
    """A model's `encode` at `dim` leading components: what `evaluate_task` calls."""

    def __init__(self, model: Any, dim: int) -> None:
        self.model, self.dim = model, dim

    def encode(self, texts: Sequence[Any], batch_size: int = 256) -> np.ndarray:
        return self.model.encode(texts, batch_size=batch_size, dim=self.dim)


def nested_retrieval_metrics(
    model: Any, task: RetrievalTask, dims: Sequence[int], prefix: str
) -> dict[str, float]:
    """`<prefix><metric>_<dim>` of the retrieval task at each of `dims` leading components."""
    results = {}
    for dim in dims:
        scored = evaluate_task(_Truncated(model, dim), task, prefix)
        results.update({f"{name}_{dim}": value for name, value in scored.items()})
    return results


class MatryoshkaMetrics(keras.callbacks.Callback):
    """Adds each Matryoshka dimension's pair metrics (and retrieval metrics, given a task) of
    the validation split to the epoch logs.

    Example:
        >>> callback = MatryoshkaMetrics((["a"], ["b"]), np.array([1.0]), "graded", [8])
        >>> callback.logged_names
        ['val_pearson_8', 'val_spearman_8']
    """

    def __init__(
        self,
        texts: tuple[Sequence[Any], Sequence[Any]],
        labels: np.ndarray,
        label_type: str,
        dims: Sequence[int],
        task: RetrievalTask | None = None,
        prefix: str = "val_",
    ) -> None:
        super().__init__()
        self.texts, self.labels, self.label_type = texts, labels, label_type
        self.dims, self.task, self.prefix = list(dims), task, prefix

    @property
    def logged_names(self) -> list[str]:
        """The keys this callback adds to the epoch logs."""
        graded = self.label_type == "graded"
        names = ["pearson", "spearman"] if graded else ["auc", "best_accuracy", "best_f1"]
        if self.task is not None:
            names += [*(f"recall_at_{k}" for k in RANKS), "mrr_at_10", "ndcg_at_10"]
        return [f"{self.prefix}{name}_{dim}" for dim in self.dims for name in names]

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is None:
            return
        logs.update(
            nested_pair_metrics(
                self.model, self.texts, self.labels, self.label_type, self.dims, self.prefix
            )
        )
        if self.task is not None:
            logs.update(nested_retrieval_metrics(self.model, self.task, self.dims, self.prefix))
