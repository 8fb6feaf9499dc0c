"""`python -m tapefit.mine run=<run dir> input=pairs.tsv output=mined.tsv [num_negatives=1]
[range_min=0] [range_max=10] [margin=M] [relative_margin=R] [ckpt=tested] [data overrides]`:
hard negatives mined by a finished run's model, written as the pair file again with a
`negative` column (`data.negative_column=negative` trains on it), the positive's rank and
score and the negative's score; sentence-transformers' `mine_hard_negatives`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tapefit.backend import set_command_defaults

NUMBERS = {"num_negatives": int, "range_min": int, "range_max": int, "block": int}
FRACTIONS = ("margin", "relative_margin")


def main(argv: Sequence[str] | None = None) -> int:
    """Mine the file named by `input=` with the run named by `run=`; exit 2 on bad input.

    Args:
        argv: The arguments (default: the command line's).

    Returns:
        The exit code: 0, or 2 for bad input.
    """
    set_command_defaults()
    from tapefit.errors import TapefitError
    from tapefit.evaluation.mining import MiningOptions
    from tapefit.runner.finished_runs import command
    from tapefit.runner.mined_files import mine_run

    def act(own: dict, overrides: list) -> None:
        settings = {}
        for key, value in own.items():
            try:
                if key in NUMBERS:
                    settings[key] = int(value)
                elif key in FRACTIONS:
                    settings[key] = float(value)
            except ValueError:
                kind = "a whole number" if key in NUMBERS else "a number"
                raise TapefitError(f"{key}={value!r} must be {kind}") from None
        done = mine_run(
            own["run"],
            own["input"],
            own["output"],
            overrides,
            MiningOptions(**settings),
            own.get("ckpt", "tested"),
        )
        print(
            f"mined: {done['rows']} rows for {done['anchors']} anchors into {own['output']}; "
            f"{done['without_negative']} anchors had no negative within the filters (left out); "
            f"median rank of the positive {done['median_positive_rank']:g}"
        )

    argv = sys.argv[1:] if argv is None else argv
    optional = ["ckpt", *NUMBERS, *FRACTIONS]
    return command(argv, ["run", "input", "output"], act, optional, "tapefit.mine")


if __name__ == "__main__":
    sys.exit(main())
