"""Epoch-level pair metrics over a whole split (rank correlations and AUC are not batch-additive).

`SplitMetrics` is a callback that predicts the validation split at each epoch end and adds
`val_<metric>` to the epoch logs, so History, TensorBoard, CSVLogger and EarlyStopping all see
them. It must come before those in the callback list: the run puts a model's
`training_callbacks` first (`tapefit.runner.callback_order`).
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


def best_threshold_f1(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The highest F1 any threshold `score >= t` reaches, and that threshold.

    Args:
        scores: Similarities, one per pair.
        labels: Binary labels (1: same).

    Returns:
        `(f1, threshold)`; `(0.0, +inf-like)` when there is no positive label.

    Example:
        >>> import numpy as np
        >>> best_threshold_f1(np.array([0.9, 0.8, 0.3, 0.1]), np.array([1, 0, 1, 0]))
        (0.8, 0.3)
    """
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_labels = scores[order], labels[order].astype(bool)
    positives = int(sorted_labels.sum())
    if positives == 0:
        return 0.0, float(np.nextafter(sorted_scores[0], np.inf))
    true_positives = np.cumsum(sorted_labels)  # predicting the top k + 1 as positive
    predicted = np.arange(1, len(scores) + 1)
    f1 = 2 * true_positives / (predicted + positives)
    cut_allowed = np.concatenate([sorted_scores[:-1] != sorted_scores[1:], [True]])
    f1 = np.where(cut_allowed, f1, -1.0)
    best = int(np.argmax(f1))
    return float(f1[best]), float(sorted_scores[best])


def at_threshold(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of predicting `score >= threshold` as a positive.

    Why: a threshold chosen on the test split flatters the test score; a run picks it on
    validation and reports the test split at that threshold.

    Args:
        scores: Similarities, one per pair.
        labels: Binary labels (1: same).
        threshold: Pairs scoring at least this are predicted positive.

    Returns:
        `accuracy`, `precision`, `recall`, `f1` (0.0 where undefined).

    Example:
        >>> import numpy as np
        >>> at_threshold(np.array([0.9, 0.8, 0.3, 0.1]), np.array([1, 0, 1, 0]), 0.5)["f1"]
        0.5
    """
    predicted, actual = scores >= threshold, labels.astype(bool)
    true_positives = float(np.sum(predicted & actual))
    precision = true_positives / max(int(predicted.sum()), 1)
    recall = true_positives / max(int(actual.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = float(np.mean(predicted == actual))
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1}


def threshold_report(
    val_scores: np.ndarray, val_labels: np.ndarray, scores: np.ndarray, labels: np.ndarray
) -> dict[str, float]:
    """The thresholds that maximise accuracy and F1 on validation, and the test split's
    accuracy and F1 at them.

    Args:
        val_scores: Validation similarities.
        val_labels: Validation binary labels.
        scores: Test similarities.
        labels: Test binary labels.

    Returns:
        `threshold_accuracy`, `threshold_f1` (chosen on validation),
        `test_accuracy_at_val_threshold`, `test_f1_at_val_threshold`.

    Example:
        >>> import numpy as np
        >>> val = np.array([0.9, 0.2]), np.array([1, 0])
        >>> report = threshold_report(*val, np.array([0.95, 0.85, 0.1]), np.array([1, 0, 0]))
        >>> report["threshold_accuracy"], report["test_accuracy_at_val_threshold"]
        (0.9, 1.0)
    """
    val_scores = np.asarray(val_scores, "float64").ravel()
    val_labels = np.asarray(val_labels, "float64").ravel()
    scores = np.asarray(scores, "float64").ravel()
    labels = np.asarray(labels, "float64").ravel()
    accuracy_cut = best_threshold_accuracy(val_scores, val_labels)[1]
    f1_cut = best_threshold_f1(val_scores, val_labels)[1]
    return {
        "threshold_accuracy": accuracy_cut,
        "threshold_f1": f1_cut,
        "test_accuracy_at_val_threshold": at_threshold(scores, labels, accuracy_cut)["accuracy"],
        "test_f1_at_val_threshold": at_threshold(scores, labels, f1_cut)["f1"],
    }


def graded_metrics(scores: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman of cosine against graded gold labels."""
    return {"pearson": pearson(scores, gold), "spearman": spearman(scores, gold)}


def binary_metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """ROC-AUC, the accuracy and F1 at their best thresholds on this split, and the accuracy's
    threshold."""
    accuracy, threshold = best_threshold_accuracy(scores, labels)
    return {
        "auc": roc_auc(scores, labels),
        "best_accuracy": accuracy,
        "best_f1": best_threshold_f1(scores, labels)[0],
        "best_threshold": threshold,
    }


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
        graded = self.label_type == "graded"
        names = ("pearson", "spearman") if graded else ("auc", "best_accuracy", "best_f1")
        return [f"{self.prefix}{name}" for name in names]

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is None:
            return
        scores = self.model.predict(self.inputs, verbose=0)
        metrics = pair_metrics(scores, self.labels, self.label_type)
        metrics.pop("best_threshold", None)  # a threshold is not a quality to monitor
        logs.update({f"{self.prefix}{name}": value for name, value in metrics.items()})
