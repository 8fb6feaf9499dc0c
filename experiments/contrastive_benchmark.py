"""In-batch-negative training at scale: what the cached step costs and what it buys.

    python experiments/contrastive_benchmark.py memory      # peak RSS, step time: batch 64 -> 1,024
    python experiments/contrastive_benchmark.py retrieval   # MRR@10 / NDCG@10 by batch size
    python experiments/contrastive_benchmark.py mining      # train -> mine -> train, MRR@10

`memory`: `in_batch_negatives` on a small Transformer encoder (2 blocks, width 128, texts of
64 tokens), each batch size once with the ordinary step and once cached
(`model.loss.cache_chunk_size`), each cell in a fresh process of its own so that its peak is
its own. It reports the process's peak RSS over the training steps, that peak less the RSS
at `on_train_begin` (what the steps add), the median seconds per step (the first, which
traces, left out), and the largest batch whose peak fits `--budget-mb`.

`retrieval`: the Siamese LSTM of `experiment=siamese` on a retrieval pair file (synthetic
question/answer pairs, no labels), trained for the same number of epochs at each batch size,
the larger ones cached; selected on val_mrr_at_10, test MRR@10 and NDCG@10 reported. With
`--sqrt-lr`, Adam's learning rate grows with the square root of the batch size.

`mining`: train a model, mine hard negatives for the training file with it (`python -m
tapefit.mine`), then continue from its weights for the same epochs on the mined file, or, as
the control of equal compute, on the original file.

`--set KEY=VALUE ...` adds Hydra overrides to every run of any part (a smoke run's smaller
encoder, say); the figures are then of that configuration.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tapefit import compose, run  # first: sets the backend and TensorFlow's options

# isort: split
import keras

from tapefit import mine as mine_command
from tapefit.data.synthetic_pairs import PairGenerator

QUIET = ["trainer.verbose=0", "trainer.checkpoints=false", "callbacks.tensorboard.enabled=false"]
SMALL_TRANSFORMER = [
    "model.encoder.rnn=transformer",
    "model.encoder.embedding_dim=128",
    "model.encoder.num_heads=4",
    "model.encoder.units=256",
    "model.encoder.num_layers=2",
    "model.encoder.pooling=mean",
    "data.sequence_length=64",
]


def status_kb(field: str) -> int:
    """A `/proc/self/status` figure in kB (VmRSS: now, VmHWM: the peak so far)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


class StepProbe(keras.callbacks.Callback):
    """RSS at the start of training, each step's end time, the peak RSS after the last step."""

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.start_rss_kb = status_kb("VmRSS")
        self.ends = [time.perf_counter()]

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.ends.append(time.perf_counter())
        self.peak_kb = status_kb("VmHWM")  # before validation, which is not measured


