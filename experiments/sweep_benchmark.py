"""What a keras-tuner trial costs beyond training: per-trial overhead (everything in a trial that
is not `fit`'s epochs: composing, building, clearing, writing) of a `tune=random` search on the
digits MLP, against the same configurations trained as ordinary `tapefit.run` calls in the same
process; and how much resident memory each trial adds, against the same search with
TensorFlow's custom-gradient registrations kept (what tapefit did before it released them).

    python experiments/sweep_benchmark.py                    # 10 trials, 1 epoch each
    python experiments/sweep_benchmark.py --trials 20 --json sweep.json

Medians over trials (min and max shown); the search's first trial also pays TensorFlow's
warm-up, which is why the baseline runs after it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from tapefit import compose, run  # first: sets the backend and TensorFlow's options

# isort: split
import keras
import tensorflow as tf

import tapefit.runner.run
from tapefit.config.schemas import SpaceEntry
from tapefit.sweeps.search_space import apply_values
from tapefit.sweeps.trial_callbacks import EpochClock
from tapefit.sweeps.tuning import search

SPACE = {  # the classifier's space without the CNN: the target is the MLP's overhead
    "optimizer.learning_rate": {"type": "float", "min": 1e-4, "max": 1e-2, "sampling": "log"},
    "model.dropout": {"type": "float", "min": 0.0, "max": 0.5, "step": 0.1},
    "data.batch_size": {"type": "choice", "values": [32, 64, 128]},
}


def spread(values: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values)}


def growth_per_trial(records: list[dict]) -> float:
    """Median growth of resident memory from one trial's end to the next's, in MB."""
    rss = [record["rss_mb"] for record in records]
    return statistics.median(after - before for before, after in itertools.pairwise(rss))


@contextlib.contextmanager
def registry_kept():
    """Runs that leave TensorFlow's custom-gradient registry alone, as tapefit's did before."""
    released = tapefit.runner.run.released_custom_gradients
    tapefit.runner.run.released_custom_gradients = contextlib.nullcontext
    try:
        yield
    finally:
        tapefit.runner.run.released_custom_gradients = released


def trial_records(search_dir: Path) -> list[dict]:
    records = (json.loads(p.read_text()) for p in search_dir.glob("trials/*/trial.json"))
    return sorted(records, key=lambda record: record["trial_id"])


def ordinary_runs(cfg, trials: list[dict], work_dir: Path) -> list[float]:
    """Each trial's values trained again as an ordinary run; its overhead the same way."""
    overheads = []
    for index, trial in enumerate(trials):
        clock, started = EpochClock(), time.perf_counter()
        ordinary = apply_values(cfg, trial["values"])
        ordinary.tune.algorithm = "none"  # the trial's values as one run, not a search
        run(ordinary, work_dir / f"run-{index}", [clock])
        overheads.append(time.perf_counter() - started - clock.seconds)
    return overheads


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="trials in the search (>= 2)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs per trial (>= 1)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    if args.trials < 2 or args.epochs < 1:
        parser.error("--trials needs at least 2 and --epochs at least 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    """Run the search and the baseline runs; print and return the medians."""
    args = parse_args(argv)
    overrides = ["model.architecture=mlp", f"trainer.epochs={args.epochs}", "trainer.verbose=0"]
    cfg = compose(["tune=random", f"tune.max_trials={args.trials}", *overrides])
    cfg.tune.space = {key: SpaceEntry(**entry) for key, entry in SPACE.items()}
    with tempfile.TemporaryDirectory() as work:
        work_dir = Path(work)
        search(cfg, work_dir / "search")
        trials = trial_records(work_dir / "search")
        plain = compose(overrides)
        baseline = ordinary_runs(plain, trials, work_dir)
        with registry_kept():
            search(cfg, work_dir / "search-registry-kept")
        kept = trial_records(work_dir / "search-registry-kept")
    trial_overheads = [t["overhead_s"] for t in trials]
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}",
        "trials": len(trials),
        "epochs": args.epochs,
        "trial_overhead": spread(trial_overheads),
        "run_overhead": spread(baseline),
        "trial_fit": spread([t["fit_s"] for t in trials]),
        "rss_growth_mb_per_trial": growth_per_trial(trials),
        "rss_growth_mb_per_trial_registry_kept": growth_per_trial(kept),
    }
    ratio = report["trial_overhead"]["median_s"] / report["run_overhead"]["median_s"]
    report["overhead_ratio"] = ratio
    print(f"digits MLP, {len(trials)} trials x {args.epochs} epoch(s); {report['machine']}")
    for label, key in (
        ("trial overhead", "trial_overhead"),
        ("ordinary run overhead", "run_overhead"),
        ("trial fit", "trial_fit"),
    ):
        value = report[key]
        print(f"{label:>22}: {value['median_s']:.2f} s ({value['min_s']:.2f}-{value['max_s']:.2f})")
    print(f"{'ratio':>22}: {ratio:.2f}x the overhead of an ordinary run")
    growth, growth_kept = (
        report["rss_growth_mb_per_trial"],
        report["rss_growth_mb_per_trial_registry_kept"],
    )
    print(
        f"{'memory per trial':>22}: +{growth:.2f} MB RSS (median); "
        f"+{growth_kept:.2f} MB with TensorFlow's custom-gradient registry kept"
        + (f" ({growth / growth_kept:.2f}x)" if growth_kept > 0 else "")
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
