"""The measurements behind tapefit's shipped defaults: each candidate setting runs the real
experiment through `tapefit.run`, interleaved with the default, in one process.

    python experiments/defaults.py --experiment classifier --repeats 3
    python experiments/defaults.py --experiment siamese --repeats 3 trainer.epochs=3

Prints median training time (data, model, tracing and `fit`) as a ratio to the current default,
and the experiment's quality metric, so a faster setting that trains worse is visible.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import tapefit

CANDIDATES = {
    "default": [],
    "steps_per_execution=1": ["trainer.steps_per_execution=1"],
    "steps_per_execution=8": ["trainer.steps_per_execution=8"],
    "steps_per_execution=32": ["trainer.steps_per_execution=32"],
    "data.cache=false": ["data.cache=false"],
    "no TensorBoard callback": ["callbacks.tensorboard.enabled=false"],
    "jit_compile=true": ["trainer.jit_compile=true"],
    "mixed_bfloat16": ["trainer.precision=mixed_bfloat16"],
}
QUALITY = {"classifier": "test_accuracy", "mnist": "test_accuracy", "siamese": "test_spearman"}


def measure(
    experiment: str, repeats: int, overrides: list[str], candidates: list[str]
) -> dict[str, dict[str, float]]:
    """Median train time and quality metric per candidate, candidates interleaved per repeat."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    quality: dict[str, list[float]] = {name: [] for name in candidates}
    metric = QUALITY.get(experiment, "test_loss")
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for name in candidates:
                cfg = tapefit.compose(
                    [f"experiment={experiment}", "trainer.verbose=0", "trainer.save_model=false",
                     *overrides, *CANDIDATES[name]]
                )  # fmt: skip
                metrics = tapefit.run(cfg, f"{scratch}/{repeat}-{len(times[name])}-{name}")
                times[name].append(metrics["train_time_s"])
                quality[name].append(metrics[metric])
    return {
        name: {
            "train_s": statistics.median(times[name]),
            "min_s": min(times[name]),
            "max_s": max(times[name]),
            metric: statistics.median(quality[name]),
        }
        for name in candidates
    }


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Measure, print the table, return the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="classifier")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=CANDIDATES)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides applied to every run")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: use a whole number >= 1")
    candidates = ["default", *(c for c in args.candidates if c != "default")]
    results = measure(args.experiment, args.repeats, args.overrides, candidates)
    base = results["default"]["train_s"]
    metric = QUALITY.get(args.experiment, "test_loss")
    print(f"experiment={args.experiment} {' '.join(args.overrides)}; median of {args.repeats}")
    print(f"{'setting':<26} {'train s':>8} {'min':>7} {'max':>7} {'vs default':>10} {metric:>14}")
    for name, r in results.items():
        print(
            f"{name:<26} {r['train_s']:>8.2f} {r['min_s']:>7.2f} {r['max_s']:>7.2f} "
            f"{r['train_s'] / base:>10.3f} {r[metric]:>14.4f}"
        )
    return results


if __name__ == "__main__":
    main()
