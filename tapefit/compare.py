"""`python -m tapefit.compare`: the candidate Siamese recipes of docs/explanation/sts-preset.md
on your own STS-style corpus, ranked on validation (the measurement behind `experiment=sts`).

Each candidate is the real CLI's configuration (`tapefit.compose` + `tapefit.run`) on the same
pair files and the same epoch budget; the tested model of each run is its best epoch by
validation Spearman. Candidates are ranked on validation only; test Spearman (with `--test`) is
printed beside it, never used to choose. The first row is the tutorial's recipe
(`experiment=siamese`: LSTM, last state, cosine MSE), the baseline the preset must beat.

    python -m tapefit.compare --train sts-train.csv --validation sts-dev.csv \
        --test sts-test.csv data.format=tsv data.header=false data.quoting=none \
        data.text1_column=5 data.text2_column=6 data.label_column=4

(the STS benchmark's own files: tab-separated, no header, score in column 4). Writes every
figure to a JSON file with `--out`. Bad input ends with one `tapefit: error:` line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import tapefit
from tapefit.errors import TapefitError

TUTORIAL = ["experiment=siamese"]
BILSTM_MAX = [*TUTORIAL, "model.encoder.bidirectional=true", "model.encoder.pooling=max"]
CANDIDATES: dict[str, list[str]] = {
    "tutorial (LSTM last, cosine_mse)": TUTORIAL,
    "LSTM mean, cosent": [*TUTORIAL, "model.encoder.pooling=mean", "model.loss.name=cosent"],
    "BiLSTM max, cosine_mse": [
        *TUTORIAL,
        "model.encoder.bidirectional=true",
        "model.encoder.pooling=max",
    ],
    "BiLSTM max, cosent": [
        *TUTORIAL,
        "model.encoder.bidirectional=true",
        "model.encoder.pooling=max",
        "model.loss.name=cosent",
    ],
    "BiLSTM max, angle": [
        *TUTORIAL,
        "model.encoder.bidirectional=true",
        "model.encoder.pooling=max",
        "model.loss.name=angle",
    ],
    "Transformer mean, cosent": [
        *TUTORIAL,
        "model.encoder.rnn=transformer",
        "model.encoder.units=128",
        "model.encoder.pooling=mean",
        "model.loss.name=cosent",
    ],
    "bag of embeddings mean, cosent": [
        *TUTORIAL,
        "model.encoder.rnn=none",
        "model.encoder.pooling=mean",
        "model.loss.name=cosent",
    ],
    # round 2: around round 1's best on validation (BiLSTM max, cosine_mse)
    "BiLSTM max, cosine_mse, 128 units": [*BILSTM_MAX, "model.encoder.units=128"],
    "BiLSTM max, cosine_mse, 2 layers": [*BILSTM_MAX, "model.encoder.num_layers=2"],
    "BiLSTM max, cosine_mse, 300-wide embedding": [*BILSTM_MAX, "model.encoder.embedding_dim=300"],
    "BiLSTM max, cosine_mse, lr 5e-4": [*BILSTM_MAX, "optimizer.learning_rate=5e-4"],
    "BiLSTM max, cosine_mse, batch 32": [*BILSTM_MAX, "data.batch_size=32"],
    "BiLSTM max, cosine_mse, recurrent dropout 0.3": [
        *BILSTM_MAX,
        "model.encoder.recurrent_dropout=0.3",
    ],
    "preset (experiment=sts)": ["experiment=sts"],
    # round 3: the preset's tokenizer, word against WordPiece pieces learnt on the training texts
    "preset, wordpiece 8000": ["experiment=sts", "data.tokenizer=wordpiece"],
    "preset, wordpiece 4000": [
        "experiment=sts",
        "data.tokenizer=wordpiece",
        "data.wordpiece_vocabulary_size=4000",
    ],
}


def measure(candidates: list[str], data: list[str], scratch: str) -> dict[str, dict]:
    """Validation and test Spearman, epochs and seconds per candidate."""
    results = {}
    for name in candidates:
        cfg = tapefit.compose(
            [*CANDIDATES[name], *data, "trainer.verbose=0", "trainer.save_model=false"]
        )
        started = time.perf_counter()
        metrics = tapefit.run(cfg, f"{scratch}/{len(results)}")
        results[name] = {
            "val_spearman": metrics["objective_value"],
            "test_spearman": metrics.get("test_spearman"),
            "best_epoch": metrics.get("tested_epoch"),
            "seconds": round(time.perf_counter() - started, 1),
            "overrides": CANDIDATES[name],
        }
        print(f"{name}: {results[name]}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table ranked on validation; 0, or 2 after a `tapefit: error:` line.

    Examples:
        >>> main(["--train", "absent.csv", "--validation", "absent.csv"])
        2
    """
    try:
        compare(argv)
    except TapefitError as error:
        print(f"tapefit: error: {error}", file=sys.stderr)
        return 2
    return 0


def compare(argv: list[str] | None = None) -> dict[str, dict]:
    """Parse the arguments, run every candidate, print the table; the results by candidate."""
    parser = argparse.ArgumentParser(
        prog="python -m tapefit.compare", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--train", required=True, type=Path)
    parser.add_argument("--validation", required=True, type=Path)
    parser.add_argument("--test", type=Path, help="reported beside, never used to choose")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=CANDIDATES)
    parser.add_argument("--out", type=Path, help="write every figure to this JSON file")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (columns…)")
    args = parser.parse_args(argv)
    for option, split in (("--train", args.train), ("--validation", args.validation)):
        if not split.exists():
            raise TapefitError(f"{option} {split}: no such file; give the corpus's pair files")
    data = [
        "data=pairs_file",
        f"data.train_path={args.train.resolve()}",
        f"data.validation_path={args.validation.resolve()}",
        *([f"data.test_path={args.test.resolve()}"] if args.test else []),
        *args.overrides,
    ]
    with tempfile.TemporaryDirectory() as scratch:
        results = measure(args.candidates, data, scratch)
    print(f"\n{'candidate':<34} {'val Spearman':>12} {'test Spearman':>13} {'epoch':>5} {'s':>6}")
    for name, r in sorted(results.items(), key=lambda item: -item[1]["val_spearman"]):
        print(
            f"{name:<34} {r['val_spearman']:>12.4f} "
            f"{'-' if r['test_spearman'] is None else format(r['test_spearman'], '.4f'):>13} "
            f"{r['best_epoch'] or '':>5} {r['seconds']:>6.1f}"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    sys.exit(main())
