"""Matryoshka embeddings across modules: a run evaluates each dimension on its own
(`val_spearman_4`, `test_ndcg_at_10_4`, ...), any of which can be the objective. `encode(texts,
dim=)` and the per-dimension metrics: tests/evaluation/test_matryoshka_metrics.py; the loss:
tests/models/losses/test_matryoshka_loss.py; the serving signatures:
tests/models/test_siamese_inference.py."""

import json

import pytest

import tapefit
from tests.helpers import SMALL_SIAMESE


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
