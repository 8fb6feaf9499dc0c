"""`run(cfg, run_dir)`: the code path of every entry point (CLI, Hydra multirun, notebooks,
tests), a `Run` built from the config (`tapefit.runner.run`). Its phases, which a tuner trial
or a benchmark reuse, live in `tapefit.runner.preparation` and are importable from here too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras

from tapefit.checkpointing.warm_start import WarmStart
from tapefit.errors import TapefitError
from tapefit.runner.preparation import build_data, build_model, prepare, sharded
from tapefit.runner.run import Run

__all__ = ["build_data", "build_model", "prepare", "run", "sharded"]


def run(
    cfg: Any,
    run_dir: str | Path,
    callbacks: list[keras.callbacks.Callback] | None = None,
    *,
    load_data: Callable[[Any, int], Any] | None = None,
    warm_start: WarmStart | None = None,
    hparams_session: bool = True,
) -> dict[str, Any]:
    """Train and evaluate the configured experiment in `run_dir`; return the final metrics.

    The directory's `status.json` says `running`, then `completed`, `failed` (with the error)
    or `interrupted` (SIGINT/SIGTERM, after the current step). `callbacks` are added to the
    configured ones; `load_data(data, seed)` replaces the configured loader: it gets the
    `data` node (checked) and the seed, and returns the data object (a sweep reuses loaded
    data); `warm_start` is a saved model and the epochs it trained, to continue from;
    `hparams_session` makes `tensorboard/` an HParams session of the config's values (a
    search's trials are sessions of their searched values instead).

    Args:
        cfg: The composed config (`tapefit.compose`).
        run_dir: The run directory.
        callbacks: Keras callbacks added to the configured ones.
        load_data: Replaces the configured loader (`load_data(cfg.data, cfg.seed)`).
        warm_start: A saved model and the epochs it trained, to continue from.
        hparams_session: Record the run as an HParams session.

    Returns:
        A flat dict: `test_<metric>` for every test metric, the objective, `epochs_run`,
        `train_time_s`, `wall_time_s` and the split `samples`.

    Raises:
        TapefitError: for bad input, in one line (`status.json` says `failed`); a config
            that asks for a search (`tune.algorithm` not `none`), which one run would ignore,
            before anything is written (run the search with `python -m tapefit tune=...`).

    Examples:
        >>> import tapefit
        >>> cfg = tapefit.compose(["trainer.epochs=1", "data.train_limit=64"])
        >>> tapefit.run(cfg, "outputs/doc-example")["epochs_run"]  # doctest: +SKIP
        1
    """
    refuse_search(cfg)
    return Run(
        cfg,
        run_dir,
        callbacks,
        load_data=load_data,
        warm_start=warm_start,
        hparams_session=hparams_session,
    ).execute()


def refuse_search(cfg: Any) -> None:
    """Refuse a config that asks for a search: `run` trains one run, which would ignore it.

    Examples:
        >>> from omegaconf import OmegaConf
        >>> refuse_search(OmegaConf.create({"tune": {"algorithm": "none"}}))
        >>> refuse_search(OmegaConf.create({"tune": {"algorithm": "random"}}))
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: tune.algorithm=random asks for a search, which ...
    """
    algorithm = (cfg.get("tune") or {}).get("algorithm", "none")
    algorithm = getattr(algorithm, "value", algorithm)  # a TuneAlgorithm in a typed config
    if algorithm != "none":
        raise TapefitError(
            f"tune.algorithm={algorithm} asks for a search, which tapefit.run (one run) would "
            f"ignore: run it with python -m tapefit tune={algorithm}, or compose with tune=none"
        )
