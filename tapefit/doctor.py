"""`python -m tapefit.doctor [overrides ...] [--config-dir DIR] [--json FILE]`: what the
composed run will run like, here and on a GPU, before you pay for one.

It builds the run's data and model as `python -m tapefit` would (the same overrides, the
same checks; nothing is trained and no run directory is written) and prints the readiness
report (`tapefit.readiness`): the devices, the dtype policy and the loss scale, XLA for the
step functions, cuDNN for every LSTM and GRU and the option that prevents it, whether the
inputs retrace, `steps_per_execution` and the input pipeline. Every run logs the same lines.

    python -m tapefit.doctor experiment=siamese
    python -m tapefit.doctor experiment=sts trainer.precision=mixed_float16 --json ready.json

Bad input ends with one `tapefit: error:` line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tapefit.backend import set_command_defaults


def report_for(overrides: Sequence[str], config_dir: str | None = None) -> Any:
    """The readiness report of the run `overrides` compose, its model built and compiled.

    Args:
        overrides: As on `python -m tapefit`'s command line.
        config_dir: A project's own `conf/` searched beside tapefit's (`--config-dir`).

    Returns:
        The `tapefit.readiness.Readiness`.

    Raises:
        TapefitError: a config, data or model the run would refuse.

    Example:
        >>> report = report_for(["data=synthetic_pairs", "model=siamese"])  # doctest: +SKIP
    """
    from hydra.errors import CompactHydraException

    from tapefit.config.override_errors import misspelt_override_line
    from tapefit.data.unlabelled import require_labels
    from tapefit.errors import TapefitError
    from tapefit.readiness import readiness_of
    from tapefit.runner import preparation
    from tapefit.runner.composition import compose
    from tapefit.runner.data_from_config import load_checked_data
    from tapefit.runner.spec import RunSpec
    from tapefit.runner.validation import check_config

    extra = []
    if config_dir is not None:
        folder = Path(config_dir).expanduser().resolve()
        if not folder.is_dir():
            raise TapefitError(f"--config-dir {config_dir}: no such folder")
        extra = [f"hydra.searchpath=[file://{folder}]"]
    try:
        cfg = compose([*extra, *overrides])
    except CompactHydraException as error:
        line = misspelt_override_line(error)
        raise TapefitError(line or str(error).strip().splitlines()[0]) from None
    spec = RunSpec.of(cfg, located=check_config(cfg))
    strategy = preparation.prepare(cfg.seed, spec.trainer)
    data = load_checked_data(cfg.data, cfg.seed)
    require_labels(
        data, ("train", "val", "test"), "a run trains and tests on labelled images"
    )  # as a run would
    model = preparation.build_checked_model(spec, data, strategy).model
    return readiness_of(model, data.train, strategy, spec.trainer.jit_compile)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report; with `--json FILE` also write it as JSON.

    Returns:
        0, or 2 for bad input.
    """
    set_command_defaults()
    from tapefit.errors import TapefitError

    parser = argparse.ArgumentParser(prog="python -m tapefit.doctor", description=__doc__)
    parser.add_argument("overrides", nargs="*", help="as on python -m tapefit's command line")
    parser.add_argument("--config-dir", help="your project's conf/, searched beside tapefit's")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        report = report_for(args.overrides, args.config_dir)
    except TapefitError as error:
        print(f"tapefit: error: {error}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
