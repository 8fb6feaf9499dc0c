"""Hard-negative mining (`python -m tapefit.mine`): the block-wise miner equals a brute-force
reference with every filter; a run's model mines a user's pair file, whose output trains with
`data.negative_column=negative` unchanged; bad arguments are one line."""

import csv

import numpy as np
import pytest

import tapefit
from tapefit import TapefitError
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.evaluation.mining import MiningOptions, mine
from tests.helpers import SMALL_SIAMESE, unit


def reference(anchors, corpus, positive_index, excluded, options):
    """The whole score matrix at once, every filter written out."""
    scores = anchors @ corpus.T
    chosen, ranks = [], []
    for row, positive in enumerate(positive_index):
        positive_score = scores[row, positive]
        ranks.append(1 + int((scores[row] > positive_score).sum()))
        order = [
            i
            for i in np.argsort(-scores[row], kind="stable")
            if i != positive and i not in excluded[row]
        ][options.range_min : options.range_max]
        if options.margin is not None:
            order = [i for i in order if scores[row, i] <= positive_score - options.margin]
        if options.relative_margin is not None:
            ceiling = positive_score * (1 - options.relative_margin)
            order = [i for i in order if scores[row, i] <= ceiling]
        chosen.append(order[: options.num_negatives])
    return chosen, ranks


@pytest.mark.parametrize(
    "options",
    [
        MiningOptions(block=7),
        MiningOptions(num_negatives=3, range_min=2, range_max=12, block=5),
        MiningOptions(margin=0.05, block=64),
        MiningOptions(num_negatives=2, relative_margin=0.1, range_max=20, block=3),
    ],
)
def test_the_block_wise_miner_equals_the_brute_force_reference(options):
    rng = np.random.default_rng(0)
    corpus = unit(rng.normal(size=(40, 6))).astype("float32")
    positive_index = rng.integers(0, 40, 25)
    anchors = unit(corpus[positive_index] + rng.normal(0, 0.6, (25, 6))).astype("float32")
    excluded = [frozenset({int(i), int((i + 1) % 40)}) for i in positive_index]
    mined = mine(anchors, corpus[positive_index], corpus, positive_index, excluded, options)
    chosen, ranks = reference(anchors, corpus, positive_index, excluded, options)
    for row, want in enumerate(chosen):
        got = [int(i) for i in mined.negatives[row] if i >= 0]
        assert got == want, row
    assert mined.positive_ranks.tolist() == ranks
    assert (mined.negatives >= 0).sum() < mined.negatives.size or options.margin is None


def test_impossible_ranges_are_refused():
    with pytest.raises(TapefitError, match="range_max=2 must be at least range_min"):
        MiningOptions(range_min=2, range_max=2)


def write_pairs(path, anchors, positives):
    with path.open("w", newline="") as file:
        writer = csv.writer(file, delimiter="\t")
        writer.writerow(["query", "answer"])
        writer.writerows(zip(anchors, positives, strict=True))


@pytest.mark.slow
def test_a_run_mines_a_users_file_and_the_output_trains_with_its_negatives(
    tmp_path, monkeypatch, capsys
):
    from tapefit import mine as command

    monkeypatch.chdir(tmp_path)
    generator = PairGenerator(seed=5)
    for name, count in (("train", 300), ("test", 60)):
        anchors, positives, _ = generator.pairs(count)
        write_pairs(tmp_path / f"{name}.tsv", anchors, positives)
    pairs = [
        "experiment=siamese",
        "data=pairs_file",
        "data.test_path=test.tsv",
        "data.text1_column=query",
        "data.text2_column=answer",
        "data.label_column=null",
        *SMALL_SIAMESE,
        "model.loss.name=in_batch_negatives",
        "trainer.epochs=1",
        "trainer.verbose=0",
    ]
    tapefit.run(tapefit.compose([*pairs, "data.train_path=train.tsv"]), tmp_path / "first")
    arguments = ["run=first", "input=train.tsv", "output=mined.tsv", "num_negatives=2"]
    assert command.main(arguments) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    with (tmp_path / "mined.tsv").open() as file:
        rows = list(csv.DictReader(file, delimiter="\t"))
    assert list(rows[0]) == [
        "query", "answer", "negative", "positive_rank", "positive_score", "negative_score"
    ]  # fmt: skip
    assert said.startswith(f"mined: {len(rows)} rows for 300 anchors into mined.tsv; ")
    positives_of = {}
    for row in rows:
        positives_of.setdefault(row["query"], set()).add(row["answer"])
    for row in rows:
        assert row["negative"] not in positives_of[row["query"]] | {row["query"]}
        assert int(row["positive_rank"]) >= 1
    # the outputs train with their negatives, unchanged
    assert command.main(["run=first", "input=test.tsv", "output=mined_test.tsv"]) == 0
    mined = ["data.train_path=mined.tsv", "data.test_path=mined_test.tsv"]
    again = tapefit.run(
        tapefit.compose([*pairs, *mined, "data.negative_column=negative"]), tmp_path / "second"
    )
    assert again["samples"]["train"] > 0
    assert command.main(["run=first", "input=train.tsv", "output=out.txt"]) == 2
    assert "write .tsv, .csv or .jsonl" in capsys.readouterr().err
