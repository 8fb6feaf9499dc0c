"""How a `SiameseModel` is evaluated beyond a batch: the callbacks that add whole-split
correlation or AUC (and retrieval metrics) to the epoch logs, and the test report, which also
writes `similarity.png` into the run directory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import keras

from tapefit.evaluation.matryoshka import (
    MatryoshkaMetrics,
    nested_pair_metrics,
    nested_retrieval_metrics,
)
from tapefit.evaluation.metrics import SplitMetrics, pair_metrics, threshold_report
from tapefit.evaluation.retrieval import RetrievalMetrics, RetrievalTask, evaluate_task
from tapefit.models.plots import plot_similarity

# A split's arrays `(texts_a, texts_b, labels)` -> its retrieval task (`retrieval_task`)
TaskOf = Callable[[Any], RetrievalTask]


def validation_callbacks(
    data: Any, retrieval_task: TaskOf | None, dims: Sequence[int] = ()
) -> list[keras.callbacks.Callback]:
    """Whole-validation-split correlation (graded) or AUC (binary), and retrieval metrics.

    Args:
        data: The run's data object.
        retrieval_task: Makes a split's retrieval task; None: no retrieval metrics.
        dims: Matryoshka dimensions, each reported on its own (`val_spearman_64`, ...).

    Returns:
        The callbacks to add (none without a validation split in memory).

    Examples:
        >>> from types import SimpleNamespace
        >>> validation_callbacks(SimpleNamespace(val=None), None)
        []
    """
    if data.val is None or "val" not in getattr(data, "splits", {}):
        return []
    labels = data.splits["val"].labels
    callbacks = [SplitMetrics(data.inputs("val"), labels, data.label_type, prefix="val_")]
    task = retrieval_task(data.splits["val"]) if retrieval_task is not None else None
    if task is not None:
        callbacks.append(RetrievalMetrics(task, "val_"))
    if dims:
        texts = tuple(data.splits["val"].texts[:2])
        callbacks.append(MatryoshkaMetrics(texts, labels, data.label_type, dims, task, "val_"))
    return callbacks


def pair_report(
    model: keras.Model,
    data: Any,
    run_dir: Path,
    retrieval_task: TaskOf | None,
    dims: Sequence[int] = (),
) -> dict[str, Any]:
    """Test-split metrics, `similarity.png`, and the lines the reader skipped.

    Args:
        model: The trained model; its `predict` scores the pairs, its `encode` the
            retrieval task.
        data: The run's data object.
        run_dir: The run directory, where `similarity.png` is written.
        retrieval_task: Makes a split's retrieval task; None: no retrieval metrics.
        dims: Matryoshka dimensions, each reported on its own (`test_spearman_64`, ...).

    Returns:
        `test_<metric>` values and `skipped_lines`.

    Examples:
        >>> from types import SimpleNamespace
        >>> data = SimpleNamespace(splits={}, read_counts=lambda: {"skipped_lines": 0})
        >>> pair_report(None, data, Path("."), None)  # no test split: nothing to score
        {'skipped_lines': 0}
    """
    report: dict[str, Any] = dict(data.read_counts())
    if "test" not in data.splits:  # streamed data without data.test_path
        return report
    scores = model.predict(data.inputs("test"), verbose=0)
    gold = data.splits["test"].labels
    plot_similarity(scores, gold, data.label_type, run_dir / "similarity.png")
    metrics = pair_metrics(scores, gold, data.label_type)
    report.update({f"test_{name}": value for name, value in metrics.items()})
    if data.label_type == "binary" and "val" in data.splits:  # thresholds from validation
        val_scores = model.predict(data.inputs("val"), verbose=0)
        report.update(threshold_report(val_scores, data.splits["val"].labels, scores, gold))
    task = retrieval_task(data.splits["test"]) if retrieval_task is not None else None
    if task is not None:
        report.update(evaluate_task(model, task, "test_"))
    if dims:
        texts = tuple(data.splits["test"].texts[:2])
        report.update(nested_pair_metrics(model, texts, gold, data.label_type, dims, "test_"))
        if task is not None:
            report.update(nested_retrieval_metrics(model, task, dims, "test_"))
    return report
