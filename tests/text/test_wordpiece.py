"""`data.tokenizer=wordpiece`: a WordPiece vocabulary learnt on the training texts and keras-hub's
WordPieceTokenizer inside the Siamese model. An unseen word becomes known pieces (the word
tokenizer's one OOV id), the model saves and reloads in a fresh process with equal outputs, its
SavedModel export serves with tensorflow-text's ops, bad values are one line, keras-hub is
imported only for wordpiece, and the word tokenizer is as it was."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import SiameseModel, TapefitError
from tapefit.data.loaders import pair_files, synthetic_pairs
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.text.wordpiece import (
    PAD,
    UNK,
    check_installed,
    keras_hub,
    learn_wordpiece_vocabulary,
)
from tests import processes
from tests.helpers import REPO, SMALL_SIAMESE, built_once_per_session, run_cli, write_pairs_tsv


@pytest.fixture(scope="module")
def texts():
    texts_a, texts_b, _ = PairGenerator(seed=0).pairs(512)
    return np.concatenate([texts_a, texts_b]).astype(str)


@pytest.fixture(scope="module")
def models(texts):
    """The same texts, one model per tokenizer (small encoders: only tokens are compared)."""
    encoder = {"embedding_dim": 8, "units": 8}
    return {
        name: SiameseModel.from_texts(texts, sequence_length=16, encoder=encoder, tokenizer=name)
        for name in ("word", "wordpiece")
    }


def unseen_words(texts) -> tuple[str, str]:
    """Two words the texts never hold, of known letters: training words run together."""
    words = sorted({word for text in texts for word in text.split()}, key=lambda w: (len(w), w))
    unseen = (words[-1] + words[-2], words[-3] + words[-1])
    assert not set(unseen) & set(words) and unseen[0] != unseen[1]
    return unseen


def test_an_unseen_word_becomes_known_pieces_where_the_word_tokenizer_has_one_oov_id(texts, models):
    word, other = unseen_words(texts)
    word_ids = models["word"].tokens([word]).numpy()[0]
    assert word_ids.tolist() == [1] + [0] * 15  # TextVectorization's OOV id, then padding

    pieces = models["wordpiece"]
    vocabulary = pieces.vocabulary
    assert vocabulary[:2] == [PAD, UNK]
    ids = pieces.tokens([word]).numpy()[0]
    used = [int(i) for i in ids if i != 0]
    assert len(used) >= 2 and vocabulary.index(UNK) not in used
    spelt = [vocabulary[i] for i in used]
    assert not spelt[0].startswith("##") and all(p.startswith("##") for p in spelt[1:])
    assert "".join(p.removeprefix("##") for p in spelt) == word
    # upper case is lowercased first; letters the texts never hold are [UNK]
    np.testing.assert_array_equal(pieces.tokens([word.upper()]).numpy()[0], ids)
    assert pieces.tokens(["xyq"]).numpy()[0].tolist() == [1] + [0] * 15

    # the word tokenizer encodes every unseen word alike; WordPiece tells them apart
    np.testing.assert_array_equal(models["word"].encode([word]), models["word"].encode([other]))
    assert not np.allclose(pieces.encode([word]), pieces.encode([other]))


def test_eager_and_traced_tokens_agree_and_padding_is_id_zero(texts, models):
    model = models["wordpiece"]
    batch = tf.constant([*texts[:64], "", "UPPER, case words!"])
    eager = model.tokens(batch).numpy()
    traced = tf.function(model.tokens)(batch).numpy()
    np.testing.assert_array_equal(eager, traced)
    assert eager.dtype == np.int64 and eager.shape == (66, 16)
    assert eager[64].tolist() == [0] * 16  # an empty text is all padding, masked by the encoder


def test_a_saved_wordpiece_model_reloads_with_identical_outputs(texts, models, tmp_path):
    model = models["wordpiece"]
    model.compile(optimizer="adam", **model.compile_defaults())
    model.save(tmp_path / "pieces.keras")
    restored = keras.saving.load_model(tmp_path / "pieces.keras")
    assert restored.tokenizer == "wordpiece" and restored.vocabulary == model.vocabulary
    assert restored.get_config()["tokenizer"] == "wordpiece"
    probe = [*unseen_words(texts), *texts[:20]]
    np.testing.assert_array_equal(restored.encode(probe), model.encode(probe))


def test_word_models_are_as_before(texts, models):
    model = models["word"]
    assert isinstance(model.vectorizer, keras.layers.TextVectorization)
    assert model.get_config()["tokenizer"] == "word"
    # a config saved before the option existed has no tokenizer key: it loads as word
    older = {k: v for k, v in model.get_config().items() if k != "tokenizer"}
    assert SiameseModel.from_config(older).tokenizer == "word"
    data = synthetic_pairs(train_size=32, val_size=8, test_size=8)
    arguments = data.model_arguments()
    assert sorted(arguments) == ["label_range", "label_type", "sequence_length", "vocabulary"]
    assert data.text_options == {"sequence_length": 16, "max_tokens": 20000}


def test_bad_tokenizer_values_are_one_line(texts):
    allowed = "is unknown: choose one of word, wordpiece"
    with pytest.raises(TapefitError, match=f"model.tokenizer='bpe' {allowed}") as error:
        SiameseModel(vocabulary=["cat"], tokenizer="bpe")
    assert "\n" not in str(error.value)
    with pytest.raises(TapefitError, match=f"tokenizer='bpe' {allowed}"):
        SiameseModel.from_texts(texts[:10], tokenizer="bpe")
    with pytest.raises(TapefitError, match=r"with \[PAD\] at id 0 and \[UNK\] in it"):
        SiameseModel(vocabulary=["cat", "dog"], tokenizer="wordpiece")  # a word vocabulary
    with pytest.raises(TapefitError, match="tokenizer=wordpiece needs a vocabulary"):
        SiameseModel(vocab_size=10, tokenizer="wordpiece")
    for size in (0, -3):
        with pytest.raises(TapefitError, match=f"wordpiece_vocabulary_size={size} must be at"):
            learn_wordpiece_vocabulary(texts[:10], size)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.tokenizer=bpe", "data.tokenizer='bpe' must be one of word, wordpiece"),
        ("data.wordpiece_vocabulary_size=0", "data.wordpiece_vocabulary_size=0 must be at least 3"),
        ("data.wordpiece_vocabulary_size=-5", "wordpiece_vocabulary_size=-5 must be at least 3"),
        ("+model.tokenizer=wordpiece", "model.tokenizer=wordpiece differs from data.tokenizer"),
    ],
)
def test_bad_config_values_are_refused_before_anything_is_built(compose, override, message):
    from tapefit.runner.validation import check_config

    cfg = compose(["experiment=siamese", override])
    with pytest.raises(TapefitError, match=message) as error:
        check_config(cfg)
    assert "\n" not in str(error.value)


def test_without_keras_hub_wordpiece_is_one_line_naming_the_extra(monkeypatch, texts):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # import keras_hub now fails
    install = "pip install 'tapefit\\[text\\]'"
    with pytest.raises(TapefitError, match=f"needs keras-hub, which is not installed: {install}"):
        check_installed()
    with pytest.raises(TapefitError, match=f"keras-hub, which cannot be imported .*{install}"):
        keras_hub()
    with pytest.raises(TapefitError, match=install):
        learn_wordpiece_vocabulary(texts[:10], 100)


MISSING_HUB = """
import sys
sys.modules["keras_hub"] = None  # as if keras-hub were not installed
sys.argv = ["tapefit", *sys.argv[1:]]
from tapefit.__main__ import main
main()
"""


def test_a_wordpiece_run_without_keras_hub_stops_before_training(tmp_path):
    overrides = ["experiment=siamese", "data.tokenizer=wordpiece", f"hydra.run.dir={tmp_path}"]
    result = processes.run(
        [sys.executable, "-c", MISSING_HUB, *overrides],
        cwd=REPO,
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert errors == [
        "tapefit: error: data.tokenizer=wordpiece needs keras-hub, which is not installed: "
        "pip install 'tapefit[text]'"
    ]
    assert "Traceback" not in result.stderr and not (tmp_path / "history.json").exists()


def test_streamed_pairs_learn_the_wordpiece_vocabulary_on_their_sample(tmp_path):
    generator = PairGenerator(seed=3)
    write_pairs_tsv(tmp_path / "train.tsv", *generator.pairs(300))
    write_pairs_tsv(tmp_path / "val.tsv", *generator.pairs(40))
    columns = {"text1_column": "left", "text2_column": "right", "label_column": "score"}
    data = pair_files(
        str(tmp_path / "train.tsv"),
        str(tmp_path / "val.tsv"),
        stream=True,
        vocabulary_pairs=100,
        tokenizer="wordpiece",
        wordpiece_vocabulary_size=500,
        **columns,
    )
    arguments = data.model_arguments()
    assert arguments["tokenizer"] == "wordpiece"
    assert arguments["vocabulary"] == learn_wordpiece_vocabulary(data.training_texts(), 500)
    assert arguments["vocabulary"][:2] == [PAD, UNK] and len(arguments["vocabulary"]) <= 500
    assert data.rebuilt(16).text_options == data.text_options  # a sweep's trial keeps them


def test_word_vectors_fill_the_word_start_pieces_only(texts, tmp_path, caplog):
    vocabulary = learn_wordpiece_vocabulary(texts, 8000)
    whole = [v for v in vocabulary[2:] if not v.startswith("##") and len(v) > 2][:5]
    suffix = next(v for v in vocabulary if v.startswith("##") and len(v) > 3)
    path = tmp_path / "vectors.txt"
    rows = [f"{w} {i} {i} {i}" for i, w in enumerate(whole, 1)]
    path.write_text("\n".join([*rows, f"{suffix} 9 9 9", f"{suffix[2:]}zz 9 9 9"]) + "\n")
    with caplog.at_level("INFO", logger="tapefit"):
        model = SiameseModel(
            vocabulary=vocabulary,
            tokenizer="wordpiece",
            encoder={"embedding_dim": 3, "units": 4, "vectors": str(path)},
        )
    embeddings = keras.ops.convert_to_numpy(model.encoder.embedding.embeddings)
    for i, word in enumerate(whole, 1):
        np.testing.assert_array_equal(embeddings[vocabulary.index(word)], [i, i, i])
    assert not np.allclose(embeddings[vocabulary.index(suffix)], 9.0)  # ## pieces: never
    starts = sum(not v.startswith("##") for v in vocabulary[2:])
    assert f"word vectors: 5 of {starts} word-start pieces of the wordpiece vocabulary" in (
        caplog.text
    )


# Loads a run's model.keras in a fresh interpreter with tapefit, and saves what it encodes.
ENCODE = textwrap.dedent(
    """
    import sys
    import keras, numpy as np
    import tapefit

    model = keras.saving.load_model(sys.argv[1])
    texts = list(np.load(sys.argv[2]))
    np.save(sys.argv[3], model.encode(texts))
    print(model.tokenizer, type(model.vectorizer).__name__)
    """
)

# One real interpreter (not a fork of the tests' warm one, which has imported tapefit and
# keras-hub) for two checks, one interpreter's start-up for both: it serves the export's
# `encode` without tapefit (loading fails until tensorflow_text is imported), then imports
# tapefit and builds a word model, which must not import keras-hub. Each check prints its own
# lines, and a failure of the first does not stop the second.
FRESH = textwrap.dedent(
    """
    import sys, traceback
    import numpy as np
    import tensorflow as tf

    def serve():
        try:
            tf.saved_model.load(sys.argv[1])
            print("bare: loaded")
        except Exception as error:
            print("bare:", "Op type not registered" in str(error))
        import tensorflow_text  # registers the ops the WordPiece tokenizer runs
        served = tf.saved_model.load(sys.argv[1])
        np.save(sys.argv[3], served.encode(tf.constant(list(np.load(sys.argv[2])))).numpy())
        print("served, tapefit imported:", "tapefit" in sys.modules)

    try:
        serve()
    except Exception:
        traceback.print_exc()
    print("before tapefit, keras_hub imported:", "keras_hub" in sys.modules)

    from tapefit import SiameseModel
    from tapefit.data.loaders import synthetic_pairs

    data = synthetic_pairs(train_size=32, val_size=8, test_size=8)
    model = SiameseModel(**data.model_arguments(), encoder={"units": 4, "embedding_dim": 4})
    model.encode(["a b"])
    print("after a word model, keras_hub imported:", "keras_hub" in sys.modules)
    """
)
SIZES = {"train_size": 200, "val_size": 32, "test_size": 32}


@pytest.fixture(scope="session")
@built_once_per_session
def wordpiece_run(tmp_path_factory):
    """A wordpiece run through the CLI, exported, and the real interpreter of `FRESH` over its
    export: (the run directory, the probe texts' file, the CLI's and the interpreter's
    results)."""
    folder = tmp_path_factory.mktemp("wordpiece")
    run_dir = folder / "run"
    result = run_cli(
        "experiment=siamese",
        "data.tokenizer=wordpiece",
        "data.wordpiece_vocabulary_size=300",
        *(f"data.{key}={value}" for key, value in SIZES.items()),
        # the bag of embeddings: the tokenizer inside the model and its export are the
        # subject, not the encoder (the LSTM's wordpiece model reloads in the tests above)
        *SMALL_SIAMESE,
        "model.encoder.embedding_dim=8",
        "trainer.epochs=1",
        "trainer.verbose=0",
        "trainer.export=true",
        f"hydra.run.dir={run_dir}",
    )
    probe = [*PairGenerator(seed=0).pairs(8)[0], "Bazokeqa tisu!", "xyq", ""]
    np.save(folder / "texts.npy", np.array(probe))
    files = (run_dir / "export", folder / "texts.npy", folder / "served.npy")
    fresh = subprocess.run(
        [sys.executable, "-c", FRESH, *map(str, files)],
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return run_dir, folder, result, fresh


@pytest.mark.slow  # a real interpreter: make test-fast leaves it out
def test_import_tapefit_and_word_models_never_import_keras_hub(wordpiece_run):
    fresh = wordpiece_run[3]
    lines = fresh.stdout.splitlines()
    assert "before tapefit, keras_hub imported: False" in lines, fresh.stderr[-3000:]
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert lines[-1] == "after a word model, keras_hub imported: False"


@pytest.mark.slow  # trains over the CLI: make test-fast leaves it out
def test_a_wordpiece_cli_run_trains_reloads_and_exports(wordpiece_run):
    run_dir, folder, result, fresh = wordpiece_run
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert -1 <= metrics["test_spearman"] <= 1 and metrics["export"] == "export"
    log = (run_dir / "tapefit.log").read_text()
    assert "wordpiece vocabulary:" in log and "(at most 300)" in log

    model = keras.saving.load_model(run_dir / "model.keras")
    assert model.tokenizer == "wordpiece"
    expected = synthetic_pairs(**SIZES, tokenizer="wordpiece", wordpiece_vocabulary_size=300)
    assert model.vocabulary == expected.model_arguments()["vocabulary"]
    texts, out = folder / "texts.npy", folder / "a.npy"
    encoded = model.encode(list(np.load(texts)))

    # a process that never saw this run (forked before any model was built or keras-hub imported)
    reloaded = processes.run(
        [sys.executable, "-c", ENCODE, *map(str, (run_dir / "model.keras", texts, out))],
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert reloaded.returncode == 0, reloaded.stderr[-3000:]
    assert reloaded.stdout.split()[-2:] == ["wordpiece", "WordPieceTokenizer"]
    np.testing.assert_array_equal(np.load(out), encoded)

    # The SavedModel runs tensorflow-text ops: a serving process imports tensorflow_text first
    lines = fresh.stdout.splitlines()
    assert lines[:2] == ["bare: True", "served, tapefit imported: False"], fresh.stderr[-3000:]
    np.testing.assert_allclose(np.load(folder / "served.npy"), encoded, atol=1e-5)
