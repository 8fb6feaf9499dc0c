"""The ranking pair losses (CoSENT, AnglE): values against NumPy references written from the
papers' formulas, gradients against finite differences, and training through the CLI."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit import TapefitError
from tapefit.models.losses import (
    AnglELoss,
    ContrastiveLoss,
    CoSENTLoss,
    CosineLoss,
    CosineMSELoss,
    InBatchNegativesLoss,
    TripletLoss,
    angle_similarity,
    make_pair_loss,
)
from tests.helpers import SMALL_SIAMESE
from tests.models.pair_loss_references import (
    GATHERING_LOSSES,
    reference_in_batch_negatives,
    reference_triplet,
    replicated_loss_and_gradient,
)


def reference_cosine(first, second):
    first = first / np.linalg.norm(first, axis=-1, keepdims=True)
    second = second / np.linalg.norm(second, axis=-1, keepdims=True)
    return np.sum(first * second, axis=-1)


def reference_angle(first, second):
    """Li and Li's angle similarity, one row at a time in complex arithmetic."""
    out = []
    for x, w in zip(first, second, strict=True):
        if len(x) % 2:
            x, w = np.append(x, 0.0), np.append(w, 0.0)
        half = len(x) // 2
        zx, zw = x[:half] + 1j * x[half:], w[:half] + 1j * w[half:]
        quotient = zx / np.linalg.norm(zw) ** 2 * np.conj(zw)  # zx / zw, over the whole norm
        quotient *= np.linalg.norm(zw) / np.linalg.norm(zx)
        out.append(abs(np.sum(quotient.real) + np.sum(quotient.imag)))
    return np.array(out)


def reference_ranking(labels, scores):
    """log(1 + sum over pairs (i, j) with y_i < y_j of exp(s_i - s_j)), term by term."""
    total = 1.0
    for i in range(len(labels)):
        for j in range(len(labels)):
            if labels[i] < labels[j]:
                total += np.exp(scores[i] - scores[j])
    return np.log(total)


def batch(seed, size=12, dim=7):
    rng = np.random.default_rng(seed)
    embeddings = rng.normal(size=(size, 2, dim))
    embeddings /= np.linalg.norm(embeddings, axis=-1, keepdims=True)
    labels = rng.integers(0, 6, size).astype("float64")  # graded 0-5, with ties
    return labels, embeddings


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_cosent_and_angle_equal_their_references(seed, scale):
    labels, pairs = batch(seed)
    cosent = reference_ranking(labels, scale * reference_cosine(pairs[:, 0], pairs[:, 1]))
    angle = reference_ranking(labels, scale * reference_angle(pairs[:, 0], pairs[:, 1]))
    got_cosent = float(CoSENTLoss(scale=scale)(labels, pairs.astype("float32")))
    got_angle = float(AnglELoss(scale=scale)(labels, pairs.astype("float32")))
    assert got_cosent == pytest.approx(cosent, rel=1e-5)
    assert got_angle == pytest.approx(angle, rel=1e-5)
    # in float64 the losses agree with the references to rounding
    assert float(CoSENTLoss(scale=scale).call(labels, pairs)) == pytest.approx(cosent, rel=1e-12)
    assert float(AnglELoss(scale=scale).call(labels, pairs)) == pytest.approx(angle, rel=1e-12)


def test_angle_similarity_equals_the_complex_reference_for_odd_and_even_widths():
    rng = np.random.default_rng(3)
    for dim in (6, 7):
        first, second = rng.normal(size=(5, dim)), rng.normal(size=(5, dim))
        np.testing.assert_allclose(
            angle_similarity(first, second).numpy(), reference_angle(first, second), rtol=1e-12
        )


def test_ranking_asks_only_for_the_labels_order():
    labels, pairs = batch(4)
    loss = CoSENTLoss()
    # any increasing map of the labels keeps their order, so the loss is the same
    assert float(loss.call(labels, pairs)) == float(loss.call(np.exp(labels) * 3.0, pairs))
    # a batch whose labels all tie ranks nothing: log(1) = 0
    assert float(loss.call(np.full(len(labels), 2.0), pairs)) == 0.0


# scale 5: central differences err by O(eps^2 * scale^3), which at 20 hides in small entries
@pytest.mark.parametrize("loss", [CoSENTLoss(scale=5.0), AnglELoss(scale=5.0)])
def test_cosent_and_angle_gradients_equal_finite_differences(loss):
    labels, pairs = batch(5, size=8, dim=6)
    check = tapefit.gradcheck(lambda p: loss.call(labels, p), pairs, samples=24)
    assert check.checked == 24
    assert check.max_relative_error < 1e-6


def test_ranking_losses_are_finite_under_mixed_float16():
    labels, pairs = batch(6)
    half = tf.constant(pairs, tf.float16)
    for loss in (CoSENTLoss(), AnglELoss()):
        value = loss.call(labels, half)
        assert value.dtype == tf.float32 and np.isfinite(float(value))
        reference = float(loss.call(labels, pairs))
        assert float(value) == pytest.approx(reference, rel=1e-2)


