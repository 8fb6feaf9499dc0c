"""Whole-split pair metrics and the callback that puts them in the epoch logs."""

import numpy as np
import pytest
from scipy import stats

from tapefit.evaluation.metrics import best_threshold_accuracy, pair_metrics, roc_auc
from tapefit.objective import resolve_direction


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


@pytest.mark.parametrize(
    ("monitor", "mode"),
    [("val_spearman", "max"), ("val_loss", "min"), ("val_auc", "max"), ("val_accuracy", "max")],
)
def test_auto_mode_knows_which_metrics_grow(monitor, mode):
    assert resolve_direction(monitor, "auto", "callbacks.early_stopping.mode") == mode
    assert resolve_direction(monitor, "min", "callbacks.early_stopping.mode") == "min"
