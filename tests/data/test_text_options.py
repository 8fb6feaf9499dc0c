"""`tapefit.data.text_options`: the pair loaders' text options checked, then carried by the data."""

import dataclasses
import importlib.util

import pytest

from tapefit.data.pairs import PairData
from tapefit.data.text_options import check_text_options, with_text_options
from tapefit.errors import TapefitError

OPTIONS = {
    "sequence_length": 16,
    "max_tokens": 3,
    "batch_size": 1,
    "tokenizer": "word",
    "wordpiece_vocabulary_size": 3,
}


def pair_data():
    """Pair data without pipelines: what `with_text_options` reads and copies."""
    return PairData(None, None, None, {}, "graded", (0.0, 5.0), {"train": 0}, 0, True)


def test_the_smallest_allowed_options_pass_and_max_tokens_may_be_null():
    check_text_options(OPTIONS)
    check_text_options({**OPTIONS, "max_tokens": None})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("sequence_length", 0, "data.sequence_length=0 must be at least 1"),
        ("sequence_length", None, "data.sequence_length=None must be at least 1"),
        ("max_tokens", 2, "data.max_tokens=2 must be at least 3 or null"),
        ("batch_size", 0, "data.batch_size=0 must be at least 1"),
        ("wordpiece_vocabulary_size", 2, "data.wordpiece_vocabulary_size=2 must be at least 3"),
    ],
)
def test_a_size_below_its_minimum_is_refused_naming_its_key(key, value, message):
    with pytest.raises(TapefitError) as refused:
        check_text_options({**OPTIONS, key: value})
    assert str(refused.value) == message


def test_wordpiece_without_keras_hub_is_refused_and_the_word_tokenizer_needs_none(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "keras_hub" else real(name, *a),
    )
    check_text_options(OPTIONS)  # the word tokenizer looks nothing up
    with pytest.raises(TapefitError, match=r"^data.tokenizer=wordpiece needs keras-hub, which is"):
        check_text_options({**OPTIONS, "tokenizer": "wordpiece"})


def test_the_word_tokenizer_carries_only_its_own_two_options():
    data = pair_data()
    carried = with_text_options(data, 12, None, "word", wordpiece_vocabulary_size=50)
    assert carried.text_options == {"sequence_length": 12, "max_tokens": None}
    assert data.text_options == {}  # a copy: the data handed in are unchanged
    assert dataclasses.replace(carried, text_options={}) == data


def test_wordpiece_carries_its_tokenizer_and_vocabulary_size():
    carried = with_text_options(pair_data(), 24, 500, "wordpiece", wordpiece_vocabulary_size=64)
    assert carried.text_options == {
        "sequence_length": 24,
        "max_tokens": 500,
        "tokenizer": "wordpiece",
        "wordpiece_vocabulary_size": 64,
    }
