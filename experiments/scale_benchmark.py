"""Scale-out and precision figures, each a ratio against a baseline measured the same way:

    python experiments/scale_benchmark.py workers     # 2 workers on 127.0.0.1 vs one process
    python experiments/scale_benchmark.py precision   # mixed_bfloat16 vs float32, the CNN

`workers`: the digits CNN trained by `tapefit.run` with the same global batch, once in one
process and once as two multi-worker processes started like `python -m tapefit.launch
--workers 2`; seconds per global step are medians over epochs (the first, which traces, left
out). `precision`: TapeModel's CNN step under both policies in one process, timed windows
interleaved (experiments/benchmark.py's runner), medians in ms per step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tapefit import compose, run  # first: sets the backend and TensorFlow's options

# isort: split
import keras
import tensorflow as tf

from tapefit.launch import Group, Role, worker_roles
from tapefit.training.runtime import cpu_has_amx_bfloat16

HERE = Path(__file__).resolve().parent


class StepClock(keras.callbacks.Callback):
    """Seconds from each epoch's start to its last training batch's end (validation excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[float] = []

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.started = self.last = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.last = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.epochs.append(self.last - self.started)


def cpu_name() -> str:
    """The CPU's model name, its core count, and whether it has AMX bfloat16."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        name = next(line.split(":", 1)[1].strip() for line in lines if "model name" in line)
    except (OSError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores, AMX bf16: {cpu_has_amx_bfloat16()}"


def worker(out: Path, overrides: list[str]) -> None:
    """One process's share: train, then write its epoch times (one file per task)."""
    clock = StepClock()
    cfg = compose(overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        metrics = run(cfg, Path(run_dir) / "run", [clock])
    task = json.loads(os.environ.get("TF_CONFIG", '{"task": {"index": 0}}'))["task"]["index"]
    steps = cfg.trainer.steps_per_epoch
    result = {"epoch_s": clock.epochs, "steps": steps, "objective": metrics["objective_value"]}
    (out.parent / f"{out.name}.{task}.json").write_text(json.dumps(result))


def timed(roles: list[Role], overrides: list[str], out: Path, timeout: float) -> dict:
    """Start `roles` as worker processes of this script; seconds per global step of task 0."""
    command = [sys.executable, str(Path(__file__)), "worker", "--out", str(out), "--"]
    group = Group(roles, overrides, command)
    code = group.wait(timeout)
    if code != 0:
        raise SystemExit(f"scale_benchmark: a worker exited with {code}")
    result = json.loads((out.parent / f"{out.name}.0.json").read_text())
    per_step = [seconds / result["steps"] for seconds in result["epoch_s"][1:]]
    return {
        "median_ms": 1e3 * statistics.median(per_step),
        "min_ms": 1e3 * min(per_step),
        "max_ms": 1e3 * max(per_step),
        "epochs_timed": len(per_step),
    }


def workers(args: argparse.Namespace) -> dict:
    """Seconds per global step: one process, then two multi-worker processes on loopback."""
    overrides = [
        "model.architecture=cnn",
        f"data.batch_size={args.batch_size}",
        f"trainer.epochs={args.epochs}",
        f"trainer.steps_per_epoch={args.steps}",
        "trainer.steps_per_execution=1",
        "trainer.verbose=0",
        "trainer.checkpoints=false",
        "trainer.save_model=false",
        "callbacks.tensorboard.enabled=false",
    ]
    with tempfile.TemporaryDirectory() as work:
        one = timed([Role("one", {})], overrides, Path(work) / "one", args.timeout)
        two_workers = worker_roles(2, "127.0.0.1")
        multi = [*overrides, "trainer.strategy=multi_worker"]
        two = timed(two_workers, multi, Path(work) / "two", args.timeout)
    report = {"one_process": one, "two_workers": two, "ratio": two["median_ms"] / one["median_ms"]}
    print(f"digits CNN, global batch {args.batch_size}, {args.steps} steps x {args.epochs} epochs")
    for label, key in (("one process", "one_process"), ("two workers", "two_workers")):
        value = report[key]
        print(
            f"{label:>12}: {value['median_ms']:.1f} ms per global step "
            f"({value['min_ms']:.1f}-{value['max_ms']:.1f}, {value['epochs_timed']} epochs)"
        )
    print(f"{'ratio':>12}: {report['ratio']:.2f}x one process's time per global step")
    return report


def precision(args: argparse.Namespace) -> dict:
    """TapeModel's CNN step, float32 against mixed_bfloat16, windows interleaved."""
    sys.path.insert(0, str(HERE))
    import benchmark  # experiments/benchmark.py: the same runner and workload

    settings = benchmark.parse_args(
        ["--models", "cnn", "--variants", "tapefit", "--steps", str(args.steps)]
    )
    runners = {}
    for policy in ("float32", "mixed_bfloat16"):
        keras.mixed_precision.set_global_policy(policy)
        work = benchmark.image_workload("cnn", args.batch_size)
        runners[policy] = benchmark.Runner("tapefit", work, settings)
        runners[policy].first_step()
        runners[policy].windows(1, args.steps)  # warm-up
    per_step: dict[str, list[float]] = {policy: [] for policy in runners}
    for _ in range(args.windows):
        for policy, runner in runners.items():
            per_step[policy] += runner.windows(1, args.steps)
    keras.mixed_precision.set_global_policy("float32")
    report = {
        policy: {
            "median_ms": 1e3 * statistics.median(times),
            "min_ms": 1e3 * min(times),
            "max_ms": 1e3 * max(times),
        }
        for policy, times in per_step.items()
    }
    report["ratio"] = report["mixed_bfloat16"]["median_ms"] / report["float32"]["median_ms"]
    print(f"digits-shaped CNN, batch {args.batch_size}, {args.windows} windows x {args.steps}")
    for policy in ("float32", "mixed_bfloat16"):
        value = report[policy]
        print(
            f"{policy:>15}: {value['median_ms']:.2f} ms per step "
            f"({value['min_ms']:.2f}-{value['max_ms']:.2f})"
        )
    print(f"{'ratio':>15}: {report['ratio']:.2f}x float32's time per step")
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["workers", "precision", "worker"])
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch or window")
    parser.add_argument("--epochs", type=int, default=6, help="workers: epochs (first untimed)")
    parser.add_argument("--windows", type=int, default=9, help="precision: timed windows")
    parser.add_argument("--timeout", type=float, default=600, help="workers: seconds at most")
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.overrides = overrides
    if min(args.batch_size, args.steps, args.windows) < 1 or args.epochs < 2:
        parser.error("--batch-size, --steps and --windows need at least 1, --epochs at least 2")
    return args


def main(argv: list[str] | None = None) -> dict | None:
    """Run the asked part, print its table, return (and optionally save) the results."""
    args = parse_args(argv)
    if args.part == "worker":
        worker(args.out, args.overrides)
        return None
    print(f"{cpu_name()}; TensorFlow {tf.__version__}, Keras {keras.__version__}")
    report = workers(args) if args.part == "workers" else precision(args)
    report["machine"] = cpu_name()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
