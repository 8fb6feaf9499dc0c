"""What building the step's variables before the first step saves: traces and seconds per run.

A `tf.function` that creates variables is traced twice (TensorFlow checks that later calls
create none). A run creates the compiled metrics' and the optimizers' variables before `fit`
(`build_step_variables`), and `TapeModel.fit` builds every optimizer `variables_by_optimizer`
names, so the train step is traced once. This benchmark runs the same short run alternately
with that pre-build on and off (off: both replaced by no-ops), in one process, and reports the
median wall time of `tapefit.run`, the train-step traces and the ratio. With `--checkpoint`
(a Hugging Face-format BERT folder, as `experiments/pretrained_benchmark.py` takes) it also
fine-tunes the Siamese model over it with a `backbone` optimizer of its own, the case that
needs `variables_by_optimizer`, and once more with its tokeniser traced in every step instead
of once (`tapefit.text.traced_once`).

    python experiments/startup_benchmark.py --repeats 5
    python experiments/startup_benchmark.py --repeats 5 --checkpoint DIR --only pretrained
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tensorflow as tf

import tapefit
from tapefit.runner import preparation
from tapefit.runner import train as training
from tapefit.step.tape_model import TapeModel
from tapefit.text.traced_once import TracedOnce

EXPERIMENTS = {
    "classifier (digits CNN)": ["data.train_limit=640"],
    "siamese (LSTM)": ["experiment=siamese", "data.train_size=1280"],
}
PRETRAINED = "siamese (pretrained BERT, backbone optimizer)"
COMMON = ["trainer.epochs=1", "trainer.verbose=0", "trainer.save_model=false"]


def pretrained_overrides(checkpoint: Path) -> list[str]:
    """The Siamese model over `checkpoint`, its head and backbone each with an AdamW."""
    return [
        "data=pairs_synthetic",
        "data.train_size=256",
        "data.val_size=64",
        "data.test_size=64",
        "data.batch_size=16",
        "data.tokenizer=pretrained",
        "model=siamese_pretrained",
        f"model.encoder.preset={checkpoint.resolve()}",
        "+optimizers.head._target_=keras.optimizers.AdamW",
        "+optimizers.backbone._target_=keras.optimizers.AdamW",
        "+optimizers.backbone.learning_rate=1.0e-5",
    ]


@contextlib.contextmanager
def replaced(owner: object, name: str, value: object) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def traced_on_first_step() -> Iterator[None]:
    """Neither the run nor `fit` builds anything before the first step."""
    with (
        replaced(preparation, "build_step_variables", lambda model, dataset, name="": None),
        replaced(TapeModel, "_build_optimizers_before_fit", lambda model: None),
    ):
        yield


@contextlib.contextmanager
def tokenised_in_every_step() -> Iterator[None]:
    """A pretrained encoder's tokeniser traced in each step, not once."""
    with replaced(TracedOnce, "__call__", lambda self, function, texts: function(texts)):
        yield


# Each variant against the last, "pre-built" (what a run does).
VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "traced on first step": traced_on_first_step,
    "tokenised in every step": tokenised_in_every_step,
    "pre-built": contextlib.nullcontext,
}


def counting_traces(build_checked_model, counts: dict[str, int]):
    """`preparation.build_checked_model` (what a run builds its model with), whose models count
    how often TensorFlow traces their train step."""

    def build(spec, data, strategy):
        built = build_checked_model(spec, data, strategy)
        model = built.model
        step = model.train_step

        def counted(batch):
            if not tf.executing_eagerly():
                counts["traces"] += 1
            return step(batch)

        model.train_step = counted
        return built

    return build


def one_run(overrides: list[str], variant: str, directory: Path) -> tuple[float, int]:
    """Seconds of `tapefit.run` and train-step traces under one variant."""
    counts = {"traces": 0}
    build = counting_traces(preparation.build_checked_model, counts)
    with replaced(preparation, "build_checked_model", build), VARIANTS[variant]():
        cfg = tapefit.compose([*overrides, *COMMON])
        started = time.perf_counter()
        training.run(cfg, directory)
        return time.perf_counter() - started, counts["traces"]


def measure(name: str, overrides: list[str], variants: list[str], repeats: int, scratch: Path):
    """Print the median seconds and the traces of each variant, alternated, then the ratios."""
    one_run(overrides, "pre-built", scratch / f"warmup-{name[:4]}")  # first-use caches
    seconds: dict[str, list[float]] = {variant: [] for variant in variants}
    traces: dict[str, int] = {}
    for repeat in range(repeats):
        for index, variant in enumerate(variants):
            run_dir = scratch / f"{name[:4]}-{index}-{repeat}"
            elapsed, traces[variant] = one_run(overrides, variant, run_dir)
            seconds[variant].append(elapsed)
    medians = {variant: statistics.median(seconds[variant]) for variant in variants}
    for variant in variants:
        print(f"| {name} | {variant} | {medians[variant]:.2f} | {traces[variant]} |")
    for variant in variants[:-1]:
        ratio = medians[variants[-1]] / medians[variant]
        print(f"| {name} | ratio {variants[-1]} / {variant} | {ratio:.2f} | |")


def main(argv: list[str] | None = None) -> None:
    """Parse `argv` (the command line's by default) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per variant (alternated)")
    parser.add_argument("--checkpoint", type=Path, help="a Hugging Face-format BERT folder")
    parser.add_argument("--only", help="run the experiments whose name holds this word")
    args = parser.parse_args(argv)
    if args.checkpoint is not None and not (args.checkpoint / "config.json").is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no config.json there")
    plain = ["traced on first step", "pre-built"]
    experiments = {name: (overrides, plain) for name, overrides in EXPERIMENTS.items()}
    if args.checkpoint is not None:
        experiments[PRETRAINED] = (pretrained_overrides(args.checkpoint), list(VARIANTS))
    chosen = {k: v for k, v in experiments.items() if not args.only or args.only in k}
    if not chosen:
        names = ", ".join(experiments)
        parser.error(f"--only {args.only}: no experiment's name holds it ({names})")
    print("| experiment | variant | median run s | train-step traces |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name, (overrides, variants) in chosen.items():
            measure(name, overrides, variants, args.repeats, Path(scratch))


if __name__ == "__main__":
    main()