def test_ranking_losses_serialise_and_are_chosen_by_name():
    for name, loss_class in (("cosent", CoSENTLoss), ("angle", AnglELoss)):
        loss = make_pair_loss(name, scale=7.0, margin=0.3, label_range=(0, 5))
        assert type(loss) is loss_class and loss.scale == 7.0
        again = keras.losses.deserialize(keras.losses.serialize(loss))
        assert type(again) is loss_class and again.scale == 7.0 and again.name == name
    with pytest.raises(TapefitError, match=r"cosent scale=0 must be > 0"):
        CoSENTLoss(scale=0)


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


def in_batch(seed, size=10, dim=6):
    """Positive pairs whose rows 0 and 1 share an anchor text and rows 2 and 3 a positive."""
    rng = np.random.default_rng(seed)
    pairs = rng.normal(size=(size, 2, dim))
    pairs /= np.linalg.norm(pairs, axis=-1, keepdims=True)
    ids = np.arange(2 * size).reshape(size, 2)
    ids[1, 0] = ids[0, 0]
    ids[3, 1] = ids[2, 1]
    return ids, pairs


@pytest.mark.parametrize("mining", ["hard", "all"])
@pytest.mark.parametrize("margin", [0.3, 1.5])
def test_triplet_equals_its_reference_with_shared_texts_masked(mining, margin):
    ids, pairs = in_batch(8)
    expected = reference_triplet(ids, pairs, margin, mining)
    loss = TripletLoss(margin=margin, mining=mining)
    assert float(loss.call(ids, pairs).numpy().mean()) == pytest.approx(expected, rel=1e-12)
    assert float(loss(ids, pairs.astype("float32"))) == pytest.approx(expected, rel=1e-5)


def test_symmetric_in_batch_negatives_equals_its_reference():
    ids, pairs = in_batch(9)
    loss = InBatchNegativesLoss(scale=5.0, symmetric=True)
    expected = reference_in_batch_negatives(ids, pairs, 5.0, symmetric=True)
    assert float(loss.call(ids, pairs).numpy().mean()) == pytest.approx(expected, rel=1e-10)
    one_way = float(InBatchNegativesLoss(scale=5.0)(ids, pairs))
    assert one_way != pytest.approx(expected, rel=1e-6)  # the backward half counts


@pytest.mark.parametrize(
    "loss", [TripletLoss(margin=1.5, mining="all"), InBatchNegativesLoss(5.0, symmetric=True)]
)
def test_triplet_and_symmetric_gradients_equal_finite_differences(loss):
    ids, pairs = in_batch(10, size=6)
    check = tapefit.gradcheck(lambda p: tf.reduce_mean(loss.call(ids, p)), pairs, samples=24)
    assert check.checked == 24 and check.max_relative_error < 1e-6


def test_triplet_options_are_checked_and_serialise():
    with pytest.raises(TapefitError, match=r"triplet mining='easy' must be hard or all"):
        TripletLoss(mining="easy")
    with pytest.raises(TapefitError, match=r"triplet margin=3 must lie in \(0, 2\]"):
        TripletLoss(margin=3)
    loss = make_pair_loss("triplet", margin=0.2, mining="all", scale=3.0)
    again = keras.losses.deserialize(keras.losses.serialize(loss))
    assert (type(again), again.margin, again.mining) == (TripletLoss, 0.2, "all")
    symmetric = make_pair_loss("in_batch_negatives", symmetric=True)
    assert keras.losses.deserialize(keras.losses.serialize(symmetric)).symmetric is True


@pytest.mark.slow
@GATHERING_LOSSES
def test_negatives_gathered_across_replicas_equal_one_device(mirrored_strategy, make):
    ids, pairs = in_batch(12, size=8)
    pairs = pairs.astype("float32")
    whole = tf.Variable(pairs)
    with tf.GradientTape() as tape:
        expected = tf.reduce_mean(make(False).call(ids, whole))
    expected_gradient = tape.gradient(expected, whole).numpy()
    value, gradient = replicated_loss_and_gradient(mirrored_strategy, make(True), ids, pairs)
    assert value == pytest.approx(float(expected), abs=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-6)
    # without gathering each replica sees only its half's negatives: another loss
    alone, _ = replicated_loss_and_gradient(mirrored_strategy, make(False), ids, pairs)
    assert abs(alone - float(expected)) > 1e-3


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


@pytest.mark.parametrize("target_range", [(0.0, 1.0), (-1.0, 1.0)])
def test_cosine_mse_maps_its_targets_back_onto_the_labels(target_range):
    loss = CosineMSELoss(label_range=(1.0, 5.0), target_range=target_range)
    labels = np.array([1.0, 2.0, 3.5, 5.0])
    targets = loss.rescale(tf.constant(labels)).numpy()
    np.testing.assert_allclose(loss.to_label_scale(targets), labels, atol=1e-12)
    # cosines beyond the target range are the label range's ends
    assert loss.to_label_scale([target_range[0] - 0.5, 1.5]).tolist() == [1.0, 5.0]


def test_only_a_cosine_mse_model_has_a_label_scale():
    regressing = tapefit.SiameseModel(vocabulary=["a"], label_range=[0.0, 5.0])
    assert regressing.similarity_to_label([0.5]).tolist() == [2.5]
    ranking = tapefit.SiameseModel(vocabulary=["a"], loss={"name": "cosent"})
    with pytest.raises(TapefitError, match=r"model\.loss\.name=cosent learns similarities"):
        ranking.similarity_to_label([0.5])
