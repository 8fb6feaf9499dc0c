"""`init_from=...` starts a run from another run's weights (matched layer by layer, the
optimizer afresh), says what it loaded, and refuses or skips layers whose shapes differ."""

import json
import logging
import re

import keras
import numpy as np
import pytest

import tapefit
from tapefit.errors import TapefitError
from tests.helpers import SMALL_SIAMESE, built_once_per_session

pytestmark = pytest.mark.slow
QUICK = ["trainer.verbose=0", "model.architecture=mlp", "data.train_limit=256", "trainer.epochs=1"]


class WeightsAtStart(keras.callbacks.Callback):
    """Keeps the model's weights as training begins (after the warm start)."""

    def on_train_begin(self, logs=None):
        self.weights = [np.array(w) for w in self.model.weights]


@pytest.fixture(scope="session")
@built_once_per_session
def source_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("warm") / "source"
    tapefit.run(tapefit.compose([*QUICK, "trainer.epochs=2"]), run_dir)
    return run_dir


def start_weights(overrides, run_dir):
    seen = WeightsAtStart()
    tapefit.run(tapefit.compose([*QUICK, *overrides]), run_dir, [seen])
    return seen.weights


def test_a_run_directory_warm_starts_every_layer(source_run, tmp_path, caplog):
    source = keras.models.load_model(source_run / "model.keras")
    with caplog.at_level(logging.INFO, logger="tapefit"):
        weights = start_weights([f"init_from={source_run}"], tmp_path / "fine")
    for got, want in zip(weights, source.weights, strict=True):
        np.testing.assert_array_equal(got, np.array(want))
    assert any("weights loaded, 0 kept" in r.getMessage() for r in caplog.records)
    assert json.loads((tmp_path / "fine" / "status.json").read_text())["state"] == "completed"


def test_a_weights_file_and_a_keras_file_warm_start_alike(source_run, tmp_path):
    model = keras.models.load_model(source_run / "model.keras")
    model.save_weights(tmp_path / "source.weights.h5")
    from_h5 = start_weights([f"init_from={tmp_path / 'source.weights.h5'}"], tmp_path / "a")
    from_keras = start_weights([f"init_from={source_run / 'model.keras'}"], tmp_path / "b")
    for a, b in zip(from_h5, from_keras, strict=True):
        np.testing.assert_array_equal(a, b)


def test_other_shapes_are_refused_in_one_line_or_skipped_when_not_strict(source_run, tmp_path):
    wider = ["model.hidden_units=[64,32]", f"init_from={source_run}"]
    with pytest.raises(TapefitError, match="init_from_strict=false") as refused:
        tapefit.run(tapefit.compose([*QUICK, *wider]), tmp_path / "strict")
    message = str(refused.value)
    assert "\n" not in message and ":;" not in message  # Keras' detail, not a cut sentence
    assert re.search(r"Example error message for object <[^>]+>: \w", message)
    weights = start_weights([*wider, "init_from_strict=false"], tmp_path / "loose")
    source = keras.models.load_model(source_run / "model.keras")
    np.testing.assert_array_equal(weights[0], np.array(source.weights[0]))  # first layer taken
    assert weights[2].shape == (64, 32)  # the reshaped layer kept its own initial values


def test_a_missing_source_is_one_line(tmp_path):
    with pytest.raises(TapefitError, match="not found, or not a run directory"):
        tapefit.run(tapefit.compose([*QUICK, f"init_from={tmp_path / 'nope'}"]), tmp_path / "r")


def write_pairs(path, rows):
    path.write_text("".join(f"{a}\t{b}\n" for a, b in [("text1", "text2"), *rows]))


def test_a_text_model_reads_new_data_with_the_vocabulary_its_weights_learnt(
    tmp_path, caplog, monkeypatch
):
    """The embedding's rows are indexed by the source's vocabulary: a run on other texts (a
    mined file, a new domain) must keep it, not learn one again and shift every row."""
    from tapefit.data.synthetic_pairs import PairGenerator

    monkeypatch.chdir(tmp_path)
    generator = PairGenerator(seed=3)
    first = list(zip(*generator.pairs(120)[:2], strict=True))
    write_pairs(tmp_path / "first.tsv", first)
    # other texts: a different vocabulary would be learnt from them (other words, other counts)
    write_pairs(tmp_path / "other.tsv", [(b + " zebra quokka", a) for a, b in first[:60]])
    pairs = [
        "experiment=siamese",
        "data=pairs_file",
        "data.label_column=null",
        "model.loss.name=in_batch_negatives",
        *SMALL_SIAMESE,
        "trainer.epochs=1",
        "trainer.verbose=0",
    ]
    tapefit.run(tapefit.compose([*pairs, "data.train_path=first.tsv"]), tmp_path / "a")
    source = keras.models.load_model(tmp_path / "a" / "model.keras")
    seen = WeightsAtStart()
    again = [*pairs, "data.train_path=other.tsv", f"init_from={tmp_path / 'a'}"]
    with caplog.at_level(logging.INFO, logger="tapefit"):
        tapefit.run(tapefit.compose(again), tmp_path / "b", [seen])
    model = keras.models.load_model(tmp_path / "b" / "model.keras")
    assert model.get_config()["vocabulary"] == source.get_config()["vocabulary"]
    assert "zebra" not in model.get_config()["vocabulary"]
    for got, want in zip(seen.weights, source.weights, strict=True):
        np.testing.assert_array_equal(got, np.array(want))
    assert any("texts read with its vocabulary" in r.getMessage() for r in caplog.records)
    wordpiece = [*again, "data.tokenizer=wordpiece", "data.wordpiece_vocabulary_size=200"]
    with pytest.raises(
        TapefitError,
        match=r"read texts with a word vocabulary, this run with a "
        r"wordpiece one: set data\.tokenizer=word",
    ):
        tapefit.run(tapefit.compose(wordpiece), tmp_path / "c")
