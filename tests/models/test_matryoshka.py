"""Matryoshka embeddings across modules: `encode(texts, dim=)` gives a leading dimension's
vectors (each L2-normalised again), and a run evaluates each dimension on its own
(`val_spearman_4`, `test_ndcg_at_10_4`, ...), any of which can be the objective. The loss:
tests/models/losses/test_matryoshka_loss.py; the serving signatures:
tests/models/test_siamese_inference.py."""

import json

import numpy as np
import pytest

import tapefit
from tapefit import SiameseModel, TapefitError
from tapefit.evaluation.matryoshka import leading_components
from tests.helpers import SMALL_SIAMESE, unit


def test_encode_gives_the_leading_dimensions_normalised_again():
    model = SiameseModel.from_texts(["a cat sat", "a dog ran"], encoder={"units": 8})
    texts = ["a cat", "a dog", "sat"]
    full = model.encode(texts, normalize=False)
    np.testing.assert_allclose(model.encode(texts, dim=4), unit(full[:, :4]), rtol=1e-5)
    np.testing.assert_allclose(model.encode(texts, dim=4, normalize=False), full[:, :4])
    assert np.allclose(np.linalg.norm(model.encode(texts, dim=3), axis=1), 1.0)
    with pytest.raises(TapefitError, match="dim=99 must be a whole number from 1 to"):
        model.encode(texts, dim=99)
    assert leading_components(full, 8).shape == full.shape


@pytest.mark.slow
def test_a_run_reports_every_dimension_and_selects_on_one(compose, tmp_path):
    cfg = compose(
        [
            "experiment=siamese",
            "data.train_size=256",
            "data.val_size=64",
            "data.test_size=64",
            *SMALL_SIAMESE,
            "model.encoder.embedding_dim=8",  # 8 dimensions
            "model.loss.matryoshka_dims=[8,2]",
            "model.retrieval.enabled=true",
            "model.retrieval.positive_label=2.5",
            "trainer.epochs=2",
            "trainer.verbose=0",
            "objective=val_spearman_2",
        ]
    )
    results = tapefit.run(cfg, tmp_path)
    history = json.loads((tmp_path / "history.json").read_text())
    for dim in (8, 2):
        assert len(history[f"val_spearman_{dim}"]) == 2
        assert 0 <= history[f"val_ndcg_at_10_{dim}"][-1] <= 1
        assert -1 <= results[f"test_spearman_{dim}"] <= 1
        assert 0 <= results[f"test_mrr_at_10_{dim}"] <= 1
    # the full width's figures are the model's own
    assert results["test_spearman_8"] == pytest.approx(results["test_spearman"], abs=1e-6)
    assert results["objective"] == "val_spearman_2"
    assert results["objective_value"] == max(history["val_spearman_2"])
