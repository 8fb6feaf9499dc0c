"""What owning the tape costs: TapeModel through `fit` against Keras' built-in step, a
hand-written `tf.function` loop and the tutorials' eager loop, in one process.

    python experiments/benchmark.py                      # cnn, mlp, siamese
    python experiments/benchmark.py --models cnn --steps 40 --windows 9 --json bench.json
    python experiments/benchmark.py --full-epoch         # 60,000-sample MNIST-shaped epochs
    python experiments/benchmark.py --models cnn --recipes  # schedule and EMA vs constant LR

Per-step times are medians of timed windows (min and max shown) after a warm-up window; the
variants' windows are interleaved round by round so drift hits all of them alike. Peak RSS is
sampled while each variant runs (it includes everything the process held before); +RSS is
its growth over the resident size when the variant's first step began (graphs, traces, slots).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tapefit import SiameseModel, TapeModel  # first: sets the backend and TensorFlow's options

# isort: split
import keras
import numpy as np
import tensorflow as tf

from tapefit.data.pipeline import make_pipeline
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.models.classifier import cnn_layers, mlp_layers
from tapefit.models.losses import CosineMSELoss

VARIANTS = ("tapefit", "builtin", "tf_function", "eager")


class RssSampler:
    """Peak resident memory while a block runs, sampled every few milliseconds."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self.peak = self.rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


@dataclass
class Workload:
    """A model to time: data, a network factory and the loss, shared by every variant."""

    name: str
    dataset: tf.data.Dataset
    build: Callable[[type], keras.Model]  # model class -> model with identical initial weights
    loss: keras.losses.Loss
    metrics: list = field(default_factory=list)


def image_workload(name: str, batch_size: int, samples: int = 4096) -> Workload:
    """MNIST-shaped random images (28x28x1, 10 classes) for the tutorial CNN or the MLP."""
    rng = np.random.default_rng(0)
    x = rng.random((samples, 28, 28, 1), dtype="float32")
    y = rng.integers(0, 10, samples)
    dataset = make_pipeline((x, y), batch_size, shuffle=True, seed=0, repeat=True)
    body = (lambda: cnn_layers((28, 28, 1), 0.5, 0.9)) if name == "cnn" else (
        lambda: mlp_layers((64, 64))
    )  # fmt: skip

    def build(model_class: type) -> keras.Model:
        keras.utils.set_random_seed(0)
        inputs = keras.Input((28, 28, 1))
        hidden = inputs
        for layer in body():
            hidden = layer(hidden)
        outputs = keras.layers.Dense(10, activation="softmax", dtype="float32")(hidden)
        return model_class(inputs, outputs)

    return Workload(
        name, dataset, build, keras.losses.SparseCategoricalCrossentropy(), ["accuracy"]
    )


class BuiltinSiamese(keras.Model):
    """The Siamese network for Keras' own step: `call` returns the stacked pair embeddings."""

    def __init__(self, twin: SiameseModel) -> None:
        super().__init__()
        self.twin = twin

    def call(self, inputs, training=None):
        texts_a, texts_b = inputs
        return self.twin.embed_pairs(texts_a, texts_b, training)


def siamese_workload(batch_size: int, samples: int = 4096, encoder: dict | None = None) -> Workload:
    """Synthetic text pairs for the tutorial's Embedding + LSTM Siamese model (or the encoder
    `encoder` describes)."""
    texts_a, texts_b, labels = PairGenerator(seed=0).pairs(samples)
    texts_a, texts_b = texts_a.astype(str), texts_b.astype(str)
    dataset = make_pipeline(
        ((texts_a, texts_b), labels), batch_size, shuffle=True, seed=0, repeat=True
    )
    texts = np.concatenate([texts_a, texts_b])

    def build(model_class: type) -> keras.Model:
        keras.utils.set_random_seed(0)
        twin = SiameseModel.from_texts(texts, sequence_length=16, encoder=encoder)
        return twin if model_class is TapeModel else BuiltinSiamese(twin)

    return Workload("siamese", dataset, build, CosineMSELoss())


class _EpochClock(keras.callbacks.Callback):
    """Wall time of every epoch of a `fit` call (an epoch is one timed window here)."""

    def __init__(self) -> None:
        super().__init__()
        self.durations: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.durations.append(time.perf_counter() - self._start)


