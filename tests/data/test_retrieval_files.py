"""A BEIR-style search collection (queries, corpus, qrels files) read, and refused in one line."""

import json

import pytest

from tapefit import TapefitError
from tapefit.data.retrieval_files import retrieval_files


def write(folder, queries, corpus, qrels):
    for name, records in (("queries", queries), ("corpus", corpus)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder / "queries.jsonl", folder / "corpus.jsonl", folder / "qrels.tsv"


QUERIES = [{"_id": "q1", "text": "cats"}, {"_id": "q2", "text": "dogs"}, {"_id": "q3", "text": "x"}]
CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "They purr."},
    {"_id": "d2", "text": "Dogs bark."},
    {"_id": "d3", "text": "Both sleep."},
]


def test_a_collection_gives_queries_corpus_and_relevant_indices(tmp_path):
    files = write(tmp_path, QUERIES, CORPUS, "q1\td1\t2\nq1\td3\t1\nq2\td2\t1\nq3\td1\t0\n")
    queries, corpus, relevant = retrieval_files(*files)
    assert queries == ["cats", "dogs"]  # q3 has no relevant document: left out, as BEIR does
    assert corpus == ["Cats They purr.", "Dogs bark.", "Both sleep."]  # title before text
    assert relevant == [frozenset({0, 2}), frozenset({1})]


@pytest.mark.parametrize(
    ("queries", "qrels", "message"),
    [
        (QUERIES, "q9\td1\t1\n", r"names 1 id\(s\) that queries=.* lacks, e.g. \['q9'\]"),
        (QUERIES, "q1\td9\t1\n", r"names 1 id\(s\) that corpus=.* lacks, e.g. \['d9'\]"),
        (QUERIES, "q1\td1\tsome\n", r"line 2: not query-id, corpus-id, score"),
        (QUERIES, "q1\td1\t0\n", r"marks no document relevant"),
        ([{"_id": "q1"}], "q1\td1\t1\n", r"line 1: not a JSON object with _id and text"),
        ([QUERIES[0], QUERIES[0]], "q1\td1\t1\n", r"line 2: _id 'q1' is given twice"),
    ],
)
def test_a_bad_collection_is_refused_in_one_line(tmp_path, queries, qrels, message):
    with pytest.raises(TapefitError, match=message) as refused:
        retrieval_files(*write(tmp_path, queries, CORPUS, qrels))
    assert "\n" not in str(refused.value)


def test_a_missing_file_or_another_qrels_header_is_refused(tmp_path):
    queries, corpus, qrels = write(tmp_path, QUERIES, CORPUS, "q1\td1\t1\n")
    with pytest.raises(TapefitError, match=r"corpus=.*nope.jsonl: no such file"):
        retrieval_files(queries, tmp_path / "nope.jsonl", qrels)
    qrels.write_text("qid\tdocid\trel\nq1\td1\t1\n")
    with pytest.raises(TapefitError, match=r"the header is \('qid', 'docid', 'rel'\)"):
        retrieval_files(queries, corpus, qrels)


def test_evaluate_refuses_a_collection_without_all_three_files(tmp_path, capsys):
    from tapefit.evaluate import main

    queries, corpus, _ = write(tmp_path, QUERIES, CORPUS, "q1\td1\t1\n")
    code = main([f"run={tmp_path}", f"queries={queries}", f"corpus={corpus}"])
    assert code == 2
    assert capsys.readouterr().err == (
        "tapefit: error: qrels= is missing: retrieval needs queries=, corpus= and qrels= together\n"
    )
