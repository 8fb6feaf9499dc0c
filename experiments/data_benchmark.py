"""Data larger than memory, measured; every figure a ratio against a baseline run the same way:

    python experiments/data_benchmark.py memory   # streamed pairs: 200k vs 2M lines, sharded
    python experiments/data_benchmark.py input    # time waiting for input, Siamese + images

`memory`: a Siamese run of 20 training steps (`trainer.steps_per_epoch=20`, one epoch) over a
generated pair corpus of 200,000 lines in 10 shards and of 2,000,000 lines in 100 shards, each
run in its own process: peak RSS (the process's own, from `wait4`) and start-up (process start
to the first training batch), medians over repeats; the small corpus read whole into memory
(`data.stream=false`) is shown for reference. `input`: ms per training step fed by the real
pipeline against the same batches replayed from memory, medians over interleaved windows; the
difference is the time the step waits for input.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tapefit import compose  # first: sets the backend and TensorFlow's options

# isort: split
import keras
import numpy as np
import tensorflow as tf

from tapefit.config.schemas import TrainerConfig
from tapefit.config.typed import typed
from tapefit.runner.spec import RunSpec
from tapefit.runner.train import build_data, build_model, prepare

WORDS = [f"w{i}" for i in range(5000)]

DRIVER = """
import json, os, sys, time
started = time.perf_counter()
import keras
import tapefit

class FirstBatch(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            self.at = time.perf_counter() - started

clock = FirstBatch()
tapefit.run(tapefit.compose(sys.argv[2:]), sys.argv[1], callbacks=[clock])
print("RESULT " + json.dumps({"startup_s": clock.at}))
"""


def write_corpus(folder: Path, lines: int, shards: int, seed: int = 0) -> None:
    """`shards` TSV files of generated pairs (graded label = overlap), `lines` in all, plus a
    dev and a test file of 2,000 pairs each."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)

    def pair() -> str:
        a = rng.sample(WORDS, 8)
        overlap = rng.randint(0, 8)
        b = a[:overlap] + rng.sample(WORDS, 8 - overlap)
        return f"{' '.join(a)}\t{' '.join(b)}\t{5 * overlap / 8:.3f}\n"

    per_shard = lines // shards
    for shard in range(shards):
        with open(folder / f"shard-{shard:03d}.tsv", "w") as file:
            file.write("text1\ttext2\tlabel\n")
            file.writelines(pair() for _ in range(per_shard))
    for name in ("dev", "test"):
        with open(folder / f"{name}.tsv", "w") as file:
            file.write("text1\ttext2\tlabel\n")
            file.writelines(pair() for _ in range(2000))


def measured_run(corpus: Path, run_dir: Path, stream: bool) -> dict[str, float]:
    """One short Siamese run in its own process: its peak RSS (MB) and start-up (s)."""
    overrides = [
        "experiment=siamese",
        "data=pairs_file",
        f"data.train_path={corpus / 'shard-*.tsv'}",
        f"data.validation_path={corpus / 'dev.tsv'}",
        f"data.test_path={corpus / 'test.tsv'}",
        f"data.stream={str(stream).lower()}",
        "trainer.steps_per_epoch=20",
        "trainer.epochs=1",
        "trainer.verbose=0",
        "trainer.save_model=false",
        "callbacks.tensorboard.enabled=false",
    ]
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(run_dir), *overrides],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"the run in {run_dir} failed (status {status})")
    result = json.loads(output.split("RESULT ", 1)[1])
    return {"peak_rss_mb": usage.ru_maxrss / 1024, **result}


