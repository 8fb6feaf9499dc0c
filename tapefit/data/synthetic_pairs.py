"""Seeded, generated sentence pairs with a learnable similarity signal (plainly synthetic).

Each sentence expresses a set of *concepts*; every concept has several surface words
(synonyms). A pair shares some concepts and not others; its graded label is
`5 * Jaccard(concepts_a, concepts_b)`, its binary label `Jaccard >= 0.5`. The second sentence is
a paraphrase: synonyms substituted, neighbouring words swapped, filler words inserted or
dropped. A model scores well only by learning which words mean the same thing.
"""

from __future__ import annotations

import numpy as np

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
FILLERS = ("the", "a", "of", "and", "to", "in", "is", "it", "that", "with")
# Graded labels span this range (the STS convention); binary labels are 1 from its midpoint up.
GRADED_RANGE = (0.0, 5.0)
BINARY_RANGE = (0.0, 1.0)


def binary_labels(graded: np.ndarray) -> np.ndarray:
    """Same (1) when the concept overlap is at least one half, else different (0)."""
    return (graded >= sum(GRADED_RANGE) / 2).astype("float32")


def _make_words(count: int, rng: np.random.Generator) -> list[str]:
    """`count` distinct pronounceable pseudo-words (two or three syllables)."""
    words: set[str] = set()
    while len(words) < count:
        syllables = rng.integers(2, 4)
        words.add(
            "".join(
                rng.choice(list(CONSONANTS)) + rng.choice(list(VOWELS)) for _ in range(syllables)
            )
        )
    return sorted(words)


class PairGenerator:
    """Draws synthetic pairs from a fixed lexicon of topics, concepts and synonyms."""

    def __init__(
        self,
        seed: int,
        topics: int = 8,
        concepts_per_topic: int = 25,
        synonyms: int = 2,
        min_concepts: int = 3,
        max_concepts: int = 7,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        lexicon_rng = np.random.default_rng(10_000 + seed)
        n_concepts = topics * concepts_per_topic
        words = _make_words(n_concepts * synonyms, lexicon_rng)
        lexicon_rng.shuffle(words)
        self.surface = np.array(words).reshape(n_concepts, synonyms)
        self.surface_words = self.surface.tolist()  # Python strings: fast to index and join
        self.concepts_per_topic, self.topics = concepts_per_topic, topics
        self.min_concepts, self.max_concepts = min_concepts, max_concepts

    def _concepts(self, topic: int, size: int, exclude: set[int] = frozenset()) -> list[int]:
        start = topic * self.concepts_per_topic
        pool = [c for c in range(start, start + self.concepts_per_topic) if c not in exclude]
        return self.rng.choice(pool, size=min(size, len(pool)), replace=False).tolist()

    def _realise(self, concepts: list[int], edits: bool) -> str:
        """Words for `concepts`: random synonyms, light reordering and filler words.

        `sequence[integers(0, len(sequence))]` draws what `rng.choice(sequence)` draws, from the
        same stream, in a fifth of the time (this loop runs once per sentence).
        """
        integers, surface = self.rng.integers, self.surface_words
        words = [surface[c][integers(0, len(surface[c]))] for c in concepts]
        if edits:
            for i in range(len(words) - 1):
                if self.rng.random() < 0.3:
                    words[i], words[i + 1] = words[i + 1], words[i]
        for _ in range(integers(0, 3)):
            words.insert(int(integers(0, len(words) + 1)), FILLERS[integers(0, len(FILLERS))])
        return " ".join(words)

    def pair(self) -> tuple[str, str, float]:
        """One pair and its graded label in `GRADED_RANGE`."""
        rng = self.rng
        topic = int(rng.integers(0, self.topics))
        first = self._concepts(topic, int(rng.integers(self.min_concepts, self.max_concepts + 1)))
        kept = first[: int(rng.integers(0, len(first) + 1))]
        size = int(rng.integers(self.min_concepts, self.max_concepts + 1))
        other_topic = topic if rng.random() < 0.5 else int(rng.integers(0, self.topics))
        fresh = self._concepts(other_topic, max(size - len(kept), 0), exclude=set(first))
        second = kept + fresh
        rng.shuffle(second)
        union = set(first) | set(second)
        low, high = GRADED_RANGE
        label = low + (high - low) * len(set(first) & set(second)) / len(union)
        return self._realise(first, edits=False), self._realise(second, edits=True), label

    def pairs(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`count` pairs as arrays `(texts_a, texts_b, graded_labels)`."""
        rows = [self.pair() for _ in range(count)]
        texts_a, texts_b, labels = zip(*rows, strict=True)
        return (
            np.array(texts_a, dtype=object),
            np.array(texts_b, dtype=object),
            np.array(labels, dtype="float32"),
        )
