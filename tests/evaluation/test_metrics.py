"""`tapefit.evaluation.metrics`: whole-split pair metrics (the directions of their names are
tests/test_objective.py's); binary pair classification: the best F1 threshold against a
brute-force search, metrics at a threshold against scikit-learn, and the test split scored at
thresholds chosen on validation."""

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score

from tapefit.evaluation.metrics import (
    at_threshold,
    best_threshold_accuracy,
    best_threshold_f1,
    pair_metrics,
    roc_auc,
    threshold_report,
)


def brute_force_best_accuracy(scores, labels):
    thresholds = np.concatenate([[np.inf], np.unique(scores)])
    return max(np.mean((scores >= t) == labels.astype(bool)) for t in thresholds)


@pytest.mark.parametrize("seed", range(5))
def test_best_threshold_accuracy_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 60)
    scores = np.round(labels * 0.3 + rng.normal(0, 0.3, 60), 1)  # rounding makes ties
    accuracy, threshold = best_threshold_accuracy(scores, labels)
    assert accuracy == pytest.approx(brute_force_best_accuracy(scores, labels))
    assert np.mean((scores >= threshold) == labels.astype(bool)) == pytest.approx(accuracy)


def test_an_all_negative_split_gets_a_finite_threshold_that_predicts_no_positive():
    scores = np.array([0.2, -0.5, 0.9, 0.9])
    accuracy, threshold = best_threshold_accuracy(scores, np.zeros(4))
    assert accuracy == 1.0 and np.isfinite(threshold) and threshold > 0.9
    assert not np.any(scores >= threshold)


def test_graded_metrics_are_over_the_whole_split_not_batch_means():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)
    scores = gold + rng.normal(0, 1.0, 400)
    metrics = pair_metrics(scores, gold, "graded")
    assert metrics["spearman"] == pytest.approx(stats.spearmanr(scores, gold).statistic)
    assert metrics["pearson"] == pytest.approx(np.corrcoef(scores, gold)[0, 1])
    batch_mean = np.mean(
        [stats.spearmanr(scores[i : i + 8], gold[i : i + 8]).statistic for i in range(0, 400, 8)]
    )
    assert abs(metrics["spearman"] - batch_mean) > 0.01


def test_degenerate_inputs_do_not_produce_nan():
    assert pair_metrics(np.ones(10), np.arange(10), "graded") == {"pearson": 0.0, "spearman": 0.0}
    assert roc_auc(np.arange(4), np.ones(4)) == 0.5
    binary = pair_metrics(np.array([0.9, 0.1, 0.8]), np.array([1, 0, 1]), "binary")
    assert binary["auc"] == 1.0 and binary["best_accuracy"] == 1.0


def brute_force_best_f1(scores, labels):
    candidates = np.unique(scores)
    values = [f1_score(labels, scores >= t, zero_division=0.0) for t in candidates]
    return max(values)


@pytest.mark.parametrize("seed", range(5))
def test_best_f1_threshold_equals_a_search_over_every_cut(seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.uniform(-1, 1, 60), 1)  # rounded: many ties, cuts only between them
    labels = (rng.uniform(size=60) < (scores + 1) / 2).astype(int)
    f1, threshold = best_threshold_f1(scores, labels)
    assert f1 == pytest.approx(brute_force_best_f1(scores, labels), abs=1e-12)
    assert f1 == pytest.approx(f1_score(labels, scores >= threshold), abs=1e-12)


@pytest.mark.parametrize("threshold", [-0.5, 0.0, 0.3, 2.0])
def test_metrics_at_a_threshold_equal_scikit_learns(threshold):
    rng = np.random.default_rng(7)
    scores, labels = rng.uniform(-1, 1, 80), rng.integers(0, 2, 80)
    got = at_threshold(scores, labels, threshold)
    predicted = scores >= threshold
    assert got["accuracy"] == pytest.approx(accuracy_score(labels, predicted), abs=1e-12)
    assert got["f1"] == pytest.approx(f1_score(labels, predicted, zero_division=0.0), abs=1e-12)


def test_the_test_split_is_scored_at_thresholds_chosen_on_validation():
    rng = np.random.default_rng(3)
    val_scores, val_labels = rng.uniform(-1, 1, 100), rng.integers(0, 2, 100)
    scores, labels = rng.uniform(-1, 1, 100), rng.integers(0, 2, 100)
    report = threshold_report(val_scores, val_labels, scores, labels)
    assert report["threshold_accuracy"] == best_threshold_accuracy(val_scores, val_labels)[1]
    assert report["threshold_f1"] == best_threshold_f1(val_scores, val_labels)[1]
    cut = report["threshold_f1"]
    assert report["test_f1_at_val_threshold"] == at_threshold(scores, labels, cut)["f1"]
    # the split's own best is an upper bound, reached only if validation picked its cut
    assert report["test_accuracy_at_val_threshold"] <= best_threshold_accuracy(scores, labels)[0]
    assert report["test_f1_at_val_threshold"] <= best_threshold_f1(scores, labels)[0]
