"""What composing the config once saves a command: seconds and compositions per command.

Hydra's command line composes the whole config twice, once only to read `hydra.mode`
(hydra-ecosystem/hydra#3440); `python -m tapefit` composes it once
(`tapefit/config/compose_once.py`). This benchmark runs the same command through the real
entry point (`tapefit.__main__.cli`) alternately with that on and off (off: Hydra alone), in
one process after a warm-up, and reports the median wall time of a command, the compositions
Hydra's loader made and the ratio. The default command is one epoch of the digits MLP; any
overrides given replace it.

    python experiments/composition_benchmark.py --repeats 7
    python experiments/composition_benchmark.py --repeats 7 experiment=siamese trainer.epochs=1
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hydra._internal.config_loader_impl import ConfigLoaderImpl

import tapefit.__main__ as command
from tapefit.config.compose_once import composed_once

DEFAULT = ["model.architecture=mlp", "trainer.epochs=1"]
VARIANTS = {"composed twice (Hydra alone)": contextlib.nullcontext, "composed once": composed_once}


def one_command(overrides: list[str], variant: str, run_dir: Path) -> tuple[float, int]:
    """(seconds, compositions) of `python -m tapefit OVERRIDES` under `variant`."""
    made, load = [], ConfigLoaderImpl.load_configuration

    def counted(loader, *args, **kwargs):
        made.append(1)
        return load(loader, *args, **kwargs)

    ConfigLoaderImpl.load_configuration = counted
    command.composed_once = VARIANTS[variant]
    sys.argv = ["tapefit", f"hydra.run.dir={run_dir}", "trainer.verbose=0", *overrides]
    start = time.perf_counter()
    try:
        command.cli()
    except SystemExit as stop:
        if stop.code not in (0, None, 2):  # 2: a command refused after its composition
            raise
    finally:
        seconds = time.perf_counter() - start
        ConfigLoaderImpl.load_configuration = load
        command.composed_once = composed_once
    return seconds, len(made)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print one table row per variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="commands per variant (alternated)")
    parser.add_argument("overrides", nargs="*", help="the command's overrides (default: the MLP)")
    args = parser.parse_args(argv)
    overrides = args.overrides or DEFAULT
    scratch = Path(tempfile.mkdtemp(prefix="composition-benchmark-"))
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    compositions: dict[str, int] = {}
    for round_ in range(args.repeats + 1):  # round 0 warms up (imports, first traces)
        for index, name in enumerate(VARIANTS):
            took, made = one_command(overrides, name, scratch / f"{round_}-{index}")
            if round_:
                seconds[name].append(took)
                compositions[name] = made
    print(f"command: python -m tapefit {' '.join(overrides)}; medians of {args.repeats}")
    print("| variant | median s | compositions |")
    print("|---|---|---|")
    for name in VARIANTS:
        print(f"| {name} | {statistics.median(seconds[name]):.3f} | {compositions[name]} |")
    once, twice = (statistics.median(seconds[name]) for name in reversed(list(VARIANTS)))
    print(f"ratio (once / twice): {once / twice:.2f}")


if __name__ == "__main__":
    main()
