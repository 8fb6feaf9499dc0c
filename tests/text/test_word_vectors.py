"""Pretrained word vectors: GloVe and word2vec text files matched to the vocabulary, their
errors, and a CLI run whose frozen embedding holds the file's vectors and whose model.keras
reloads without the file."""

import json

import keras
import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.text.word_vectors import match_vocabulary, read_vectors
from tests.helpers import run_cli

VOCABULARY = ["", "[UNK]", "cat", "sat", "mat", "zebra"]


def test_glove_and_word2vec_files_fill_the_rows_of_the_words_they_have(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("cat 1 2 3\nSat 4 5 6\nelephant 7 8 9\ncat 0 0 0\n")
    word2vec = tmp_path / "w2v.txt"
    word2vec.write_text("3 3\ncat 1 2 3\nSat 4 5 6\nelephant 7 8 9\n")
    initial = np.full((6, 3), -1.0)
    for path in (glove, word2vec):
        match = match_vocabulary(path, VOCABULARY, initial)
        # "cat" (its first line), "sat" (the file's "Sat", case folded); padding and OOV skipped
        assert match.found == 2 and match.words == 4 and match.share == 0.5
        expected = initial.copy()
        expected[2], expected[3] = [1, 2, 3], [4, 5, 6]
        np.testing.assert_array_equal(match.matrix, expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cat 1 2\n", r"holds 2-dimensional vectors but model.encoder.embedding_dim=3: set "),
        ("cat 1 2 3\nsat 1 2\n", r"line 2 has 2 values, the first vector 3"),
    ],
)
def test_a_vector_file_of_another_shape_is_one_line(tmp_path, text, message):
    path = tmp_path / "vectors.txt"
    path.write_text(text)
    with pytest.raises(TapefitError, match=message):
        match_vocabulary(path, VOCABULARY, np.zeros((6, 3)))
    with pytest.raises(TapefitError, match=r"vectors=.*missing.txt: no such file"):
        read_vectors(tmp_path / "missing.txt", {"cat"})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"holds no vectors \(it is empty, or not a text file"),
        (b"\n\n", r"holds no vectors"),
        (b"cat 1 x 3\n", r"line 1 is not a word and numbers; .*converted to text"),
        (b"3 3\ncat \x00\x9f\x12\n", r"line 2 is not a word and numbers"),
        (b"elephant 1 2 3\ngiraffe 4 5 6\n", r"has none of the vocabulary's 4 words \(cat, sat"),
    ],
)
def test_a_file_that_yields_no_vectors_is_refused(tmp_path, content, message):
    """Empty, binary and other-language files are refused, not trained from random rows."""
    path = tmp_path / "vectors.txt"
    path.write_bytes(content)
    with pytest.raises(TapefitError, match=message) as refused:
        match_vocabulary(path, VOCABULARY, np.zeros((6, 3)))
    assert "\n" not in str(refused.value)


@pytest.mark.slow
def test_a_cli_run_starts_from_frozen_vectors_and_its_model_reloads_without_the_file(tmp_path):
    texts_a, texts_b, _ = PairGenerator(seed=0).pairs(300)
    words = sorted({w for text in [*texts_a, *texts_b] for w in str(text).split()})
    given = words[::2]  # half of the words
    rng = np.random.default_rng(0)
    vectors = {word: rng.normal(size=8).round(4) for word in given}
    path = tmp_path / "vectors.txt"
    path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items()))
    run_dir = tmp_path / "run"
    result = run_cli(
        "experiment=siamese",
        f"model.encoder.vectors={path}",
        "model.encoder.embedding_dim=8",
        "model.encoder.units=8",
        "model.encoder.train_embeddings=false",
        "data.train_size=500",
        "trainer.epochs=1",
        "trainer.verbose=0",
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(
        x for x in (run_dir / "tapefit.log").read_text().splitlines() if "word vectors:" in x
    )
    found = int(line.split("word vectors: ")[1].split(" of ")[0])
    assert found > 0 and "vocabulary words found in" in line
    path.unlink()  # the saved model must not need it
    model = keras.models.load_model(run_dir / "model.keras")
    embeddings = keras.ops.convert_to_numpy(model.encoder.embedding.embeddings)
    rows = {word: i for i, word in enumerate(model.vectorizer.get_vocabulary())}
    matched = [w for w in vectors if w in rows]
    assert len(matched) == found
    for word in matched:  # frozen: still the file's vectors after training
        np.testing.assert_allclose(embeddings[rows[word]], vectors[word], rtol=1e-6)
    assert not model.encoder.embedding.trainable
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
