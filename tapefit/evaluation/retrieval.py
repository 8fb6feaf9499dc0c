"""Retrieval evaluation of a pair encoder: rank a whole corpus for each query and score the
ranks of the relevant texts (recall@k, MRR@10, NDCG@10), as sentence-transformers'
`InformationRetrievalEvaluator` does.

Why: a pair's similarity score says whether the model orders pairs well (Spearman); a search
asks whether, among every text of a corpus, the relevant ones come first. Scores are computed
for a block of queries against the whole corpus at a time (one matrix product per block), so
10k x 10k fits in memory and takes seconds, never one pair at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from tapefit.errors import TapefitError

RANKS = (1, 5, 10)  # the recall@k cut-offs
DEPTH = 10  # MRR and NDCG look at the first DEPTH ranks


@dataclass(frozen=True)
class RetrievalTask:
    """Queries, a corpus and which corpus texts are relevant to each query.

    Attributes:
        queries: The query texts.
        corpus: The texts ranked for every query.
        relevant: For each query, the indices into `corpus` of its relevant texts (non-empty).
    """

    queries: list[str]
    corpus: list[str]
    relevant: list[frozenset[int]]


def pair_task(
    texts_a: Sequence[Any],
    texts_b: Sequence[Any],
    labels: Sequence[float],
    label_type: str,
    positive_label: float,
) -> RetrievalTask:
    """The retrieval task a pair split holds: every distinct `texts_b` is the corpus; each
    distinct `texts_a` of a positive pair is a query whose relevant texts are its positive
    partners.

    Args:
        texts_a: The pairs' first texts.
        texts_b: The pairs' second texts.
        labels: The pairs' labels.
        label_type: `graded` (a pair is positive when its label is at least `positive_label`)
            or `binary` (when its label is 1).
        positive_label: The graded label from which a pair counts as relevant.

    Returns:
        The task; its corpus keeps the order in which texts first appear.

    Raises:
        TapefitError: the split has no positive pair.

    Example:
        >>> task = pair_task(["q1", "q1", "q2"], ["d1", "d2", "d1"], [5, 4, 1], "graded", 4)
        >>> task.queries, task.corpus, [sorted(r) for r in task.relevant]
        (['q1'], ['d1', 'd2'], [[0, 1]])
    """
    corpus_index: dict[str, int] = {}
    for text in texts_b:
        corpus_index.setdefault(_text(text), len(corpus_index))
    relevant: dict[str, set[int]] = {}
    for a, b, label in zip(texts_a, texts_b, labels, strict=True):
        positive = label >= positive_label if label_type == "graded" else label == 1
        if positive:
            relevant.setdefault(_text(a), set()).add(corpus_index[_text(b)])
    if not relevant:
        rule = f"label >= {positive_label}" if label_type == "graded" else "label 1"
        raise TapefitError(
            f"retrieval needs positive pairs ({rule}) and this split has none: lower "
            "model.retrieval.positive_label or turn model.retrieval.enabled off"
        )
    return RetrievalTask(
        list(relevant), list(corpus_index), [frozenset(r) for r in relevant.values()]
    )


def retrieval_metrics(
    query_vectors: Any,
    corpus_vectors: Any,
    relevant: Sequence[frozenset[int]],
    block: int = 1024,
) -> dict[str, float]:
    """Recall@1/5/10, MRR@10 and NDCG@10 of ranking the corpus by dot product per query.

    With L2-normalised vectors (`SiameseModel.encode`) the dot product is the cosine. Recall@k
    is the share of a query's relevant texts in its first k; MRR@10 the reciprocal rank of the
    first relevant text within 10 (0 beyond); NDCG@10 the discounted gain of the relevant
    texts in the first 10 over the best possible. Each is the mean over queries.

    Args:
        query_vectors: `(queries, dim)`.
        corpus_vectors: `(corpus, dim)`.
        relevant: For each query, the corpus indices relevant to it.
        block: Queries scored per matrix product (memory: block x corpus floats).

    Returns:
        `recall_at_1`, `recall_at_5`, `recall_at_10`, `mrr_at_10`, `ndcg_at_10`.

    Raises:
        TapefitError: the counts of queries and relevance sets differ, or a query has none.

    Example:
        >>> import numpy as np
        >>> corpus = np.eye(3)
        >>> queries = np.array([[0.0, 1.0, 0.1], [1.0, 0.0, 0.5]])  # ranks 1, 2, 0 and 0, 2, 1
        >>> metrics = retrieval_metrics(queries, corpus, [frozenset({1}), frozenset({2})])
        >>> metrics["recall_at_1"], metrics["mrr_at_10"]  # the second query's text ranks 2nd
        (0.5, 0.75)
    """
    queries = np.asarray(query_vectors, "float32")
    corpus = np.asarray(corpus_vectors, "float32")
    if len(queries) != len(relevant) or not all(relevant):
        raise TapefitError(
            f"retrieval_metrics needs one non-empty relevance set per query; got {len(queries)} "
            f"queries and {len(relevant)} sets"
        )
    depth = min(DEPTH, len(corpus))
    discounts = 1.0 / np.log2(np.arange(2, depth + 2))
    totals = dict.fromkeys([*(f"recall_at_{k}" for k in RANKS), "mrr_at_10", "ndcg_at_10"], 0.0)
    for start in range(0, len(queries), block):
        scores = queries[start : start + block] @ corpus.T
        top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        ranked = np.take_along_axis(top, order, axis=1)
        for row, wanted in zip(ranked, relevant[start : start + block], strict=True):
            hits = np.isin(row, list(wanted))
            for k in RANKS:
                totals[f"recall_at_{k}"] += hits[:k].sum() / len(wanted)
            if hits.any():
                totals["mrr_at_10"] += 1.0 / (int(np.argmax(hits)) + 1)
            ideal = discounts[: min(len(wanted), depth)].sum()
            totals["ndcg_at_10"] += float((hits * discounts).sum() / ideal)
    return {name: float(total / len(queries)) for name, total in totals.items()}


class RetrievalMetrics(keras.callbacks.Callback):
    """Adds `<prefix>recall_at_k`, `mrr_at_10` and `ndcg_at_10` of a split's retrieval task
    to the logs at the end of every epoch, from the model's `encode`.

    Args:
        task: The split's queries, corpus and relevance.
        prefix: Put before each name (`val_`).

    Example:
        >>> task = RetrievalTask(["a"], ["a", "b"], [frozenset({0})])
        >>> RetrievalMetrics(task).logged_names[-1]
        'val_ndcg_at_10'
    """

    def __init__(self, task: RetrievalTask, prefix: str = "val_") -> None:
        super().__init__()
        self.task, self.prefix = task, prefix

    @property
    def logged_names(self) -> list[str]:
        """The keys this callback adds to the epoch logs."""
        names = [*(f"recall_at_{k}" for k in RANKS), "mrr_at_10", "ndcg_at_10"]
        return [f"{self.prefix}{name}" for name in names]

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is None:
            return
        logs.update(evaluate_task(self.model, self.task, self.prefix))


def evaluate_task(model: Any, task: RetrievalTask, prefix: str = "") -> dict[str, float]:
    """Encode the task's queries and corpus with `model.encode` and score the ranking.

    Args:
        model: A model with `encode(texts, batch_size)` returning normalised vectors.
        task: The queries, corpus and relevance.
        prefix: Put before each metric's name (`test_`).

    Returns:
        The metrics of `retrieval_metrics`, named with `prefix`.

    Example:
        >>> import numpy as np
        >>> class Identity:
        ...     def encode(self, texts, batch_size=256):
        ...         return np.array([[1.0, 0.0] if t == "x" else [0.0, 1.0] for t in texts])
        >>> task = RetrievalTask(["x"], ["y", "x"], [frozenset({1})])
        >>> evaluate_task(Identity(), task, "test_")["test_recall_at_1"]
        1.0
    """
    metrics = retrieval_metrics(
        model.encode(task.queries, batch_size=256),
        model.encode(task.corpus, batch_size=256),
        task.relevant,
    )
    return {f"{prefix}{name}": value for name, value in metrics.items()}


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
