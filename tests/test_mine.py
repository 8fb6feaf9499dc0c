"""`python -m tapefit.mine` (`tapefit.mine`): a run's model mines a user's pair file, whose
output trains with `data.negative_column=negative` unchanged; bad arguments are one line."""

import csv

import pytest

import tapefit
from tapefit.data.synthetic_pairs import PairGenerator
from tests.helpers import SMALL_SIAMESE


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
