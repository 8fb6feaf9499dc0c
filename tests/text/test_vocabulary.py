"""The word vocabulary learnt from the training texts (`adapt_vocabulary`): Keras'
`TextVectorization` order without its padding and OOV entries, bounded, and refused when the
texts hold no tokens."""

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