class Runner:
    """One variant: `first_step()` (tracing included) then timed `windows(count, steps)`."""

    def __init__(
        self,
        variant: str,
        work: Workload,
        args: argparse.Namespace,
        optimizer: keras.optimizers.Optimizer | None = None,
    ) -> None:
        self.variant, self.work, self.args = variant, work, args
        self.memory = self.baseline = 0
        model_class = keras.Model if variant in ("builtin", "tf_function", "eager") else TapeModel
        self.model = work.build(model_class)
        self.optimizer = optimizer or keras.optimizers.Adam(1e-3)
        if variant not in VARIANTS:  # a training recipe: tapefit's step, another optimizer
            variant = self.variant = "tapefit"
        if variant in ("tapefit", "builtin"):
            self.model.compile(
                optimizer=self.optimizer, loss=work.loss, metrics=work.metrics,
                steps_per_execution=args.steps_per_execution, jit_compile=args.jit_compile,
            )  # fmt: skip
        else:
            self.iterator = iter(work.dataset)
            self.loss_mean = keras.metrics.Mean()
            self.step = self._loop_step
            if variant == "tf_function":
                self.step = tf.function(self._loop_step, jit_compile=args.jit_compile is True)

    def _loop_step(self, x, y):
        """The tutorials' step: forward and loss under the tape, apply, update the mean loss."""
        model = self.model
        with tf.GradientTape() as tape:
            prediction = model(x, training=True)
            loss = self.work.loss(y, prediction) + tf.add_n([0.0, *model.losses])
            scaled = self.optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        self.loss_mean.update_state(loss)
        return loss

    def _loop(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            x, y = next(self.iterator)
            loss = self.step(x, y)
        float(loss)  # wait for the last step
        return time.perf_counter() - start

    def first_step(self) -> float:
        """Seconds to the end of the first step: tracing and graph building included."""
        self.baseline = RssSampler.rss()
        with RssSampler() as sampler:
            if self.variant in ("tapefit", "builtin"):
                start = time.perf_counter()
                self.model.fit(
                    self.work.dataset, steps_per_epoch=1, epochs=1, verbose=0, shuffle=False
                )
                elapsed = time.perf_counter() - start
            else:
                elapsed = self._loop(1)
        self.memory = max(self.memory, sampler.peak)
        return elapsed

    def windows(self, count: int, steps: int) -> list[float]:
        """Seconds per step in each of `count` windows of `steps` steps."""
        with RssSampler() as sampler:
            if self.variant in ("tapefit", "builtin"):
                clock = _EpochClock()
                self.model.fit(
                    self.work.dataset, steps_per_epoch=steps, epochs=count, verbose=0,
                    shuffle=False, callbacks=[clock],
                )  # fmt: skip
                durations = clock.durations
            else:
                durations = [self._loop(steps) for _ in range(count)]
        self.memory = max(self.memory, sampler.peak)
        return [d / steps for d in durations]


def measure(
    work: Workload, args: argparse.Namespace, runners: dict[str, Runner] | None = None
) -> dict[str, dict]:
    """All variants of one workload (or the given `runners`), windows interleaved round by
    round."""
    runners = runners or {v: Runner(v, work, args) for v in args.variants}
    results = {v: {"first_step_s": r.first_step(), "per_step": []} for v, r in runners.items()}
    for runner in runners.values():  # warm-up window: caches, allocator, thread pools
        runner.windows(1, args.steps)
    remaining = args.windows
    while remaining > 0:
        count = min(args.windows_per_round, remaining)
        for variant, runner in runners.items():
            steps = max(2, args.steps // args.eager_divisor) if variant == "eager" else args.steps
            results[variant]["per_step"] += runner.windows(count, steps)
        remaining -= count
    for variant, runner in runners.items():
        per_step = results[variant].pop("per_step")
        rounds = [
            statistics.median(per_step[i : i + args.windows_per_round])
            for i in range(0, len(per_step), args.windows_per_round)
        ]
        results[variant]["round_median_ms"] = [1e3 * r for r in rounds]
        results[variant].update(
            median_ms=1e3 * statistics.median(per_step), min_ms=1e3 * min(per_step),
            max_ms=1e3 * max(per_step), windows=len(per_step), peak_rss_mb=runner.memory / 2**20,
            rss_growth_mb=(runner.memory - runner.baseline) / 2**20,
        )  # fmt: skip
    return results


def recipe_optimizers(total_steps: int) -> dict[str, keras.optimizers.Optimizer]:
    """The training recipes measured against a constant learning rate: a cosine schedule with
    warmup (tapefit's `scheduler=cosine`), weight EMA (`optimizer.use_ema=true`), both."""
    from tapefit.training.schedules import cosine

    def schedule() -> keras.optimizers.schedules.LearningRateSchedule:
        return cosine(1e-3, total_steps, 100, warmup_fraction=0.1, min_lr=1e-5)

    return {
        "constant": keras.optimizers.Adam(1e-3),
        "cosine": keras.optimizers.Adam(schedule()),
        "ema": keras.optimizers.Adam(1e-3, use_ema=True),
        "cosine+ema": keras.optimizers.Adam(schedule(), use_ema=True),
    }


def recipes(args: argparse.Namespace) -> dict[str, dict]:
    """The digits-CNN-shaped workload through tapefit's step with each recipe's optimizer,
    side by side in this process."""
    work = image_workload("cnn", args.batch_size)
    total = (args.windows + 2) * args.steps
    runners = {
        name: Runner(name, work, args, optimizer)
        for name, optimizer in recipe_optimizers(total).items()
    }
    return measure(work, args, runners)


def update_costs(args: argparse.Namespace) -> dict[str, float]:
    """Milliseconds per optimizer update over the CNN's variables for each recipe, medians
    of `args.windows` interleaved repeats of `args.updates` updates.

    Why: a recipe changes only the update (the learning rate it reads, the average it
    keeps), not the forward and backward pass; timed alone, the update's cost stands out of
    the whole step's noise, and its difference to the constant rate bounds the recipe's
    extra step time.
    """
    updates = args.updates
    model = image_workload("cnn", args.batch_size).build(TapeModel)
    variables = model.trainable_variables
    gradients = [tf.fill(v.shape, 1e-3) for v in variables]
    optimizers = recipe_optimizers(args.windows * updates + updates)
    steps = {}
    for name, optimizer in optimizers.items():
        optimizer.build(variables)
        steps[name] = tf.function(lambda o=optimizer: o.apply(gradients, variables))
        for _ in range(updates // 4):  # trace and warm up
            steps[name]()
    timings: dict[str, list[float]] = {name: [] for name in optimizers}
    for _ in range(args.windows):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(updates):
                step()
            float(optimizers[name].iterations)  # wait for the last update
            timings[name].append((time.perf_counter() - start) / updates)
    return {name: 1e3 * statistics.median(times) for name, times in timings.items()}


ENCODERS = {  # the Siamese encoders measured side by side (`--encoders`)
    "lstm": {},  # the tutorial's: Embedding(100) + LSTM(64), last state
    "bilstm_max": {"bidirectional": True, "pooling": "max"},
    "transformer": {
        "rnn": "transformer", "embedding_dim": 64, "units": 128, "num_layers": 2,
        "num_heads": 4, "pooling": "mean",
    },
    "bag": {"rnn": "none", "pooling": "mean"},
}  # fmt: skip


def encoders(args: argparse.Namespace) -> dict[str, dict]:
    """Training step time of each Siamese encoder through tapefit's step (windows
    interleaved), and the time to encode `--retrieval-size` texts with each, in this
    process."""
    works = {
        name: siamese_workload(args.batch_size, encoder=dict(e)) for name, e in ENCODERS.items()
    }
    runners = {name: Runner("tapefit", work, args) for name, work in works.items()}
    results = measure(next(iter(works.values())), args, runners)
    texts = [f"{a} {b}" for a, b in zip(*PairGenerator(seed=1).pairs(5000)[:2], strict=True)]
    texts = (texts * (1 + args.retrieval_size // len(texts)))[: args.retrieval_size]
    for name, runner in runners.items():
        runner.model.encode(texts[:512])  # trace
        times = []
        for _ in range(3):
            start = time.perf_counter()
            runner.model.encode(texts, batch_size=256)
            times.append(time.perf_counter() - start)
        results[name]["encode_s"] = statistics.median(times)
        results[name]["pairs_per_s"] = args.batch_size / (results[name]["median_ms"] / 1e3)
    return results


def retrieval_time(corpus: int = 10_000, queries: int = 10_000, dim: int = 64) -> float:
    """Seconds to score `queries` x `corpus` retrieval (recall@k, MRR, NDCG) on normalised
    random vectors, median of 3: the evaluator's ranking cost without the encoder's."""
    from tapefit.evaluation.retrieval import retrieval_metrics

    rng = np.random.default_rng(0)
    corpus_vectors = rng.normal(size=(corpus, dim)).astype("float32")
    corpus_vectors /= np.linalg.norm(corpus_vectors, axis=1, keepdims=True)
    query_vectors = corpus_vectors[:queries] + 0.1 * rng.normal(size=(queries, dim))
    relevant = [frozenset({i}) for i in range(queries)]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        retrieval_metrics(query_vectors, corpus_vectors, relevant)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def encoder_table(results: dict[str, dict], retrieval_s: float | None, size: int = 10_000) -> str:
    """The encoders' step times, pairs per second and encoding times, against the LSTM."""
    base = results["lstm"]["median_ms"]
    lines = [
        "\nsiamese encoders (tapefit step)",
        f"{'encoder':<12} {'ms/step':>9} {'vs lstm':>8} {'pairs/s':>9} {f'encode {size:,} s':>15}",
    ]
    for name, r in results.items():
        lines.append(
            f"{name:<12} {r['median_ms']:>9.2f} {r['median_ms'] / base:>8.2f} "
            f"{r['pairs_per_s']:>9.0f} {r['encode_s']:>15.2f}"
        )
    if retrieval_s is not None:
        lines.append(
            f"retrieval {size:,} x {size:,} (recall@1/5/10, MRR@10, NDCG@10): {retrieval_s:.2f} s"
        )
    return "\n".join(lines)


def paired_ratio(results: dict[str, dict], name: str, base: str = "constant") -> float:
    """The median over rounds of `name`'s round median divided by `base`'s in the same round.

    Why: a round's variants run back to back, so machine drift (other load, clock changes)
    cancels in the ratio; comparing the overall medians lets drift between rounds through.
    """
    pairs = zip(results[name]["round_median_ms"], results[base]["round_median_ms"], strict=True)
    return statistics.median(a / b for a, b in pairs)


def recipe_table(results: dict[str, dict]) -> str:
    """The recipes' per-step medians, their ratios to the constant learning rate, and the
    paired ratio (median over rounds of the ratio within a round)."""
    base = results["constant"]["median_ms"]
    lines = [
        "\ntraining recipes (tapefit, cnn)",
        f"{'recipe':<12} {'ms/step':>9} {'vs constant':>11} {'paired':>7}",
    ]
    for name, r in results.items():
        paired = paired_ratio(results, name)
        lines.append(
            f"{name:<12} {r['median_ms']:>9.2f} {r['median_ms'] / base:>11.3f} {paired:>7.3f}"
        )
    worst = max(paired_ratio(results, name) for name in results)
    lines.append(f"target: every recipe / constant <= 1.02, paired (worst {worst:.3f})")
    return "\n".join(lines)


def update_table(costs: dict[str, float], step_ms: float) -> str:
    """Each recipe's optimizer update, its extra over the constant rate's, and that extra as
    a share of the constant-rate step (`step_ms`)."""
    lines = [
        "\noptimizer update alone (cnn variables)",
        f"{'recipe':<12} {'ms/update':>9} {'extra ms':>9} {'of a step':>9}",
    ]
    for name, cost in costs.items():
        extra = cost - costs["constant"]
        lines.append(f"{name:<12} {cost:>9.3f} {extra:>9.3f} {extra / step_ms:>9.2%}")
    worst = max(cost - costs["constant"] for cost in costs.values()) / step_ms
    lines.append(f"target: extra update time <= 2% of a step (worst {worst:.2%})")
    return "\n".join(lines)


def full_epoch(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Wall time of one MNIST-shaped epoch (60,000 samples by default) of the tutorial CNN
    through `fit` on tapefit's own tf.data pipeline, per fit variant; repeats interleaved."""
    rng = np.random.default_rng(0)
    x = rng.random((args.epoch_samples, 28, 28, 1), dtype="float32")
    y = rng.integers(0, 10, args.epoch_samples)
    dataset = make_pipeline((x, y), args.batch_size, shuffle=True, seed=0, cache=False)
    work = image_workload("cnn", args.batch_size)
    runners = {variant: Runner(variant, work, args) for variant in ("tapefit", "builtin")}
    seconds: dict[str, list[float]] = {variant: [] for variant in runners}
    for runner in runners.values():
        runner.first_step()
    for _ in range(args.epoch_repeats):
        for variant, runner in runners.items():
            start = time.perf_counter()
            runner.model.fit(dataset, epochs=1, verbose=0, shuffle=False)
            seconds[variant].append(time.perf_counter() - start)
    return {
        variant: {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}
        for variant, times in seconds.items()
    }


def table(name: str, results: dict[str, dict]) -> str:
    """The results of one workload as an aligned text table with ratios to the built-in step."""
    base = results.get("builtin", {}).get("median_ms")
    lines = [
        f"\n{name}",
        f"{'variant':<12} {'ms/step':>9} {'min':>8} {'max':>8} {'vs builtin':>10} "
        f"{'first step s':>12} {'peak RSS MB':>11} {'+RSS MB':>8}",
    ]
    for variant, r in results.items():
        ratio = f"{r['median_ms'] / base:.3f}" if base else "-"
        lines.append(
            f"{variant:<12} {r['median_ms']:>9.2f} {r['min_ms']:>8.2f} {r['max_ms']:>8.2f} "
            f"{ratio:>10} {r['first_step_s']:>12.2f} {r['peak_rss_mb']:>11.0f} "
            f"{r['rss_growth_mb']:>8.0f}"
        )
    if {"tapefit", "builtin", "tf_function", "eager"} <= results.keys():
        tape = results["tapefit"]["median_ms"]
        lines.append(
            f"targets: tapefit/builtin {tape / base:.3f} (<= 1.02), tapefit/tf_function "
            f"{tape / results['tf_function']['median_ms']:.3f} (<= 1.05), eager/tapefit "
            f"{results['eager']['median_ms'] / tape:.2f} (>= 4)"
        )
    return "\n".join(lines)


def positive_int(text: str) -> int:
    """argparse type for counts and sizes: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", nargs="+", default=["cnn", "mlp", "siamese"], choices=["cnn", "mlp", "siamese"]
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--steps", type=positive_int, default=40, help="steps per timed window")
    parser.add_argument("--windows", type=positive_int, default=9, help="timed windows per variant")
    parser.add_argument("--windows-per-round", type=positive_int, default=3)
    parser.add_argument(
        "--eager-divisor",
        type=positive_int,
        default=4,
        help="eager windows run steps/this many steps (eager is slow)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--steps-per-execution", type=positive_int, default=1)
    parser.add_argument("--jit-compile", choices=["auto", "true", "false"], default="auto")
    parser.add_argument(
        "--precision", default="float32", choices=["float32", "mixed_float16", "mixed_bfloat16"]
    )
    parser.add_argument(
        "--full-epoch", action="store_true", help="also time whole epochs of the CNN through fit"
    )
    parser.add_argument("--epoch-samples", type=positive_int, default=60_000)
    parser.add_argument("--epoch-repeats", type=positive_int, default=3)
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument(
        "--encoders", action="store_true",
        help="also time the Siamese encoders (LSTM, BiLSTM-max, Transformer, bag) and retrieval",
    )  # fmt: skip
    parser.add_argument(
        "--retrieval-size", type=positive_int, default=10_000,
        help="--encoders: texts encoded, and queries and corpus texts of the timed retrieval",
    )  # fmt: skip
    parser.add_argument(
        "--recipes", action="store_true",
        help="also time a cosine schedule and weight EMA against a constant learning rate",
    )  # fmt: skip
    parser.add_argument(
        "--updates", type=positive_int, default=200,
        help="--recipes: optimizer updates per timed repeat of each recipe's update alone",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.json and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: folder {args.json.parent} does not exist; create it")
    args.jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    return args  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print the tables, return (and optionally save) the results."""
    args = parse_args(argv)
    keras.mixed_precision.set_global_policy(args.precision)
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    )
    print(
        f"batch {args.batch_size}, {args.steps} steps x {args.windows} windows, "
        f"steps_per_execution {args.steps_per_execution}, jit_compile {args.jit_compile}, "
        f"precision {args.precision}; {machine}"
    )
    report = {"settings": {k: str(v) for k, v in vars(args).items()}, "machine": machine}
    for name in args.models:
        work = siamese_workload(args.batch_size) if name == "siamese" else image_workload(
            name, args.batch_size
        )  # fmt: skip
        report[name] = measure(work, args)
        print(table(name, report[name]), flush=True)
    if args.recipes:
        report["recipes"] = recipes(args)
        print(recipe_table(report["recipes"]), flush=True)
        report["recipe_updates_ms"] = update_costs(args)
        step_ms = report["recipes"]["constant"]["median_ms"]
        print(update_table(report["recipe_updates_ms"], step_ms), flush=True)
    if args.encoders:
        report["encoders"] = encoders(args)
        size = args.retrieval_size
        report["retrieval_s"] = retrieval_time(size, size)
        print(encoder_table(report["encoders"], report["retrieval_s"], size), flush=True)
    if args.full_epoch:
        report["full_epoch"] = full_epoch(args)
        print(f"\n{args.epoch_samples:,}-sample CNN epoch, seconds, median of "
              f"{args.epoch_repeats} (min-max): " + ", ".join(
            f"{k} {v['median_s']:.1f} ({v['min_s']:.1f}-{v['max_s']:.1f})"
            for k, v in report["full_epoch"].items()))  # fmt: skip
    report["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
