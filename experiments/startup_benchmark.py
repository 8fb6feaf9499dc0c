"""What building the step's variables before the first step saves: traces and seconds per run.

A `tf.function` that creates variables is traced twice (TensorFlow checks that later calls
create none). `build_step_variables` creates the compiled metrics' and the optimizers'
variables before `fit`, so the train step is traced once. This benchmark runs the same short
run alternately with that pre-build on and off (off: the function replaced by a no-op), in one
process, and reports the median wall time of `tapefit.run`, the train-step traces and the
ratio.

    python experiments/startup_benchmark.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import tensorflow as tf

import tapefit
from tapefit.runner import preparation
from tapefit.runner import train as training

EXPERIMENTS = {
    "classifier (digits CNN)": ["data.train_limit=640"],
    "siamese (LSTM)": ["experiment=siamese", "data.train_size=1280"],
}
COMMON = ["trainer.epochs=1", "trainer.verbose=0", "trainer.save_model=false"]


def counting_traces(build_checked_model, counts: dict[str, int]):
    """`preparation.build_checked_model` (what a run builds its model with), whose models count
    how often TensorFlow traces their train step."""

    def build(cfg, data, strategy, spec=None):
        built = build_checked_model(cfg, data, strategy, spec)
        model = built.model
        step = model.train_step

        def counted(batch):
            if not tf.executing_eagerly():
                counts["traces"] += 1
            return step(batch)

        model.train_step = counted
        return built

    return build


def one_run(overrides: list[str], prebuild: bool, directory: Path) -> tuple[float, int]:
    """Seconds of `tapefit.run` and train-step traces, with or without the pre-build."""
    counts = {"traces": 0}
    original_build, original_prebuild = (
        preparation.build_checked_model,
        preparation.build_step_variables,
    )
    preparation.build_checked_model = counting_traces(original_build, counts)
    if not prebuild:
        preparation.build_step_variables = lambda model, dataset: None
    try:
        cfg = tapefit.compose([*overrides, *COMMON])
        started = time.perf_counter()
        training.run(cfg, directory)
        return time.perf_counter() - started, counts["traces"]
    finally:
        preparation.build_checked_model, preparation.build_step_variables = (
            original_build,
            original_prebuild,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per variant (alternated)")
    args = parser.parse_args()
    print("| experiment | variant | median run s | train-step traces |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name, overrides in EXPERIMENTS.items():
            one_run(overrides, True, Path(scratch) / f"warmup-{name[:4]}")  # first-use caches
            seconds: dict[bool, list[float]] = {True: [], False: []}
            traces: dict[bool, int] = {}
            for repeat in range(args.repeats):
                for prebuild in (False, True):
                    run_dir = Path(scratch) / f"{name[:4]}-{prebuild}-{repeat}"
                    elapsed, traces[prebuild] = one_run(overrides, prebuild, run_dir)
                    seconds[prebuild].append(elapsed)
            medians = {variant: statistics.median(seconds[variant]) for variant in seconds}
            for prebuild, label in ((False, "traced on first step"), (True, "pre-built")):
                print(f"| {name} | {label} | {medians[prebuild]:.2f} | {traces[prebuild]} |")
            print(f"| {name} | ratio pre-built / traced | {medians[True] / medians[False]:.2f} | |")


if __name__ == "__main__":
    main()
