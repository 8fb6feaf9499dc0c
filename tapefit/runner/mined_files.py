"""A pair file written again with hard negatives mined by a finished run's model, for
`python -m tapefit.mine`; the output feeds `data.negative_column=negative` unchanged."""

from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import keras
import numpy as np

from tapefit.data.pair_files import PairFileSpec, read_pair_file
from tapefit.errors import TapefitError
from tapefit.evaluation.mining import MiningOptions, mine
from tapefit.files import atomic_write
from tapefit.runner.finished_runs import config_and_model_file

NEGATIVE = "negative"  # the mined column, as data.negative_column names it
EXTRA = ("positive_rank", "positive_score", "negative_score")


def pair_spec(data_node: Any) -> PairFileSpec:
    """How to read the input: the run's pair-file keys (and the overrides), else defaults."""
    given = {f.name: data_node[f.name] for f in fields(PairFileSpec) if f.name in data_node}
    given["negative_column"] = None  # the input's negatives, if any, are not read
    return PairFileSpec(**given)


def mine_run(
    run_dir: str | Path,
    source: str | Path,
    output: str | Path,
    overrides: list[str],
    options: MiningOptions,
    ckpt: str = "tested",
) -> dict[str, Any]:
    """Encode a pair file's texts with the run's model and write it again with a negative per
    anchor (one row per negative), the positive's rank and score and the negative's score.

    The corpus is the file's positives (each distinct text once); a text equal to a row's
    anchor, or to any positive of that anchor, is never its negative. An anchor without a
    negative inside the filters is left out, and counted.

    Args:
        run_dir: A finished run of a model with `encode` (a `SiameseModel`).
        source: The pair file (any format `data=pairs_file` reads; its columns as the run's
            `data.*_column` keys or the overrides name them).
        output: The file to write: `.tsv`, `.csv` or `.jsonl`.
        overrides: `data.*` changes to how the file is read.
        options: The mining filters.
        ckpt: Which model (`tested`, `best`, `last`, an epoch, or a `.keras` file).

    Returns:
        `rows` written, `anchors`, `without_negative`, `median_positive_rank`.

    Raises:
        TapefitError: an unknown output format or missing folder, a model without
            `encode`, or as `read_pair_file` and `load_run`.
    """
    output = Path(output)
    kind = output.suffix.lower().lstrip(".")
    if kind not in ("tsv", "csv", "jsonl"):
        raise TapefitError(f"output={output}: write .tsv, .csv or .jsonl")
    if not output.parent.is_dir():
        raise TapefitError(f"output={output}: the folder {output.parent} does not exist")
    cfg, path = config_and_model_file(Path(run_dir), overrides, ckpt)
    spec = pair_spec(cfg.data)
    rows = read_pair_file(source, spec)
    model = keras.models.load_model(path)
    if not callable(getattr(model, "encode", None)):
        raise TapefitError(
            f"run={run_dir}'s model ({type(model).__name__}) has no encode(texts): mining needs "
            "a text encoder such as tapefit.models.SiameseModel"
        )
    anchors, positives = [str(t) for t in rows.texts_a], [str(t) for t in rows.texts_b]
    corpus = list(dict.fromkeys(positives))
    where = {text: index for index, text in enumerate(corpus)}
    positives_of: dict[str, set[int]] = {}
    for anchor, positive in zip(anchors, positives, strict=True):
        positives_of.setdefault(anchor, set()).add(where[positive])
    excluded = [frozenset(positives_of[a] | ({where[a]} if a in where else set())) for a in anchors]
    vectors = model.encode(corpus)
    mined = mine(
        model.encode(anchors),
        vectors[[where[p] for p in positives]],
        vectors,
        [where[p] for p in positives],
        excluded,
        options,
    )
    names = [spec.text1_column, spec.text2_column]
    if spec.label_column is not None and not spec.label_column.isdigit():
        names.append(spec.label_column)
    written = []
    for row in range(len(anchors)):
        for slot in range(options.num_negatives):
            index = int(mined.negatives[row, slot])
            if index < 0:
                continue
            values = [anchors[row], positives[row]]
            if len(names) == 3:
                values.append(float(rows.labels[row]))
            written.append(
                [*values, corpus[index], int(mined.positive_ranks[row]),
                 round(float(mined.positive_scores[row]), 6),
                 round(float(mined.negative_scores[row, slot]), 6)]
            )  # fmt: skip
    header = [*(n if not n.isdigit() else f"text{i + 1}" for i, n in enumerate(names)), NEGATIVE]
    _write(output, kind, [*header, *EXTRA], written)
    missing = int((mined.negatives[:, 0] < 0).sum())
    return {
        "rows": len(written),
        "anchors": len(anchors),
        "without_negative": missing,
        "median_positive_rank": float(np.median(mined.positive_ranks)),
    }


def _write(path: Path, kind: str, header: list[str], rows: list[list[Any]]) -> None:
    def write(file: Any) -> None:
        if kind == "jsonl":
            for row in rows:
                file.write(json.dumps(dict(zip(header, row, strict=True))) + "\n")
            return
        writer = csv.writer(file, delimiter="\t" if kind == "tsv" else ",")
        writer.writerow(header)
        writer.writerows(rows)

    atomic_write(path, write)