def cell(
    batch: int, chunk: int | None, steps: int, out: Path, extra: list[str] | None = None
) -> None:
    """One memory cell, in this process: train `steps` steps at `batch` (with the overrides
    `extra` last), write the figures."""
    probe = StepProbe()
    overrides = [
        "experiment=siamese",
        *SMALL_TRANSFORMER,
        *QUIET,
        "trainer.save_model=false",
        "model.loss.name=in_batch_negatives",
        f"model.loss.cache_chunk_size={'null' if chunk is None else chunk}",
        f"data.batch_size={batch}",
        f"data.train_size={batch * steps}",
        f"data.val_size={batch}",
        f"data.test_size={batch}",
        "trainer.epochs=1",
        *(extra or []),
    ]
    with tempfile.TemporaryDirectory() as run_dir:
        run(compose(overrides), Path(run_dir) / "run", [probe])
    durations = [b - a for a, b in zip(probe.ends, probe.ends[1:], strict=False)]
    result = {
        "batch": batch,
        "chunk": chunk,
        "median_step_s": statistics.median(durations[1:]),
        "first_step_s": durations[0],
        "peak_rss_mb": probe.peak_kb / 1024,
        "added_mb": (probe.peak_kb - probe.start_rss_kb) / 1024,
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    out.write_text(json.dumps(result))


def memory(args: argparse.Namespace) -> dict[str, Any]:
    """Every batch size with and without the cached step, each in a fresh process."""
    cells = []
    with tempfile.TemporaryDirectory() as folder:
        for batch in args.batches:
            for chunk in (None, args.chunk):
                out = Path(folder) / f"{batch}-{chunk}.json"
                command = [sys.executable, __file__, "cell", "--batch", str(batch)]
                command += ["--steps", str(args.steps), "--out", str(out)]
                command += [] if chunk is None else ["--chunk", str(chunk)]
                command += ["--set", *args.set] if args.set else []
                subprocess.run(command, check=True)
                cells.append(json.loads(out.read_text()))
                print(json.dumps(cells[-1]), flush=True)
    largest = {}
    for name, chunk in (("ordinary", None), ("cached", args.chunk)):
        fits = [
            c["batch"] for c in cells if c["chunk"] == chunk and c["peak_rss_mb"] <= args.budget_mb
        ]
        largest[name] = max(fits, default=None)
    print(memory_table(cells, args.chunk))
    print(
        f"largest batch within {args.budget_mb:g} MB peak RSS: ordinary {largest['ordinary']}, "
        f"cached (chunk {args.chunk}) {largest['cached']} (of those measured)"
    )
    return {"cells": cells, "budget_mb": args.budget_mb, "largest_batch": largest}


def memory_table(cells: list[dict], chunk: int) -> str:
    """Ordinary and cached side by side, one row per batch size."""
    lines = [
        "batch | ordinary peak MB | added MB | s/step | cached peak MB | added MB | s/step | "
        "time ratio"
    ]
    for batch in sorted({c["batch"] for c in cells}):
        plain = next(c for c in cells if c["batch"] == batch and c["chunk"] is None)
        cached = next(c for c in cells if c["batch"] == batch and c["chunk"] == chunk)
        ratio = cached["median_step_s"] / plain["median_step_s"]
        lines.append(
            f"{batch} | {plain['peak_rss_mb']:.0f} | {plain['added_mb']:.0f} | "
            f"{plain['median_step_s']:.3f} | {cached['peak_rss_mb']:.0f} | "
            f"{cached['added_mb']:.0f} | {cached['median_step_s']:.3f} | {ratio:.2f}"
        )
    return "\n".join(lines)


def write_pairs(path: Path, generator: PairGenerator, count: int) -> None:
    """`count` question/answer rows (the generator's paraphrase pairs), tab-separated."""
    anchors, positives, _ = generator.pairs(count)
    with path.open("w", newline="") as file:
        writer = csv.writer(file, delimiter="\t")
        writer.writerow(["query", "answer"])
        writer.writerows(zip(anchors, positives, strict=True))


def pair_files(folder: Path, sizes: tuple[int, int, int], seed: int) -> list[str]:
    """Write train/val/test retrieval files; the overrides that read them."""
    generator = PairGenerator(seed=seed)
    for name, count in zip(("train", "val", "test"), sizes, strict=True):
        write_pairs(folder / f"{name}.tsv", generator, count)
    return [
        "experiment=siamese",
        "data=pairs_file",
        f"data.train_path={folder / 'train.tsv'}",
        f"data.validation_path={folder / 'val.tsv'}",
        f"data.test_path={folder / 'test.tsv'}",
        "data.text1_column=query",
        "data.text2_column=answer",
        "data.label_column=null",
        "model.loss.name=in_batch_negatives",
        "model.retrieval.enabled=true",
        "objective=val_mrr_at_10",
        *QUIET,
    ]


def scores(results: dict[str, Any]) -> dict[str, float]:
    """The figures a row reports."""
    return {
        "test_mrr_at_10": results["test_mrr_at_10"],
        "test_ndcg_at_10": results["test_ndcg_at_10"],
        "val_mrr_at_10": results["objective_value"],
        "train_time_s": results["train_time_s"],
        "epochs_run": results["epochs_run"],
    }


def retrieval(args: argparse.Namespace) -> dict[str, Any]:
    """Each batch size for the same epochs (cached above the chunk); test MRR@10 and NDCG@10."""
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for seed in range(args.seeds):
            data = pair_files(folder, args.sizes, seed)
            for batch in args.batches:
                cached = batch > args.chunk
                overrides = [
                    *data,
                    f"data.batch_size={batch}",
                    f"trainer.epochs={args.epochs}",
                    f"seed={seed}",
                ]
                overrides += [f"model.loss.cache_chunk_size={args.chunk}"] if cached else []
                if args.sqrt_lr:  # Adam's 1e-3 at the smallest batch, x sqrt(batch / smallest)
                    rate = 1e-3 * (batch / min(args.batches)) ** 0.5
                    overrides.append(f"optimizer.learning_rate={rate:.6g}")
                overrides += args.set
                result = scores(run(compose(overrides), folder / f"run-{batch}-{seed}"))
                rows.setdefault(str(batch), []).append(result)
                print(json.dumps({"batch": batch, "seed": seed, **result}), flush=True)
    summary = {batch: medians(results) for batch, results in rows.items()}
    print(
        "batch | test MRR@10 | test NDCG@10 | val MRR@10 | train s  "
        f"(medians of {args.seeds} seeds, {args.epochs} epochs, batches above {args.chunk} cached"
        f"{', learning rate x sqrt(batch / smallest)' if args.sqrt_lr else ''})"
    )
    for batch, row in summary.items():
        print(
            f"{batch} | {row['test_mrr_at_10']:.4f} | {row['test_ndcg_at_10']:.4f} | "
            f"{row['val_mrr_at_10']:.4f} | {row['train_time_s']:.1f}"
        )
    return {"runs": rows, "medians": summary}


def medians(results: list[dict[str, float]]) -> dict[str, float]:
    """The median of each figure over seeds."""
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def mining(args: argparse.Namespace) -> dict[str, Any]:
    """Train; mine the training file with that model; continue on the mined or original file."""
    rows: dict[str, list[dict]] = {"first": [], "continued": [], "continued_on_mined": []}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for seed in range(args.seeds):
            data = pair_files(folder, args.sizes, seed)
            common = [
                *data,
                f"data.batch_size={args.batch}",
                f"trainer.epochs={args.epochs}",
                f"seed={seed}",
                *args.set,
            ]
            first = folder / f"first-{seed}"
            rows["first"].append(scores(run(compose(common), first)))
            mined = folder / "mined.tsv"
            arguments = [
                f"run={first}",
                f"input={folder / 'train.tsv'}",
                f"output={mined}",
                f"num_negatives={args.num_negatives}",
                f"relative_margin={args.relative_margin}",
            ]
            if mine_command.main(arguments) != 0:
                raise RuntimeError("mining failed")
            start = [f"init_from={first}"]
            rows["continued"].append(
                scores(run(compose([*common, *start]), folder / f"plain-{seed}"))
            )
            on_mined = [
                *start,
                f"data.train_path={mined}",
                "data.negative_column=negative",
                f"data.validation_path={folder / 'val_mined.tsv'}",
                f"data.test_path={folder / 'test_mined.tsv'}",
            ]
            for split in ("val", "test"):  # every split needs the column; mined by the same model
                mine_command.main(
                    [
                        f"run={first}",
                        f"input={folder / f'{split}.tsv'}",
                        f"output={folder / f'{split}_mined.tsv'}",
                        "num_negatives=1",
                    ]
                )
            result = scores(run(compose([*common, *on_mined]), folder / f"mined-{seed}"))
            rows["continued_on_mined"].append(result)
            for key, values in rows.items():
                print(json.dumps({"seed": seed, "row": key, **values[-1]}), flush=True)
    summary = {key: medians(values) for key, values in rows.items()}
    print(
        f"row | test MRR@10 | test NDCG@10  (medians of {args.seeds} seeds, batch {args.batch}, "
        f"{args.epochs} epochs each)"
    )
    for key, row in summary.items():
        print(f"{key} | {row['test_mrr_at_10']:.4f} | {row['test_ndcg_at_10']:.4f}")
    return {"runs": rows, "medians": summary}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The part to measure and its sizes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["memory", "retrieval", "mining", "cell"])
    parser.add_argument("--batches", type=int, nargs="+", default=None)
    parser.add_argument("--chunk", type=int, default=None, help="cache_chunk_size (memory: 32)")
    parser.add_argument("--steps", type=int, default=6, help="memory: steps per cell")
    parser.add_argument("--budget-mb", type=float, default=2048.0)
    parser.add_argument("--batch", type=int, default=32, help="cell/mining: pairs per batch")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs=3, default=(4000, 500, 500))
    parser.add_argument("--sqrt-lr", action="store_true", help="retrieval: scale the rate")
    parser.add_argument("--num-negatives", type=int, default=1)
    parser.add_argument("--relative-margin", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--set", nargs="+", default=[], metavar="KEY=VALUE",
        help="Hydra overrides added to every run (e.g. a smaller encoder for a smoke run)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.batches is None:
        args.batches = [64, 128, 256, 512, 1024] if args.part == "memory" else [32, 64, 128, 256]
    if args.chunk is None and args.part != "cell":  # a cell without --chunk: the ordinary step
        args.chunk = 32
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run one part; print its table; write its JSON with `--json`."""
    args = parse_args(argv)
    if args.part == "cell":
        cell(args.batch, args.chunk, args.steps, args.out, args.set)
        return {}
    report = {"memory": memory, "retrieval": retrieval, "mining": mining}[args.part](args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
