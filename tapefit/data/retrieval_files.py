"""Retrieval data from files: queries, a corpus and relevance judgements (qrels), in the layout
the BEIR benchmarks use.

Why: a pair file holds retrieval only implicitly (the positive pairs); a search collection is
usually given as three files. `queries.jsonl` and `corpus.jsonl` hold one JSON object per line
with `_id` and `text` (a corpus line may add `title`, which is put before the text, as BEIR
does); the qrels file is tab-separated `query-id`, `corpus-id`, `score` with a header line, and
a score above 0 marks the document relevant. Queries without a relevant document are left out,
as BEIR's evaluator does.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tapefit.errors import TapefitError

QRELS_HEADER = ("query-id", "corpus-id", "score")


def read_texts(path: str | Path, what: str) -> dict[str, str]:
    """`_id -> text` of a JSONL file of queries or documents.

    Args:
        path: The file.
        what: `queries` or `corpus`, for the messages.

    Returns:
        The texts by id, in file order.

    Raises:
        TapefitError: a missing file, a line that is not a JSON object with `_id` and `text`,
            or an id given twice.

    Example:
        >>> import tempfile, pathlib
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "corpus.jsonl"
        >>> _ = file.write_text('{"_id": "d1", "title": "Cats", "text": "They purr."}\\n')
        >>> read_texts(file, "corpus")
        {'d1': 'Cats They purr.'}
    """
    path = Path(path)
    if not path.is_file():
        raise TapefitError(f"{what}={path}: no such file; give a JSONL file of _id and text")
    texts: dict[str, str] = {}
    with path.open(encoding="utf-8-sig") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key, text = str(record["_id"]), str(record["text"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise TapefitError(
                    f"{what}={path} line {number}: not a JSON object with _id and text: "
                    f"{line.strip()[:80]!r}"
                ) from None
            if key in texts:
                raise TapefitError(f"{what}={path} line {number}: _id {key!r} is given twice")
            title = str(record.get("title") or "").strip()
            texts[key] = f"{title} {text}" if title else text
    if not texts:
        raise TapefitError(f"{what}={path} holds no lines: give at least one _id and text")
    return texts


def read_qrels(path: str | Path) -> dict[str, set[str]]:
    """`query-id -> relevant corpus-ids` of a qrels file (a score above 0 is relevant).

    Args:
        path: Tab-separated `query-id`, `corpus-id`, `score`, with that header line.

    Returns:
        The relevant documents of each query that has one.

    Raises:
        TapefitError: a missing file, another header, or a row whose score is not a number.

    Example:
        >>> import tempfile, pathlib
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "qrels.tsv"
        >>> _ = file.write_text("query-id\\tcorpus-id\\tscore\\nq1\\td1\\t1\\nq1\\td2\\t0\\n")
        >>> read_qrels(file)
        {'q1': {'d1'}}
    """
    path = Path(path)
    if not path.is_file():
        raise TapefitError(f"qrels={path}: no such file; give query-id, corpus-id, score rows")
    relevant: dict[str, set[str]] = {}
    with path.open(encoding="utf-8-sig", newline="") as file:
        rows = csv.reader(file, delimiter="\t")
        header = tuple(next(rows, ()))
        if header != QRELS_HEADER:
            raise TapefitError(
                f"qrels={path}: the header is {header}, not {QRELS_HEADER} (tab-separated)"
            )
        for number, row in enumerate(rows, 2):
            if not row:
                continue
            try:
                query, document, score = row[0], row[1], float(row[2])
            except (IndexError, ValueError):
                raise TapefitError(
                    f"qrels={path} line {number}: not query-id, corpus-id, score: {row}"
                ) from None
            if score > 0:
                relevant.setdefault(query, set()).add(document)
    return relevant


def retrieval_files(
    queries: str | Path, corpus: str | Path, qrels: str | Path
) -> tuple[list[str], list[str], list[frozenset[int]]]:
    """The queries, the corpus and each query's relevant corpus indices, from three files.

    Args:
        queries: JSONL of `_id`, `text`.
        corpus: JSONL of `_id`, `text` (and optionally `title`).
        qrels: TSV of `query-id`, `corpus-id`, `score`.

    Returns:
        `(query texts, corpus texts, relevant indices per query)`, for the queries that have
        a relevant document.

    Raises:
        TapefitError: as the readers, or qrels naming ids the files lack, or no query with a
            relevant document.

    Example:
        >>> import json, tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "cats"}))
        >>> docs = [{"_id": "d1", "text": "dogs"}, {"_id": "d2", "text": "cats purr"}]
        >>> _ = (folder / "c.jsonl").write_text("\\n".join(json.dumps(d) for d in docs))
        >>> _ = (folder / "r.tsv").write_text("query-id\\tcorpus-id\\tscore\\nq1\\td2\\t1\\n")
        >>> retrieval_files(folder / "q.jsonl", folder / "c.jsonl", folder / "r.tsv")
        (['cats'], ['dogs', 'cats purr'], [frozenset({1})])
    """
    query_texts = read_texts(queries, "queries")
    corpus_texts = read_texts(corpus, "corpus")
    judged = read_qrels(qrels)
    index = {key: position for position, key in enumerate(corpus_texts)}
    unknown_queries = sorted(set(judged) - set(query_texts))
    unknown_documents = sorted({d for docs in judged.values() for d in docs} - set(index))
    files = {"queries": queries, "corpus": corpus}
    for unknown, what in ((unknown_queries, "queries"), (unknown_documents, "corpus")):
        if unknown:
            raise TapefitError(
                f"qrels={qrels} names {len(unknown)} id(s) that {what}={files[what]} lacks, "
                f"e.g. {unknown[:3]}: give the files of one collection"
            )
    kept = [key for key in query_texts if key in judged]
    if not kept:
        raise TapefitError(f"qrels={qrels} marks no document relevant (score > 0) to any query")
    relevant = [frozenset(index[d] for d in judged[key]) for key in kept]
    return [query_texts[key] for key in kept], list(corpus_texts.values()), relevant
