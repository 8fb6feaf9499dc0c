"""Hard negatives mined by a model, as sentence-transformers' `mine_hard_negatives` mines them:
for each anchor, the corpus texts the model ranks highest that are not its positive, skipping
those that score too close to the positive (likely positives nobody labelled).

Block-wise: queries are scored `block` at a time against the corpus `block` texts at a time,
keeping each query's running best candidates, so memory holds `block x block` scores, never
the whole `queries x corpus` matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tapefit.errors import TapefitError


@dataclass(frozen=True)
class MiningOptions:
    """Which candidates count as hard negatives.

    Attributes:
        num_negatives: Negatives kept per anchor.
        range_min: Skip the `range_min` highest-ranked candidates (0: none).
        range_max: Consider candidates up to this rank (after the positive is left out).
        margin: Keep a candidate only if its score is at most the positive's minus this
            (absolute); None: no such filter.
        relative_margin: Keep a candidate only if its score is at most the positive's times
            (1 - this); None: no such filter.
        block: Queries (and corpus texts) scored per matrix product.

    Examples:
        >>> MiningOptions(num_negatives=2, range_max=1)
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: range_max=1 must be at least range_min + num_negatives ...
    """

    num_negatives: int = 1
    range_min: int = 0
    range_max: int = 10
    margin: float | None = None
    relative_margin: float | None = None
    block: int = 1024

    def __post_init__(self) -> None:
        for name in ("num_negatives", "block"):
            if getattr(self, name) < 1:
                raise TapefitError(f"{name}={getattr(self, name)} must be at least 1")
        if self.range_min < 0:
            raise TapefitError(f"range_min={self.range_min} must be at least 0")
        if self.range_max < self.range_min + self.num_negatives:
            raise TapefitError(
                f"range_max={self.range_max} must be at least range_min + num_negatives "
                f"({self.range_min + self.num_negatives}): it bounds the ranks considered"
            )
        if self.relative_margin is not None and not 0 <= self.relative_margin < 1:
            raise TapefitError(f"relative_margin={self.relative_margin} must lie in [0, 1)")


@dataclass
class Mined:
    """Per anchor: the chosen negatives' corpus indices and scores (-1 / nan where fewer
    qualified), the positive's score and its rank among the corpus (1 = first)."""

    negatives: np.ndarray  # (anchors, num_negatives) corpus indices, -1: none
    negative_scores: np.ndarray  # (anchors, num_negatives)
    positive_scores: np.ndarray  # (anchors,)
    positive_ranks: np.ndarray  # (anchors,)


def mine(
    anchors: np.ndarray,
    positives: np.ndarray,
    corpus: np.ndarray,
    positive_index: Sequence[int],
    excluded: Sequence[frozenset[int]],
    options: MiningOptions,
) -> Mined:
    """Mine hard negatives from unit vectors.

    Args:
        anchors: `(n, dim)` anchor embeddings.
        positives: `(n, dim)` their positives' embeddings.
        corpus: `(m, dim)` candidate embeddings.
        positive_index: Each anchor's positive's index in `corpus` (-1: not in it).
        excluded: Per anchor, corpus indices never taken as its negative (texts equal to
            the anchor or to any of its positives).
        options: The filters.

    Returns:
        The chosen negatives, best first, and the positives' scores and ranks.

    Examples:
        >>> corpus = np.eye(3)
        >>> anchors = np.array([[0.9, 0.43, 0.0]])  # closest to text 0, then text 1
        >>> mined = mine(anchors, corpus[:1], corpus, [0], [frozenset({0})], MiningOptions())
        >>> mined.negatives.tolist(), mined.positive_ranks.tolist()
        ([[1]], [1])
    """
    # the positive and the excluded texts may take places among the best candidates
    depth = options.range_max + 1 + max((len(e) for e in excluded), default=0)
    count = len(anchors)
    best_scores = np.full((count, depth), -np.inf, "float32")
    best_index = np.full((count, depth), -1, "int64")
    positive_scores = np.sum(anchors * positives, axis=1).astype("float32")
    ranks = np.ones(count, "int64")
    for start in range(0, len(corpus), options.block):
        part = corpus[start : start + options.block]
        for first in range(0, count, options.block):
            rows = slice(first, first + options.block)
            scores = (anchors[rows] @ part.T).astype("float32")
            columns = np.arange(start, start + len(part))
            itself = columns[None, :] == np.asarray(positive_index)[rows, None]
            ranks[rows] += ((scores > positive_scores[rows, None]) & ~itself).sum(axis=1)
            merged_scores = np.concatenate([best_scores[rows], scores], axis=1)
            merged_index = np.concatenate(
                [
                    best_index[rows],
                    np.broadcast_to(np.arange(start, start + len(part)), scores.shape),
                ],
                axis=1,
            )
            keep = np.argsort(-merged_scores, axis=1, kind="stable")[:, :depth]
            best_scores[rows] = np.take_along_axis(merged_scores, keep, axis=1)
            best_index[rows] = np.take_along_axis(merged_index, keep, axis=1)
    negatives = np.full((count, options.num_negatives), -1, "int64")
    negative_scores = np.full((count, options.num_negatives), np.nan, "float32")
    for row in range(count):
        chosen = _choose(row, best_index[row], best_scores[row], positive_index, excluded,
                         positive_scores[row], options)  # fmt: skip
        for slot, (index, score) in enumerate(chosen):
            negatives[row, slot], negative_scores[row, slot] = index, score
    return Mined(negatives, negative_scores, positive_scores, ranks)


def _choose(
    row: int,
    indices: np.ndarray,
    scores: np.ndarray,
    positive_index: Sequence[int],
    excluded: Sequence[frozenset[int]],
    positive_score: float,
    options: MiningOptions,
) -> list[tuple[int, float]]:
    """One anchor's negatives among its ranked candidates, the filters applied in order."""
    ranked = [
        (int(i), float(s))
        for i, s in zip(indices, scores, strict=True)
        if i >= 0 and i != positive_index[row] and i not in excluded[row]
    ][options.range_min : options.range_max]
    if options.margin is not None:
        ranked = [(i, s) for i, s in ranked if s <= positive_score - options.margin]
    if options.relative_margin is not None:
        ceiling = positive_score * (1.0 - options.relative_margin)
        ranked = [(i, s) for i, s in ranked if s <= ceiling]
    return ranked[: options.num_negatives]
