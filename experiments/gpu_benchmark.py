"""What a GPU buys, in one command: step time of the tutorial CNN, the Siamese LSTM and a
Transformer encoder under float32, mixed_float16 and mixed_bfloat16, with XLA off and on, an
LSTM that cuDNN runs (no recurrent dropout) and one it cannot (recurrent_dropout=0.1), each
through tapefit's tape step and through Keras' built-in step, side by side.

    python experiments/gpu_benchmark.py --json gpu.json          # on a machine with a GPU
    python experiments/gpu_benchmark.py --models lstm --precisions float32 mixed_float16
    python experiments/gpu_benchmark.py --smoke                  # tiny: checks the script runs

Each cell builds its model afresh under its dtype policy, compiles it with its `jit_compile`,
takes one step (tracing, XLA compilation and cuDNN set-up included: "first step s") and
then times windows of steps; tapefit's and Keras' windows alternate round by round, so drift
hits both alike. ms/step is the median window; "tapefit/keras" the median of the rounds'
ratios. "XLA used" and "cuDNN" are what Keras did, not what was asked: Keras refuses XLA
for a cuDNN-eligible LSTM on a GPU, and turns it off without a GPU under `auto`; the cuDNN
column is the readiness report's verdict (`python -m tapefit.doctor`). Without a GPU the
script says so in its first line and in the JSON (`"gpu": false`): its figures are then CPU
figures, which say nothing of a GPU's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from argparse import Namespace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmark.py, beside this file

from benchmark import BuiltinSiamese, Runner, Workload, image_workload

from tapefit import SiameseModel, TapeModel

# isort: split
import keras
import numpy as np
import tensorflow as tf

from tapefit.data.pipeline import make_pipeline
from tapefit.models.losses import CosineMSELoss
from tapefit.readiness.recurrent import recurrent_layers

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
MODELS = ("cnn", "lstm", "transformer")
STEPS = {"tapefit": "tapefit", "keras": "builtin"}  # benchmark.Runner's names


def text_workload(name: str, batch_size: int, sizes: dict, recurrent_dropout: float) -> Workload:
    """Token-id pairs (right-padded, lengths 4 to `sequence_length`) for a Siamese LSTM or
    Transformer encoder: token ids, not strings, so that XLA can compile the whole step."""
    rng = np.random.default_rng(0)
    samples, length = sizes["samples"], sizes["sequence_length"]

    def ids() -> np.ndarray:
        tokens = rng.integers(1, sizes["vocab_size"], (samples, length))
        lengths = rng.integers(4, length + 1, samples)
        return np.where(np.arange(length) < lengths[:, None], tokens, 0).astype("int32")

    labels = rng.uniform(0, 5, samples).astype("float32")
    dataset = make_pipeline(((ids(), ids()), labels), batch_size, shuffle=True, seed=0, repeat=True)
    encoder = {"embedding_dim": sizes["width"], "units": sizes["units"]}
    if name == "transformer":
        encoder |= {"rnn": "transformer", "num_layers": 2, "num_heads": 4, "pooling": "mean"}
    encoder["recurrent_dropout"] = recurrent_dropout

    def build(model_class: type) -> keras.Model:
        keras.utils.set_random_seed(0)
        twin = SiameseModel(vocab_size=sizes["vocab_size"], sequence_length=length, encoder=encoder)
        return twin if model_class is TapeModel else BuiltinSiamese(twin)

    return Workload(name, dataset, build, CosineMSELoss())


SIZES = {
    "full": {"batch": 64, "samples": 4096, "vocab_size": 20_000, "sequence_length": 64,
             "width": 256, "units": 256},
    "smoke": {"batch": 8, "samples": 64, "vocab_size": 200, "sequence_length": 8,
              "width": 16, "units": 16},
}  # fmt: skip


def cells(args: Namespace) -> list[dict]:
    """Every (model, precision, XLA, cuDNN) combination asked for; cuDNN varies for the LSTM
    only (the Transformer keeps its dropout: it has no recurrent kernel)."""
    found = []
    for model, precision, xla in itertools.product(args.models, args.precisions, args.xla):
        for cudnn in args.cudnn if model == "lstm" else ["-"]:
            found.append({"model": model, "precision": precision, "xla": xla, "cudnn": cudnn})
    return found


def workload(cell: dict, sizes: dict) -> Workload:
    if cell["model"] == "cnn":
        return image_workload("cnn", sizes["batch"], samples=max(sizes["samples"], 64))
    dropout = 0.0 if cell["cudnn"] == "eligible" else 0.1
    return text_workload(cell["model"], sizes["batch"], sizes, dropout)


def run_cell(cell: dict, args: Namespace, sizes: dict) -> dict:
    """Time tapefit's and Keras' step for one cell, rounds interleaved."""
    keras.backend.clear_session()
    keras.config.set_dtype_policy(cell["precision"])
    work = workload(cell, sizes)
    options = Namespace(steps_per_execution=1, jit_compile=cell["xla"] == "on")
    runners = {step: Runner(STEPS[step], work, options) for step in args.steps}
    first = {step: runner.first_step() for step, runner in runners.items()}
    times: dict[str, list[float]] = {step: [] for step in runners}
    for _ in range(args.windows):
        for step, runner in runners.items():
            times[step] += runner.windows(1, args.window_steps)
    result = dict(cell)
    some = next(iter(runners.values())).model
    result["xla_used"] = bool(some.jit_compile)
    verdicts = recurrent_layers(some)
    if verdicts:
        result["cudnn"] = "yes" if all(v.cudnn_on_gpu for v in verdicts) else "no"
    for step in runners:
        result[f"{step}_ms"] = 1000 * statistics.median(times[step])
        result[f"{step}_first_s"] = first[step]
    if {"tapefit", "keras"} <= runners.keys():
        ratios = [t / k for t, k in zip(times["tapefit"], times["keras"], strict=True)]
        result["tapefit_over_keras"] = statistics.median(ratios)
    if tf.config.list_physical_devices("GPU"):
        result["gpu_peak_mb"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        tf.config.experimental.reset_memory_stats("GPU:0")
    keras.config.set_dtype_policy("float32")
    return result


def table(rows: list[dict]) -> str:
    head = "model | precision | XLA asked | XLA used | cuDNN | tapefit ms/step | keras ms/step"
    head += " | tapefit/keras | first step s (tapefit)"
    lines = [head, " | ".join("---" for _ in head.split(" | "))]
    for row in rows:
        ratio = row.get("tapefit_over_keras")
        lines.append(
            f"{row['model']} | {row['precision']} | {row['xla']} | "
            f"{'on' if row['xla_used'] else 'off'} | {row['cudnn']} | "
            f"{row.get('tapefit_ms', float('nan')):.2f} | {row.get('keras_ms', float('nan')):.2f}"
            f" | {'-' if ratio is None else f'{ratio:.3f}'} | "
            f"{row.get('tapefit_first_s', float('nan')):.2f}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--xla", nargs="+", choices=["off", "on"], default=["off", "on"])
    parser.add_argument(
        "--cudnn", nargs="+", choices=["eligible", "not"], default=["eligible", "not"]
    )
    parser.add_argument("--steps", nargs="+", choices=list(STEPS), default=list(STEPS))
    parser.add_argument("--windows", type=int, default=5, help="timed windows per step kind")
    parser.add_argument("--window-steps", type=int, default=30, help="steps per timed window")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 1 window of 2 steps")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.windows, args.window_steps = 1, 2
    if min(args.windows, args.window_steps) < 1:
        parser.error("--windows and --window-steps must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    """Measure every cell, print the table and return (and with `--json` write) the figures."""
    args = parse_args(argv)
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = ", ".join(tf.config.experimental.get_device_details(g).get("device_name", g.name)
                          for g in gpus)  # fmt: skip
        print(f"GPU: {names}; TensorFlow {tf.__version__}, Keras {keras.__version__}")
    else:
        print("no GPU: TensorFlow sees none, so these are CPU figures and say nothing of a GPU's")
    sizes = SIZES["smoke" if args.smoke else "full"]
    started = time.perf_counter()
    rows = [run_cell(cell, args, sizes) for cell in cells(args)]
    print(table(rows))
    report = {
        "gpu": bool(gpus),
        "smoke": args.smoke,
        "sizes": sizes,
        "windows": args.windows,
        "window_steps": args.window_steps,
        "seconds": time.perf_counter() - started,
        "rows": rows,
    }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
