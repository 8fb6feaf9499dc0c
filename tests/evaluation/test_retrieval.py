"""Retrieval evaluation: metrics against a brute-force NumPy reference, the task a pair split
holds, and a pair-file run from the CLI whose metrics.json and History carry the metrics."""

import json
import os
import sys

import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.evaluation.retrieval import RetrievalTask, pair_task, retrieval_metrics
from tapefit.objective import metric_direction
from tests import processes
from tests.helpers import pair_file_overrides, run_cli, write_pairs_tsv


def write_collection(folder, task):
    """`task` as BEIR's three files (ids deliberately not positions); their CLI arguments."""
    folder.mkdir()
    queries = [{"_id": f"q{i}", "text": text} for i, text in enumerate(task.queries)]
    corpus = [{"_id": f"d{i}", "text": text} for i, text in enumerate(task.corpus)]
    for name, records in (("queries", queries), ("corpus", corpus[::-1])):
        lines = [json.dumps(record) for record in records]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    rows = [f"q{q}\td{d}\t1" for q, docs in enumerate(task.relevant) for d in sorted(docs)]
    rows.append(f"q0\td{len(task.corpus) - 1}\t0")  # judged not relevant: ignored
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    names = {"queries": "queries.jsonl", "corpus": "corpus.jsonl", "qrels": "qrels.tsv"}
    return [f"{key}={folder / name}" for key, name in names.items()]


def reference_metrics(queries, corpus, relevant):
    """Every query ranks the whole corpus by a full sort; the textbook definitions."""
    out = {
        "recall_at_1": [],
        "recall_at_5": [],
        "recall_at_10": [],
        "mrr_at_10": [],
        "ndcg_at_10": [],
    }
    for query, wanted in zip(queries, relevant, strict=True):
        ranking = list(np.argsort(-(corpus @ query), kind="stable"))
        for k in (1, 5, 10):
            out[f"recall_at_{k}"].append(len(set(ranking[:k]) & wanted) / len(wanted))
        ranks = [ranking.index(i) + 1 for i in wanted]
        first = min(ranks)
        out["mrr_at_10"].append(1.0 / first if first <= 10 else 0.0)
        dcg = sum(1.0 / np.log2(r + 1) for r in ranks if r <= 10)
        ideal = sum(1.0 / np.log2(r + 1) for r in range(1, min(len(wanted), 10) + 1))
        out["ndcg_at_10"].append(dcg / ideal)
    return {name: float(np.mean(values)) for name, values in out.items()}


@pytest.mark.parametrize(("queries", "corpus", "block"), [(40, 300, 7), (5, 8, 1024)])
def test_retrieval_metrics_equal_the_brute_force_reference(queries, corpus, block):
    rng = np.random.default_rng(queries)
    corpus_vectors = rng.normal(size=(corpus, 16)).astype("float32")
    query_vectors = rng.normal(size=(queries, 16)).astype("float32")
    relevant = [
        frozenset(rng.choice(corpus, size=rng.integers(1, 4), replace=False).tolist())
        for _ in range(queries)
    ]
    got = retrieval_metrics(query_vectors, corpus_vectors, relevant, block=block)
    expected = reference_metrics(query_vectors, corpus_vectors, relevant)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name


def test_a_perfect_ranking_scores_one_and_the_metrics_are_maximised():
    corpus = np.eye(12, dtype="float32")
    relevant = [frozenset({i}) for i in range(12)]
    assert set(retrieval_metrics(corpus, corpus, relevant).values()) == {1.0}
    for name in ("val_recall_at_1", "val_mrr_at_10", "test_ndcg_at_10"):
        assert metric_direction(name) == "max"


def test_a_pair_split_holds_queries_its_corpus_and_the_positive_partners():
    texts_a = ["q1", "q1", "q2", "q3", b"q2"]
    texts_b = ["d1", "d2", "d1", "d3", "d4"]
    graded = pair_task(texts_a, texts_b, [5.0, 4.0, 3.9, 4.5, 4.2], "graded", 4.0)
    assert graded.corpus == ["d1", "d2", "d3", "d4"]
    assert graded.queries == ["q1", "q3", "q2"]
    assert graded.relevant == [frozenset({0, 1}), frozenset({2}), frozenset({3})]
    binary = pair_task(texts_a, texts_b, [1, 0, 1, 0, 0], "binary", 4.0)
    assert binary == RetrievalTask(["q1", "q2"], graded.corpus, [frozenset({0}), frozenset({0})])
    with pytest.raises(
        TapefitError,
        match=r"positive pairs \(label >= 6.0\) and this split has none: lower model.retrieval",
    ):
        pair_task(texts_a, texts_b, [5.0] * 5, "graded", 6.0)


def test_bad_relevance_is_one_line():
    with pytest.raises(TapefitError, match="one non-empty relevance set per query"):
        retrieval_metrics(np.ones((2, 3)), np.ones((4, 3)), [frozenset({1})])


@pytest.mark.slow
def test_retrieval_of_a_pair_file_from_the_cli_reaches_metrics_json_and_history(tmp_path):
    generator = PairGenerator(seed=11)
    for name, count in (("train", 1500), ("test", 300)):
        write_pairs_tsv(tmp_path / f"{name}.tsv", *generator.pairs(count))
    run_dir = tmp_path / "run"
    result = run_cli(
        *pair_file_overrides(tmp_path),
        "model.encoder.rnn=none",  # the retrieval's path is tested, not the encoder: a bag of
        "model.encoder.pooling=mean",  # embeddings builds no recurrent graph
        "model.retrieval.enabled=true",
        "model.retrieval.positive_label=3.5",
        "objective=val_ndcg_at_10",
        "trainer.epochs=2",
        "trainer.verbose=0",
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    names = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr_at_10", "ndcg_at_10")
    for name in names:
        assert 0.0 <= metrics[f"test_{name}"] <= 1.0
    assert (
        metrics["test_recall_at_1"] <= metrics["test_recall_at_5"] <= metrics["test_recall_at_10"]
    )
    assert metrics["objective"] == "val_ndcg_at_10" and metrics["objective_direction"] == "max"
    history = json.loads((run_dir / "history.json").read_text())
    assert len(history["val_mrr_at_10"]) == 2
    assert metrics["objective_value"] == max(history["val_ndcg_at_10"])
    # the test split's metrics are those of the reloaded model on the test file's task
    import keras

    model = keras.models.load_model(run_dir / "model.keras")
    rows = [line.split("\t") for line in (tmp_path / "test.tsv").read_text().splitlines()[1:]]
    texts_a, texts_b, labels = zip(*rows, strict=True)
    task = pair_task(texts_a, texts_b, [float(y) for y in labels], "graded", 3.5)
    again = retrieval_metrics(model.encode(task.queries), model.encode(task.corpus), task.relevant)
    for name in names:
        assert again[name] == pytest.approx(metrics[f"test_{name}"], abs=1e-6)
    # the same task as a BEIR-style collection of three files, searched from the CLI
    files = write_collection(tmp_path / "beir", task)
    searched = processes.run(
        [sys.executable, "-m", "tapefit.evaluate", f"run={run_dir}", *files],
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert searched.returncode == 0, searched.stderr[-2000:]
    assert f"retrieval over {len(task.corpus)} texts, {len(task.queries)} queries" in (
        searched.stdout
    )
    # under the collection's folder name (tmp_path/beir/queries.jsonl: beir), beside others
    written = json.loads((run_dir / "eval" / "beir" / "retrieval.json").read_text())
    for name in names:
        assert written[name] == pytest.approx(metrics[f"test_{name}"], abs=1e-6)
