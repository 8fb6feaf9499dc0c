"""Pair losses across their modules: several losses' gradients against finite differences,
and a Siamese run trained with each ranking loss (CoSENT, AnglE). Each loss's own tests:
tests/models/losses/."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit.models.losses import (
    ContrastiveLoss,
    CosineLoss,
    CosineMSELoss,
    InBatchNegativesLoss,
    TripletLoss,
)
from tests.helpers import SMALL_SIAMESE
from tests.models.pair_loss_references import batch, in_batch


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cosent", "angle"])
def test_a_siamese_run_trains_with_a_ranking_loss(compose, tmp_path, name):
    cfg = compose(
        [
            "experiment=siamese",
            *SMALL_SIAMESE,
            f"model.loss.name={name}",
            "trainer.epochs=2",
            "trainer.verbose=0",
            "data.train_size=512",
        ]
    )
    results = tapefit.run(cfg, tmp_path / name)
    history = json.loads((tmp_path / name / "history.json").read_text())
    assert history["loss"][-1] < history["loss"][0]
    assert np.isfinite(results["test_spearman"])
    model = keras.models.load_model(tmp_path / name / "model.keras")
    assert model.loss.name == name


@pytest.mark.parametrize(
    "loss", [TripletLoss(margin=1.5, mining="all"), InBatchNegativesLoss(5.0, symmetric=True)]
)
def test_triplet_and_symmetric_gradients_equal_finite_differences(loss):
    ids, pairs = in_batch(10, size=6)
    check = tapefit.gradcheck(lambda p: tf.reduce_mean(loss.call(ids, p)), pairs, samples=24)
    assert check.checked == 24 and check.max_relative_error < 1e-6


@pytest.mark.parametrize(
    ("loss", "labels"),
    [
        (CosineLoss(), "graded"),
        (CosineMSELoss(), "graded"),
        (ContrastiveLoss(margin=1.5), "binary"),  # 1.5: every negative pair inside the margin
        (InBatchNegativesLoss(scale=5.0), "ids"),
    ],
    ids=["cosine", "cosine_mse", "contrastive", "in_batch_negatives"],
)
def test_the_tutorial_losses_gradients_equal_finite_differences(loss, labels):
    graded, pairs = batch(11, size=8, dim=6)
    y_true = {"graded": graded, "binary": (graded > 2).astype("float64"), "ids": in_batch(11, 8)[0]}
    check = tapefit.gradcheck(lambda p: tf.reduce_mean(loss.call(y_true[labels], p)), pairs)
    assert check.checked == 8 and check.max_relative_error < 1e-6
