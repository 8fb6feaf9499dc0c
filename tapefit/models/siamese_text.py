"""How a `SiameseModel`'s texts become ids: the tokenizer chosen (Keras' `TextVectorization`
or keras-hub's `WordPieceTokenizer`) and its vocabulary learnt, pretrained word vectors put in
for that vocabulary, and one fingerprint per text for the losses that tell texts apart."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf
from keras import layers

from tapefit.text.vocabulary import adapt_vocabulary
from tapefit.text.word_vectors import match_vocabulary
from tapefit.text.wordpiece import (
    Tokenizer,
    is_word_start,
    learn_wordpiece_vocabulary,
    wordpiece_layer,
)

log = logging.getLogger("tapefit")

FINGERPRINT_BUCKETS = 2**24  # exact in float32, which Keras losses cast labels to


def text_fingerprint(texts: tf.Tensor) -> tf.Tensor:
    """An integer id per text (raw strings or token-id rows); equal texts get equal ids.

    In-batch-negative losses compare these ids to tell a repeated text from a negative.

    Args:
        texts: Strings `(batch,)`, or token ids `(batch, time)`.

    Returns:
        int64 ids `(batch,)` below 2**24 (exact in float32).

    Examples:
        >>> ids = text_fingerprint(tf.constant(["a cat", "a dog", "a cat"])).numpy()
        >>> bool(ids[0] == ids[2]), bool(ids[0] == ids[1])
        (True, False)
    """
    if texts.dtype != tf.string:
        texts = tf.strings.reduce_join(tf.strings.as_string(texts), axis=-1, separator=" ")
    return tf.strings.to_hash_bucket_fast(texts, FINGERPRINT_BUCKETS)


def learn_vocabulary(
    texts: Sequence[str],
    tokenizer: Tokenizer,
    max_tokens: int | None,
    wordpiece_vocabulary_size: int,
) -> list[str]:
    """The vocabulary `tokenizer` learns on `texts`.

    Args:
        texts: The training texts (both sides of every pair).
        tokenizer: `word` (a `TextVectorization`'s words, most frequent first) or
            `wordpiece` (keras-hub's `compute_word_piece_vocabulary`, `[PAD]` at id 0).
        max_tokens: `word`: vocabulary size cap; None: no cap.
        wordpiece_vocabulary_size: `wordpiece`: the most entries of the vocabulary.

    Returns:
        The vocabulary a `SiameseModel` takes.

    Raises:
        TapefitError: `wordpiece` without keras-hub.

    Examples:
        >>> sorted(map(str, learn_vocabulary(["a cat sat", "a cat"], Tokenizer.word, None, 0)))
        ['a', 'cat', 'sat']
    """
    if tokenizer == Tokenizer.wordpiece:
        return learn_wordpiece_vocabulary(texts, wordpiece_vocabulary_size)
    return adapt_vocabulary(texts, max_tokens)


def make_vectorizer(
    vocabulary: list[str] | None, tokenizer: str, sequence_length: int
) -> keras.layers.Layer | None:
    """The layer inside the model that turns raw strings into padded ids.

    Args:
        vocabulary: The model's vocabulary; None: the model takes token ids (no layer).
        tokenizer: `word` (a `TextVectorization`) or `wordpiece` (a `WordPieceTokenizer`).
        sequence_length: Ids per text (padded or cut).

    Returns:
        The layer, or None without a vocabulary.

    Raises:
        TapefitError: a WordPiece vocabulary without `[PAD]` first or `[UNK]`, or keras-hub
            missing.

    Examples:
        >>> layer = make_vectorizer(["cat", "sat"], "word", 4)
        >>> layer(["cat sat dog"]).numpy().tolist()
        [[2, 3, 1, 0]]
    """
    if vocabulary is not None and tokenizer == Tokenizer.wordpiece:
        return wordpiece_layer(vocabulary, sequence_length)
    if vocabulary is not None:
        return layers.TextVectorization(
            vocabulary=vocabulary, output_sequence_length=sequence_length
        )
    return None


def put_word_vectors(path: str, vocabulary: list[Any], embeddings: Any, tokenizer: str) -> None:
    """Put a file's word vectors into `embeddings` for the vocabulary's words, and log the share.

    With `tokenizer="wordpiece"` the pieces that begin a word (not `##` continuations, not
    `[PAD]`/`[UNK]`) are looked up as words; the other rows keep their random start.

    Args:
        path: A GloVe or word2vec text file, vectors as wide as the embedding.
        vocabulary: The vectoriser's vocabulary, one entry per embedding row.
        embeddings: The embedding's weight variable, `(len(vocabulary), dim)`.
        tokenizer: `word` or `wordpiece`.

    Raises:
        TapefitError: the file is missing or of another width.

    Examples:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> _ = Path("vectors.txt").write_text("cat 1 0\\ndog 0 1\\n")
        >>> weights = keras.Variable(np.zeros((4, 2), "float32"))
        >>> put_word_vectors("vectors.txt", ["", "[UNK]", "cat", "sat"], weights, "word")
        >>> weights.numpy()[2].tolist()
        [1.0, 0.0]
    """
    if tokenizer == Tokenizer.wordpiece:
        match = match_vocabulary(
            path, vocabulary, embeddings.numpy(), first_word=0, looked_up=is_word_start
        )
        what = "word-start pieces of the wordpiece vocabulary"
    else:
        match = match_vocabulary(path, vocabulary, embeddings.numpy())
        what = "vocabulary words"
    embeddings.assign(match.matrix)
    log.info(
        "word vectors: %d of %d %s found in %s (%.1f%%); the others keep their random start",
        match.found,
        match.words,
        what,
        path,
        100 * match.share,
    )
