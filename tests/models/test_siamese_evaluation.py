"""`tapefit.models.siamese_evaluation`: the whole-split validation callbacks a `SiameseModel`
adds, and its test report (metrics, thresholds, retrieval, Matryoshka sizes, `similarity.png`)."""

from types import SimpleNamespace

import numpy as np
import pytest

from tapefit.evaluation.matryoshka import MatryoshkaMetrics
from tapefit.evaluation.metrics import SplitMetrics
from tapefit.evaluation.retrieval import RetrievalMetrics, RetrievalTask
from tapefit.models.siamese_evaluation import pair_report, validation_callbacks


def vector(text):
    """`x<k>` texts point along the first axis; `y<k>` agree with them in the first
    component only for k > 2."""
    kind, k = str(text)[0], int(str(text)[1:])
    return [1.0, 0.0] if kind == "x" else [1.0 if k > 2 else -1.0, 1.0]


class ScoredModel:
    """A model whose `predict` gives each split's fixed scores (the data's `inputs` are the
    split's name) and whose `encode` gives each text its `vector`."""

    def __init__(self, scores):
        self.scores, self.predicted = scores, []

    def predict(self, inputs, verbose=0):
        self.predicted.append(inputs)
        return np.asarray(self.scores[inputs], "float32")[:, None]

    def encode(self, texts, batch_size=256, normalize=True, dim=None):
        vectors = np.array([vector(t) for t in texts])
        return vectors if dim is None else vectors[:, :dim]


def pair_data(label_type, **splits):
    """The parts of a run's data object the report reads; `splits`: name -> (a, b, labels)."""
    return SimpleNamespace(
        splits={
            name: SimpleNamespace(texts=(np.array(a), np.array(b)), labels=np.array(labels))
            for name, (a, b, labels) in splits.items()
        },
        val="val batches" if "val" in splits else None,
        label_type=label_type,
        inputs=lambda name: name,
        read_counts=lambda: {"skipped_lines": 3},
    )


GRADED_TEST = (["x1", "x2", "x3", "x4"], ["y1", "y2", "y3", "y4"], [0.0, 1.0, 2.0, 5.0])


def one_task(split):
    return RetrievalTask(list(split.texts[0][:1]), ["y0", "x0"], [frozenset({1})])


def test_without_a_validation_split_in_memory_there_are_no_callbacks():
    streamed = pair_data("graded")
    streamed.val = "a validation pipeline without its pairs kept"
    assert validation_callbacks(streamed, one_task) == []


def test_a_graded_validation_split_gets_correlation_retrieval_and_matryoshka_callbacks():
    data = pair_data("graded", val=GRADED_TEST)
    tasks = []
    callbacks = validation_callbacks(data, lambda split: tasks.append(split) or one_task(split))
    assert [type(c) for c in callbacks] == [SplitMetrics, RetrievalMetrics]
    assert tasks == [data.splits["val"]]
    assert callbacks[0].inputs == "val" and callbacks[0].prefix == "val_"
    assert callbacks[0].logged_names == ["val_pearson", "val_spearman"]

    callbacks = validation_callbacks(data, None, dims=[1, 2])
    assert [type(c) for c in callbacks] == [SplitMetrics, MatryoshkaMetrics]
    assert callbacks[1].logged_names == [
        f"val_{name}_{dim}" for dim in (1, 2) for name in ("pearson", "spearman")
    ]
    assert [list(t) for t in callbacks[1].texts] == [GRADED_TEST[0], GRADED_TEST[1]]


def test_a_binary_validation_split_is_scored_by_auc_and_threshold():
    data = pair_data("binary", val=(["x1", "x2"], ["y1", "y2"], [0, 1]))
    [callback] = validation_callbacks(data, None)
    assert callback.logged_names == ["val_auc", "val_best_accuracy", "val_best_f1"]


def test_the_graded_report_scores_the_test_split_and_draws_the_similarity_plot(tmp_path):
    model = ScoredModel({"test": [0.1, 0.2, 0.3, 0.4]})  # ranked as the labels: spearman 1
    data = pair_data("graded", val=GRADED_TEST, test=GRADED_TEST)
    report = pair_report(model, data, tmp_path, None)
    assert report == {
        "skipped_lines": 3,
        "test_pearson": pytest.approx(np.corrcoef([0.1, 0.2, 0.3, 0.4], GRADED_TEST[2])[0, 1]),
        "test_spearman": pytest.approx(1.0),
    }
    assert model.predicted == ["test"]  # graded labels: no thresholds from validation
    assert (tmp_path / "similarity.png").read_bytes()[:4] == b"\x89PNG"


def test_the_binary_report_takes_its_thresholds_from_validation(tmp_path):
    model = ScoredModel({"val": [0.2, 0.4, 0.6, 0.8], "test": [0.3, 0.5, 0.7, 0.9]})
    data = pair_data(
        "binary",
        val=(["x1", "x2", "x3", "x4"], ["y1", "y2", "y3", "y4"], [0, 0, 1, 1]),
        test=(["x1", "x2", "x3", "x4"], ["y1", "y2", "y3", "y4"], [0, 1, 1, 1]),
    )
    report = pair_report(model, data, tmp_path, None)
    assert model.predicted == ["test", "val"]
    assert report["test_auc"] == 1.0 and report["test_best_accuracy"] == 1.0
    # the validation threshold (between 0.4 and 0.6) calls the test's 0.5 a negative
    assert report["test_accuracy_at_val_threshold"] == 0.75
    assert {"threshold_accuracy", "threshold_f1", "test_f1_at_val_threshold"} <= set(report)


def test_the_report_adds_retrieval_and_each_matryoshka_sizes_metrics(tmp_path):
    model = ScoredModel({"test": [0.1, 0.2, 0.3, 0.4]})
    data = pair_data("graded", test=GRADED_TEST)
    report = pair_report(model, data, tmp_path, one_task, dims=[1])
    assert report["test_recall_at_1"] == 1.0  # "x1" finds "x0" first
    assert report["test_recall_at_1_1"] == 1.0  # at the leading component too
    # the leading component's cosines: -1, -1, 1, 1 against the labels 0, 1, 2, 5
    assert report["test_spearman_1"] == pytest.approx(2 / np.sqrt(5))
    assert report["test_spearman"] == pytest.approx(1.0)  # the full width's, from predict
    assert "test_ndcg_at_10" in report and "test_ndcg_at_10_1" in report


def test_a_report_without_a_test_split_has_only_the_read_counts(tmp_path):
    report = pair_report(ScoredModel({}), pair_data("graded", val=GRADED_TEST), tmp_path, None)
    assert report == {"skipped_lines": 3} and not (tmp_path / "similarity.png").exists()
