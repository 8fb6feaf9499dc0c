"""`python -m tapefit.evaluate run=<run dir> [ckpt=tested|best|last|<epoch>] [name=NAME]
[data overrides]`: re-evaluate a finished run's model on the test split of its data — the same
split, so the figures equal the run's `test_*` metrics, written to `<run dir>/eval/metrics.json`
— or of other data given by the same keys (`data.test_path=other.tsv`), written to
`<run dir>/eval/<name>/metrics.json` (default name: the test file's stem), so each data set
keeps its own figures.

With `queries=q.jsonl corpus=c.jsonl qrels=qrels.tsv` (a BEIR-style search collection), a
text encoder's run is evaluated as a search instead: recall@1/5/10, MRR@10 and NDCG@10,
written to `<run dir>/eval/<name>/retrieval.json` (default name: the queries file's folder).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tapefit.backend import set_command_defaults


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate the run named by `run=`; print the metrics; exit 2 with one line on bad input.

    Args:
        argv: The arguments (default: the command line's).

    Returns:
        The exit code: 0, or 2 for bad input.
    """
    set_command_defaults()
    from tapefit.errors import TapefitError
    from tapefit.runner.finished_runs import RETRIEVAL_FILES, command, evaluate_run, retrieve_run

    def act(own: dict, overrides: list) -> None:
        files = {key: own[key] for key in RETRIEVAL_FILES if key in own}
        if files:
            if overrides:
                raise TapefitError(
                    f"{overrides[0]}: retrieval files take no config overrides; leave it out"
                )
            results = retrieve_run(own["run"], files, own.get("ckpt", "tested"), own.get("name"))
            shown = ", ".join(f"{k}={v:.4f}" for k, v in results.items() if isinstance(v, float))
            print(
                f"retrieval over {results['corpus']} texts, {results['queries']} queries: {shown}"
            )
            return
        results = evaluate_run(own["run"], overrides, own.get("ckpt", "tested"), own.get("name"))
        shown = ", ".join(f"{k}={v:.4f}" for k, v in results.items() if isinstance(v, float))
        print(f"test metrics: {shown}")

    argv = sys.argv[1:] if argv is None else argv
    optional = ["ckpt", "name", *RETRIEVAL_FILES]
    return command(argv, ["run"], act, optional, "tapefit.evaluate")


if __name__ == "__main__":
    sys.exit(main())
