"""Pretrained word vectors (GloVe or word2vec text files) as the start of a text encoder's
embedding.

Why: a model trained from scratch on a few thousand pairs has seen each word a handful of
times; vectors trained on billions of words carry what the pairs cannot teach (InferSent's
BiLSTM starts from GloVe). The file is read once, when the model is built for a run: the
vectors then live in the model's weights, so a saved `.keras` file reloads without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tapefit.errors import TapefitError

log = logging.getLogger("tapefit")


@dataclass(frozen=True)
class VectorMatch:
    """Which vocabulary rows a vector file filled.

    Attributes:
        matrix: `(len(vocabulary), dim)`: the file's vector where the word was found, the
            initial row elsewhere.
        found: How many vocabulary words the file had.
        words: How many vocabulary words were looked up.
    """

    matrix: np.ndarray
    found: int
    words: int

    @property
    def share(self) -> float:
        """The share of the looked-up words the file had, in [0, 1]."""
        return self.found / max(self.words, 1)


def read_vectors(path: str | Path, wanted: set[str]) -> dict[str, np.ndarray]:
    """The vectors of the `wanted` words in a GloVe (`word v1 ... vd` per line) or word2vec
    text file (the same, after a `count dim` header line).

    Only wanted words are kept, so a multi-gigabyte file needs memory for the vocabulary
    alone. The first occurrence of a word counts; a word found only in another case
    ("Sat") stands for its lower-case form ("sat"), which Keras' vectoriser produces.

    Args:
        path: The text file (UTF-8).
        wanted: The words to keep.

    Returns:
        `{word: vector}` for the wanted words the file has.

    Raises:
        TapefitError: the file is missing, holds no vectors, a line's width differs from the
            first's, or a line's values are not numbers.

    Example:
        >>> import tempfile, pathlib
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "vectors.txt"
        >>> _ = file.write_text("cat 0.1 0.2\\ndog 0.3 0.4\\n")
        >>> found = read_vectors(file, {"dog", "emu"})
        >>> sorted(found), found["dog"].shape
        (['dog'], (2,))
    """
    path = Path(path)
    if not path.is_file():
        raise TapefitError(
            f"model.encoder.vectors={path}: no such file; give a GloVe or word2vec text file"
        )
    vectors: dict[str, np.ndarray] = {}
    exact: set[str] = set()
    width = None
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            parts = line.rstrip().split(" ")
            if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # word2vec's header: count and width
            if len(parts) < 2:
                continue
            if width is None:
                width = len(parts) - 1
            if len(parts) - 1 != width:
                raise TapefitError(
                    f"model.encoder.vectors={path}: line {number} has {len(parts) - 1} values, "
                    f"the first vector {width}; the file is not one vector per line"
                )
            word = parts[0]
            if word in wanted and word not in exact:  # the word as written wins
                vectors[word] = _numbers(parts[1:], path, number)
                exact.add(word)
            elif word.lower() in wanted and word.lower() not in vectors:  # "Sat" for "sat"
                vectors[word.lower()] = _numbers(parts[1:], path, number)
    if width is None:
        raise TapefitError(
            f"model.encoder.vectors={path} holds no vectors (it is empty, or not a text file "
            "of `word v1 ... vd` lines); give a GloVe or word2vec text file"
        )
    return vectors


def _numbers(values: list[str], path: Path, number: int) -> np.ndarray:
    try:
        return np.asarray(values, dtype="float32")
    except ValueError:
        raise TapefitError(
            f"model.encoder.vectors={path}: line {number} is not a word and numbers; give a "
            "GloVe or word2vec text file (a binary word2vec file must be converted to text)"
        ) from None


def match_vocabulary(
    path: str | Path,
    vocabulary: Sequence[str],
    initial: np.ndarray,
    first_word: int = 2,
    looked_up: Callable[[str], bool] | None = None,
) -> VectorMatch:
    """The embedding matrix with the file's vectors put in for the vocabulary's words.

    Args:
        path: The GloVe or word2vec text file.
        vocabulary: The embedding's rows as words, in order (Keras' `TextVectorization`
            vocabulary: padding and the OOV token first).
        initial: `(len(vocabulary), dim)`: the embedding's initial values, kept for words the
            file lacks.
        first_word: Rows before it (padding, OOV) are not words and are never looked up.
        looked_up: Which of the other rows are words to look up (a WordPiece vocabulary's
            word-start pieces, `tapefit.text.wordpiece.is_word_start`); None: all of them.

    Returns:
        The matrix and how many words were found.

    Raises:
        TapefitError: the file's vectors are not `dim` wide (naming the width to set), or
            it has none of the vocabulary's words.

    Example:
        >>> import tempfile, pathlib, numpy as np
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "glove.txt"
        >>> _ = file.write_text("cat 1 1\\nsat 2 2\\n")
        >>> match = match_vocabulary(file, ["", "[UNK]", "cat", "mat"], np.zeros((4, 2)))
        >>> match.matrix.tolist(), match.found, match.words
        ([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]], 1, 2)
    """
    rows = [
        (row, word)
        for row, word in enumerate(list(vocabulary)[first_word:], first_word)
        if looked_up is None or looked_up(word)
    ]
    vectors = read_vectors(path, {word for _, word in rows})
    matrix = np.array(initial, dtype="float32", copy=True)
    if vectors:
        width = len(next(iter(vectors.values())))
        if width != matrix.shape[1]:
            raise TapefitError(
                f"model.encoder.vectors={path} holds {width}-dimensional vectors but "
                f"model.encoder.embedding_dim={matrix.shape[1]}: set "
                f"model.encoder.embedding_dim={width}"
            )
    found = 0
    for row, word in rows:
        vector = vectors.get(word)
        if vector is not None:
            matrix[row] = vector
            found += 1
    if rows and not found:
        sample = ", ".join(word for _, word in rows[:5])
        raise TapefitError(
            f"model.encoder.vectors={path} has none of the vocabulary's {len(rows)} words "
            f"({sample}, ...): give vectors for the data's language (the words are matched as "
            "written, then lower-cased)"
        )
    return VectorMatch(matrix, found, len(rows))
