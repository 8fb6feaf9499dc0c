"""`python -m tapefit.predict run=<run dir> output=preds.csv [split=test] [ckpt=tested]
[scale=label] [data overrides]`: a finished run's model's predictions as CSV — class
probabilities and the label for the classifier, the similarity of each pair for the Siamese
model (its text columns named as the input's, `data.text1_column`/`text2_column`; with
`scale=label`, also on the labels' scale for a `cosine_mse` run), the outputs of a model of
yours (or the columns its `prediction_columns(x, y_pred)` gives).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tapefit.backend import set_command_defaults


def main(argv: Sequence[str] | None = None) -> int:
    """Write the predictions of the run named by `run=` to `output=`; exit 2 on bad input.

    Args:
        argv: The arguments (default: the command line's).

    Returns:
        The exit code: 0, or 2 for bad input.
    """
    set_command_defaults()
    from tapefit.runner.finished_runs import command
    from tapefit.runner.predictions import predict_run

    def act(own: dict, overrides: list) -> None:
        path = predict_run(
            own["run"],
            own["output"],
            overrides,
            split=own.get("split", "test"),
            ckpt=own.get("ckpt", "tested"),
            scale=own.get("scale", "similarity"),
        )
        print(f"predictions: {path}")

    argv = sys.argv[1:] if argv is None else argv
    optional = ["split", "ckpt", "scale"]
    return command(argv, ["run", "output"], act, optional, "tapefit.predict")


if __name__ == "__main__":
    sys.exit(main())
