"""Binary pair classification: the best F1 threshold against a brute-force search, metrics at a
threshold against scikit-learn, and the test split scored at thresholds chosen on validation."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from tapefit.evaluation.metrics import (
    at_threshold,
    best_threshold_accuracy,
    best_threshold_f1,
    threshold_report,
)


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
