"""The word vocabulary learnt from the training texts (`adapt_vocabulary`): Keras'
`TextVectorization` order without its padding and OOV entries, bounded, and refused when the
texts hold no tokens."""

import random

import pytest

from tapefit.errors import TapefitError
from tapefit.text.vocabulary import adapt_vocabulary

TEXTS = ["the cat sat", "The CAT!", "the dog"]  # the: 3 uses, cat: 2, sat and dog: 1


def test_the_vocabulary_is_most_frequent_first_lowercased_without_punctuation():
    vocabulary = adapt_vocabulary(TEXTS)
    assert vocabulary[:2] == ["the", "cat"]
    assert sorted(vocabulary[2:]) == ["dog", "sat"]
    assert "" not in vocabulary and "[UNK]" not in vocabulary


def test_max_tokens_counts_padding_and_oov():
    assert adapt_vocabulary(TEXTS, max_tokens=4) == ["the", "cat"]
    assert len(adapt_vocabulary(TEXTS, max_tokens=None)) == 4


def test_texts_without_tokens_are_refused_in_one_line():
    with pytest.raises(TapefitError) as refused:
        adapt_vocabulary(["", " ", "!?"])
    assert str(refused.value) == "the training texts hold no tokens: every text is empty"


# Texts where a Python re-implementation could part from TensorFlow's string ops: non-ASCII
# capitals (TensorFlow lowercases ASCII only), punctuation inside words, every ASCII
# whitespace and a non-breaking space (not whitespace to TensorFlow), the OOV token's own
# spelling, ties at every count, and words that differ only in case or accents.
TRICKY = [
    "Ça va? ÇA VA! ça-va",
    "naïve  NAÏVE\tnaive\nNaive\r\nnaïve",
    "x\u00a0y x y\x0bz\x0cw",
    "[UNK] unk UNK <pad> ''",
    "don't do-not don_t e.g. e,g",
    "b a c b a c d d e e f",
    "émigré Émigré EMIGRE",
    "",
    "   ",
]


@pytest.mark.parametrize("max_tokens", [None, 20000, 6, 3])
def test_the_vocabulary_equals_keras_text_vectorization_adapt(max_tokens):
    import tensorflow as tf
    from keras import layers

    rng = random.Random(3)
    alphabet = [*"abAB éÉ.,-'\t\n\u00a0", "ça", "Ça", "x"]
    generated = [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(300)
    ]
    for texts in (TRICKY, generated):
        vectorizer = layers.TextVectorization(max_tokens=max_tokens)
        vectorizer.adapt(tf.data.Dataset.from_tensor_slices(texts).batch(7))
        expected = vectorizer.get_vocabulary()[2:]
        if not expected:
            with pytest.raises(TapefitError):
                adapt_vocabulary(texts, max_tokens)
        else:
            assert adapt_vocabulary(texts, max_tokens) == expected


def test_bytes_numpy_and_tensorflow_texts_read_as_their_strings():
    import numpy as np
    import tensorflow as tf

    as_str = adapt_vocabulary(TRICKY)
    assert adapt_vocabulary([t.encode("utf-8") for t in TRICKY]) == as_str
    assert adapt_vocabulary(np.array(TRICKY, dtype=object)) == as_str
    assert adapt_vocabulary(np.array(TRICKY)) == as_str
    assert adapt_vocabulary(tf.constant(TRICKY)) == as_str
    assert adapt_vocabulary(tf.data.Dataset.from_tensor_slices(TRICKY)) == as_str


def test_a_text_that_is_not_a_string_is_refused_in_one_line():
    with pytest.raises(TapefitError) as refused:
        adapt_vocabulary(["a cat", 5, "a dog"])
    assert str(refused.value) == "text 1 is a int, not a string: give the texts as strings"


@pytest.mark.parametrize("max_tokens", [1, 2])
def test_a_cap_without_room_for_a_word_is_refused_in_one_line(max_tokens):
    with pytest.raises(TapefitError) as refused:
        adapt_vocabulary(TEXTS, max_tokens)
    assert str(refused.value) == (
        f"max_tokens={max_tokens} leaves no room for a word (padding and OOV count): give at "
        "least 3, or None for every word"
    )
