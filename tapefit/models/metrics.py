"""Epoch-level pair metrics over a whole split (rank correlations and AUC are not batch-additive).

`SplitMetrics` is a callback that predicts the validation split at each epoch end and adds
`val_<metric>` to the epoch logs, so History, TensorBoard, CSVLogger and EarlyStopping all see
them. It must come before those in the callback list: `train.fit` puts a family's callbacks
first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score


def pearson(scores: np.ndarray, gold: np.ndarray) -> float:
    """Pearson correlation; 0.0 when either side is constant (no linear signal)."""
    if np.std(scores) == 0 or np.std(gold) == 0:
        return 0.0
    return float(stats.pearsonr(scores, gold).statistic)


def spearman(scores: np.ndarray, gold: np.ndarray) -> float:
    """Spearman rank correlation; 0.0 when either side is constant."""
    if np.std(scores) == 0 or np.std(gold) == 0:
        return 0.0
    return float(stats.spearmanr(scores, gold).statistic)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of scores against binary labels (0.5 if one class only)."""
    if len(np.unique(labels)) < 2:
        return 0.5
    return float(roc_auc_score(labels, scores))


def best_threshold_accuracy(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The highest accuracy any threshold `score >= t` reaches, and that threshold."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_labels = scores[order], labels[order].astype(bool)
    # Predicting the top k as positive: correct = positives among them + negatives after them.
    true_positives = np.concatenate([[0], np.cumsum(sorted_labels)])
    negatives_in_top = np.concatenate([[0], np.cumsum(~sorted_labels)])
    correct = true_positives + (np.sum(~sorted_labels) - negatives_in_top)
    # Only cut between different scores, so a threshold separates exactly the top k.
    k_allowed = np.concatenate([[True], sorted_scores[:-1] != sorted_scores[1:], [True]])
    correct = np.where(k_allowed, correct, -1)
    best = int(np.argmax(correct))
    # Predicting no positive at all: the threshold just above the highest score (finite).
    cut = sorted_scores[best - 1] if best else np.nextafter(sorted_scores[0], np.inf)
    threshold = float(cut)
    return float(correct[best] / len(labels)), threshold


def graded_metrics(scores: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman of cosine against graded gold labels."""
    return {"pearson": pearson(scores, gold), "spearman": spearman(scores, gold)}


def binary_metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """ROC-AUC and the accuracy at the best threshold, with that threshold."""
    accuracy, threshold = best_threshold_accuracy(scores, labels)
    return {"auc": roc_auc(scores, labels), "best_accuracy": accuracy, "best_threshold": threshold}


def pair_metrics(scores: np.ndarray, labels: np.ndarray, label_type: str) -> dict[str, float]:
    """The metrics that fit `label_type` (`graded` or `binary`)."""
    compute: Callable = graded_metrics if label_type == "graded" else binary_metrics
    return compute(np.asarray(scores, "float64").ravel(), np.asarray(labels, "float64").ravel())


class SplitMetrics(keras.callbacks.Callback):
    """Adds `<prefix><metric>` for a whole split to the logs at the end of every epoch."""

    def __init__(self, inputs: Any, labels: np.ndarray, label_type: str, prefix: str = "val_"):
        super().__init__()
        self.inputs, self.labels = inputs, labels
        self.label_type, self.prefix = label_type, prefix

    @property
    def logged_names(self) -> list[str]:
        """The keys this callback adds to the epoch logs."""
        names = ("pearson", "spearman") if self.label_type == "graded" else ("auc", "best_accuracy")
        return [f"{self.prefix}{name}" for name in names]

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is None:
            return
        scores = self.model.predict(self.inputs, verbose=0)
        metrics = pair_metrics(scores, self.labels, self.label_type)
        metrics.pop("best_threshold", None)  # a threshold is not a quality to monitor
        logs.update({f"{self.prefix}{name}": value for name, value in metrics.items()})
