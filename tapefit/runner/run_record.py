"""What a run directory says about its run (the status connector): claimed for this process,
`status.json` `running` → `completed`, `failed` (with the error) or `interrupted`, and the
HParams session of the run's values and the experiment tracker's run ended the same way."""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType
from typing import Any

import tensorflow as tf
from omegaconf import OmegaConf

from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.config.snapshot import config_snapshot
from tapefit.errors import TapefitError
from tapefit.files import atomic_write
from tapefit.training.hparams import RunSession, hyperparameters_of
from tapefit.training.run_status import claim, record_end, write_status
from tapefit.training.runtime import lost_worker_error

log = logging.getLogger("tapefit")


class RunRecord:
    """A context manager around one run in `run_dir`; `completed(results)` ends it well, an
    exception leaving the block ends it as `interrupted` or `failed` and goes on."""

    def __init__(self, cfg: Any, run_dir: Path, hparams_session: bool) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.snapshot = config_snapshot(cfg)  # the run's values, flat: made once
        self.tracker: Any = None  # an experiment tracker (logger=...), told the same ends
        self.session = None
        if hparams_session and cfg.callbacks.tensorboard.enabled:
            self.session = RunSession(run_dir / "tensorboard", hyperparameters_of(self.snapshot))

    def __enter__(self) -> RunRecord:
        callbacks = self.cfg.callbacks
        named = tuple(  # the top of each configured file's path inside the run directory
            Path(callbacks[key].filename).parts[0] for key in ("csv_logger", "model_checkpoint")
        )
        claim(self.run_dir, resume=self.cfg.resume, named=named)
        config = self.run_dir / ".hydra" / "config.yaml"
        if not (self.cfg.resume and config.is_file()):  # from Python, Hydra wrote none
            config.parent.mkdir(exist_ok=True)
            atomic_write(config, lambda file: file.write(OmegaConf.to_yaml(self.cfg)))
        log.info("run directory: %s", self.run_dir.resolve())
        return self

    def start_session(self) -> None:
        """Start the HParams session (once the strategy exists)."""
        if self.session is not None:
            self.session.start()

    def track(self, tracker: Any) -> None:
        """Open `tracker`'s run for this one (the same again on resume) with the config."""
        self.tracker = tracker
        tracker.start(self.run_dir, self.snapshot, resume=bool(self.cfg.resume))

    def tracker_callbacks(self) -> list[Any]:
        """The tracker's Keras callback, if there is a tracker."""
        return [] if self.tracker is None else [self.tracker.callback()]

    def _end(self, state: str, **fields: Any) -> None:
        record_end(self.run_dir, state, **fields)
        if self.session is not None:
            self.session.end(state, fields.get("error"))
        if self.tracker is not None:
            self.tracker.end(state, self.run_dir)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None:
            return
        if isinstance(error, RunInterrupted):
            self._end("interrupted", signal=error.signum, error=str(error))
        elif isinstance(error, TapefitError):
            self._end("failed", error=str(error))
        elif isinstance(error, tf.errors.UnavailableError) and (
            self.cfg.trainer.strategy == "multi_worker"
        ):
            lost = lost_worker_error(error)
            self._end("failed", error=str(lost))
            raise lost from None
        else:
            self._end("failed", error=f"{type(error).__name__}: {error}")

    def completed(self, results: dict[str, Any]) -> None:
        """`status.json` says `completed` with the objective; the summary line is logged."""
        write_status(
            self.run_dir,
            "completed",
            objective=results["objective"],
            objective_direction=results["objective_direction"],
        )
        if self.session is not None:
            self.session.end("completed", results=results)
        if self.tracker is not None:
            self.tracker.end("completed", self.run_dir, results)
        tests = ", ".join(f"{k}={v:.4f}" for k, v in results.items() if k.startswith("test_"))
        value = results["objective_value"]
        log.info(
            "completed: %s; objective %s=%s",
            tests or "no test split",
            results["objective"],
            "none" if value is None else f"{value:.4f}",
        )