def memory(repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tapefit-data-bench-") as temporary:
        root = Path(temporary)
        corpora = {"200k lines, 10 shards": (200_000, 10), "2M lines, 100 shards": (2_000_000, 100)}
        for name, (lines, shards) in corpora.items():
            started = time.perf_counter()
            write_corpus(root / str(lines), lines, shards)
            print(f"wrote {name} in {time.perf_counter() - started:.0f} s", flush=True)
        runs = [
            ("read whole (data.stream=false), 200k lines", 200_000, False),
            ("streamed, 200k lines", 200_000, True),
            ("streamed, 2M lines", 2_000_000, True),
        ]
        results: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in runs}
        for repeat in range(repeats):
            for name, lines, stream in runs:
                run_dir = root / "runs" / f"{lines}-{stream}-{repeat}"
                results[name].append(measured_run(root / str(lines), run_dir, stream))
                print(f"{name}, repeat {repeat + 1}: {results[name][-1]}", flush=True)
    baseline = "streamed, 200k lines"
    medians = {
        name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        for name, rows in results.items()
    }
    print(f"\nmedians over {repeats} repeats (ratios against '{baseline}'):")
    print("| run | peak RSS, MB | vs 200k | start-up, s | vs 200k |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in medians.items():
        rss, startup = values["peak_rss_mb"], values["startup_s"]
        print(
            f"| {name} | {rss:.0f} | {rss / medians[baseline]['peak_rss_mb']:.2f} | "
            f"{startup:.1f} | {startup / medians[baseline]['startup_s']:.2f} |"
        )


def step_times(model: keras.Model, batches: tf.data.Dataset, calls: int) -> float:
    """Seconds per optimizer step over `calls` calls of the (traced) train function fed by
    `batches` (one call runs `steps_per_execution` steps)."""
    iterator = iter(batches)
    before = int(model.optimizer.iterations.numpy())
    started = time.perf_counter()
    for _ in range(calls):
        model.train_function(iterator)
    elapsed = time.perf_counter() - started
    return elapsed / (int(model.optimizer.iterations.numpy()) - before)


def waiting_for_input(name: str, overrides: list[str], repeats: int, steps: int) -> None:
    """ms per step fed by the real pipeline and by its batches replayed from memory."""
    cfg = compose(overrides)
    strategy = prepare(cfg.seed, typed(TrainerConfig, cfg.trainer))
    data = build_data(cfg)
    model = build_model(RunSpec.of(cfg), data, strategy)
    model.make_train_function()
    pipeline = data.train.repeat()
    in_memory = data.train.take(steps).cache().repeat()
    for _ in in_memory.take(steps):  # fill the cache
        pass
    step_times(model, in_memory, 3)  # trace
    fed, replayed = [], []
    for _ in range(repeats):  # interleaved windows
        fed.append(step_times(model, pipeline, steps))
        replayed.append(step_times(model, in_memory, steps))
    fed_ms, replayed_ms = statistics.median(fed) * 1e3, statistics.median(replayed) * 1e3
    wait = max(0.0, fed_ms - replayed_ms) / fed_ms
    print(
        f"| {name} | {fed_ms:.1f} | {replayed_ms:.1f} | {fed_ms / replayed_ms:.3f} | "
        f"{100 * wait:.1f} % |",
        flush=True,
    )


def write_images(folder: Path, per_class: int, size: int = 64) -> None:
    """PNG files of three classes, `size`x`size` RGB."""
    rng = np.random.default_rng(0)
    for index, kind in enumerate(("a", "b", "c")):
        (folder / kind).mkdir(parents=True, exist_ok=True)
        for number in range(per_class):
            pixels = rng.integers(0, 80, (size, size, 3)).astype("uint8")
            pixels[:, index::3] = 220
            (folder / kind / f"{number}.png").write_bytes(tf.io.encode_png(pixels).numpy())


def input_wait(repeats: int, steps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tapefit-input-bench-") as temporary:
        root = Path(temporary)
        write_corpus(root / "pairs", 200_000, 10)
        write_images(root / "images", 400)
        print(
            "| data, model, batch 64 | ms/step, pipeline | ms/step, from memory | ratio | "
            "waiting for input |"
        )
        print("| --- | --- | --- | --- | --- |")
        waiting_for_input(
            "streamed pairs (200k lines), Siamese",
            [
                "experiment=siamese",
                "data=pairs_file",
                f"data.train_path={root / 'pairs' / 'shard-*.tsv'}",
                f"data.validation_path={root / 'pairs' / 'dev.tsv'}",
                "data.stream=true",
                "data.batch_size=64",
            ],
            repeats,
            steps,
        )
        waiting_for_input(
            "image folder (64x64 PNG), CNN",
            [
                "data=image_folder",
                f"data.train_path={root / 'images'}",
                "data.batch_size=64",
                "model.architecture=cnn",
            ],
            repeats,
            steps,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["memory", "input"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} cores")
    if args.what == "memory":
        memory(args.repeats)
    else:
        input_wait(args.repeats, args.steps)


if __name__ == "__main__":
    main()
