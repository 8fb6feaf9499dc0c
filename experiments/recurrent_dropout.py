"""Does the Siamese presets' `recurrent_dropout` earn its cost? On a GPU it keeps every LSTM off
cuDNN (and, under Keras' auto, off XLA too): `python -m tapefit.doctor` says so. This script
measures what the presets would lose without it, on CPU, selected on validation.

    python experiments/recurrent_dropout.py --json /tmp/dropout.json
    python experiments/recurrent_dropout.py --quick          # the suite's smoke run

For each preset (the tutorial's `experiment=siamese`, the `experiment=sts` encoder, and the
Transformer encoder, on the synthetic pairs) and each variant (recurrent dropout 0.1, the
default before this measurement; none; input dropout 0.1 instead, which cuDNN runs, and
which for the Transformer drops token embeddings instead of inside its blocks), it trains
the real configuration (`tapefit.compose` + `tapefit.run`) with each seed. A run's model is
its best epoch by validation Spearman; the table gives the median over seeds of that
validation Spearman (what a choice may use), the test Spearman beside it (reported, never
used to choose), and seconds per epoch on this CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import tapefit

PRESETS = {
    "siamese": ["experiment=siamese"],  # the tutorial's: LSTM 64, last state
    "sts": [  # experiment=sts's encoder and loss: BiLSTM 128, max pooling, WordPiece
        "experiment=siamese",
        "model.encoder.bidirectional=true",
        "model.encoder.pooling=max",
        "model.encoder.units=128",
        "data.tokenizer=wordpiece",
        "trainer.epochs=8",
    ],
    "transformer": [  # compare's Transformer candidate: recurrent_dropout is its blocks' dropout
        "experiment=siamese",
        "model.encoder.rnn=transformer",
        "model.encoder.units=128",
        "model.encoder.pooling=mean",
        "model.loss.name=cosent",
    ],
}
VARIANTS = {
    "recurrent_dropout 0.1": ["model.encoder.recurrent_dropout=0.1", "model.encoder.dropout=0"],
    "no dropout": ["model.encoder.recurrent_dropout=0", "model.encoder.dropout=0"],
    "input dropout 0.1": ["model.encoder.recurrent_dropout=0", "model.encoder.dropout=0.1"],
}
QUICK = ["data.train_size=256", "data.val_size=64", "data.test_size=64", "trainer.epochs=1"]


def measure(overrides: list[str], seed: int, root: Path) -> dict[str, float]:
    """One run: its best validation Spearman, test Spearman and seconds per epoch."""
    cfg = tapefit.compose([*overrides, f"seed={seed}", "trainer.verbose=0"])
    run_dir = root / f"run{len(list(root.iterdir()))}"
    metrics = tapefit.run(cfg, run_dir)
    return {
        "val_spearman": float(metrics["objective_value"]),
        "test_spearman": float(metrics["test_spearman"]),
        "s_per_epoch": float(metrics["train_time_s"]) / int(metrics["epochs_run"]),
    }


def main(argv: list[str] | None = None) -> dict:
    """Measure, print the table, return every figure (and write it with `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny data, one epoch, one seed")
    parser.add_argument("--presets", nargs="+", choices=list(PRESETS), default=list(PRESETS))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    seeds = 1 if args.quick else args.seeds
    report: dict = {"seeds": seeds, "quick": args.quick, "rows": []}
    with tempfile.TemporaryDirectory() as scratch:
        for preset in args.presets:
            for variant in args.variants:
                preset_overrides, variant_overrides = PRESETS[preset], VARIANTS[variant]
                overrides = [*preset_overrides, *variant_overrides, *(QUICK if args.quick else [])]
                runs = [measure(overrides, seed, Path(scratch)) for seed in range(seeds)]
                row = {"preset": preset, "variant": variant, "runs": runs}
                for key in ("val_spearman", "test_spearman", "s_per_epoch"):
                    row[key] = statistics.median(run[key] for run in runs)
                report["rows"].append(row)
    print("preset | variant | val Spearman (median) | test Spearman | s/epoch (CPU)")
    for row in report["rows"]:
        print(
            f"{row['preset']} | {row['variant']} | {row['val_spearman']:.4f} | "
            f"{row['test_spearman']:.4f} | {row['s_per_epoch']:.2f}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
