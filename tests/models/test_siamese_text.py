"""`tapefit.models.siamese_text`: text fingerprints, the vocabulary each tokenizer learns, the
vectoriser layer, and word vectors put into the embedding."""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models import siamese_text
from tapefit.models.siamese_text import (
    learn_vocabulary,
    make_vectorizer,
    put_word_vectors,
    text_fingerprint,
)
from tapefit.text.wordpiece import Tokenizer

WORDPIECE = ["[PAD]", "[UNK]", "cat", "##s", "sat"]


def test_token_id_rows_get_one_id_each_and_equal_rows_equal_ids():
    rows = tf.constant([[12, 3, 0], [1, 23, 0], [12, 3, 0], [12, 3, 1]], tf.int64)
    ids = text_fingerprint(rows).numpy()
    assert ids.shape == (4,) and ids.dtype == np.int64
    assert ids[0] == ids[2]
    assert len({ids[0], ids[1], ids[3]}) == 3  # 12,3 is not 1,23; the last id counts too


def test_fingerprints_are_exact_in_float32_as_the_losses_read_labels():
    ids = text_fingerprint(tf.constant([f"text {i}" for i in range(2000)])).numpy()
    assert ids.min() >= 0 and ids.max() < 2**24
    np.testing.assert_array_equal(ids.astype("float32").astype("int64"), ids)


def test_the_word_vocabulary_is_capped_by_max_tokens_counting_padding_and_oov():
    texts = ["a a a b b c", "c d"]
    assert learn_vocabulary(texts, Tokenizer.word, 4, 0) == ["a", "c"]
    assert learn_vocabulary(texts, Tokenizer.word, None, 0) == ["a", "c", "b", "d"]


def test_the_wordpiece_vocabulary_is_learnt_to_its_own_size_not_max_tokens(monkeypatch):
    asked = []

    def learnt(texts, vocabulary_size):
        asked.append((list(texts), vocabulary_size))
        return ["[PAD]", "[UNK]", "cat"]

    monkeypatch.setattr(siamese_text, "learn_wordpiece_vocabulary", learnt)
    assert learn_vocabulary(["a cat"], "wordpiece", 3, 40) == ["[PAD]", "[UNK]", "cat"]
    assert asked == [(["a cat"], 40)]


def test_no_vocabulary_means_no_vectorizer_the_model_takes_token_ids():
    assert make_vectorizer(None, "word", 8) is None
    assert make_vectorizer(None, "wordpiece", 8) is None


def test_the_word_vectorizer_cuts_and_pads_to_the_sequence_length():
    layer = make_vectorizer(["cat", "sat"], "word", 2)
    assert layer(["cat sat cat", "Sat."]).numpy().tolist() == [[2, 3], [3, 0]]


def test_the_wordpiece_vectorizer_splits_unknown_words_into_known_pieces():
    pytest.importorskip("keras_hub")
    layer = make_vectorizer(WORDPIECE, "wordpiece", 6)
    assert np.asarray(layer(["Cats sat dog"])).tolist() == [[2, 3, 4, 1, 0, 0]]


def test_a_wordpiece_vocabulary_without_pad_first_is_refused():
    pytest.importorskip("keras_hub")
    with pytest.raises(TapefitError, match=r"needs a WordPiece vocabulary with \[PAD\] at id 0"):
        make_vectorizer(["cat", "[PAD]", "[UNK]"], "wordpiece", 4)


def vectors_file(tmp_path, text):
    path = tmp_path / "vectors.txt"
    path.write_text(text)
    return str(path)


def test_word_vectors_fill_the_words_rows_and_leave_padding_oov_and_unknown_words(tmp_path, caplog):
    path = vectors_file(tmp_path, "[UNK] 5 5\ncat 1 2\nemu 3 4\n")
    weights = keras.Variable(np.full((4, 2), 9.0, "float32"))
    with caplog.at_level(logging.INFO, logger="tapefit"):
        put_word_vectors(path, ["", "[UNK]", "cat", "dog"], weights, "word")
    assert weights.numpy().tolist() == [[9, 9], [9, 9], [1, 2], [9, 9]]
    assert f"word vectors: 1 of 2 vocabulary words found in {path} (50.0%)" in caplog.text


def test_wordpiece_vectors_fill_only_the_pieces_that_begin_a_word(tmp_path, caplog):
    path = vectors_file(tmp_path, "[PAD] 5 5\n##s 6 6\ncat 1 2\nsat 3 4\n")
    weights = keras.Variable(np.zeros((5, 2), "float32"))
    with caplog.at_level(logging.INFO, logger="tapefit"):
        put_word_vectors(path, WORDPIECE, weights, "wordpiece")
    assert weights.numpy().tolist() == [[0, 0], [0, 0], [1, 2], [0, 0], [3, 4]]
    assert (
        f"word vectors: 2 of 2 word-start pieces of the wordpiece vocabulary found in {path} "
        "(100.0%)"
    ) in caplog.text


def test_vectors_of_another_width_name_the_embedding_dim_to_set(tmp_path):
    path = vectors_file(tmp_path, "cat 1 2 3\n")
    weights = keras.Variable(np.zeros((3, 2), "float32"))
    with pytest.raises(TapefitError, match=r"3-dimensional vectors .*embedding_dim=3"):
        put_word_vectors(path, ["", "[UNK]", "cat"], weights, "word")
    assert weights.numpy().tolist() == [[0, 0]] * 3
