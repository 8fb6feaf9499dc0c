"""A word vocabulary learnt from texts, as Keras' `TextVectorization` learns it."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tapefit.errors import TapefitError


def adapt_vocabulary(texts: Any, max_tokens: int | None = 20000) -> list[str]:
    """The vocabulary Keras' `TextVectorization` learns from `texts` (most frequent first, at
    most `max_tokens` entries counting padding and OOV), without those two entries.

    Raises:
        TapefitError: if the texts hold no tokens at all.
    """
    from keras import layers

    vectorizer = layers.TextVectorization(max_tokens=max_tokens)
    vectorizer.adapt(tf.data.Dataset.from_tensor_slices(list(texts)).batch(1024))
    vocabulary = vectorizer.get_vocabulary()[2:]  # without the padding and OOV entries
    if not vocabulary:
        raise TapefitError("the training texts hold no tokens: every text is empty")
    return vocabulary
