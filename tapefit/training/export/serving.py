"""`export/` in the run directory: every format written aside, verified, and renamed into
place only once all have passed; a failure leaves no `export/` and says what to do."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import keras

from tapefit.errors import TapefitError
from tapefit.files import write_json
from tapefit.training.export.endpoints import ExportEndpoint, check_exportable
from tapefit.training.export.formats import (
    SAVED_MODEL,
    VERIFY_FILE,
    normalize_formats,
    resolve_tolerance,
)
from tapefit.training.export.verification import VerifyBatch, verify_exports
from tapefit.training.export.writers import write_export, write_format
from tapefit.training.run_status import RESUME_DIR

log = logging.getLogger("tapefit")


EXPORT_DIR = "export"  # beside model.keras in the run directory


def export_for_serving(
    model: keras.Model,
    path: Path,
    formats: Sequence[Any] | None = None,
    batch: VerifyBatch | None = None,
    tolerance: float | None = None,
    endpoints: Sequence[ExportEndpoint] | None = None,
) -> Path:
    """Write the model's exports into a temporary sibling of `path`, check them, then rename
    it onto `path`, so no half-written or unverified export is ever seen.

    The SavedModel (`write_export`) is `path` itself; every other format is written by
    `writers.write_format` into `path/<format>/`. Each export is then loaded in its
    own runtime and compared with the model on `batch` (`verification.verify_exports`),
    and `path/verify.json` records the differences.

    Args:
        model: The trained Keras model.
        path: The export folder (`<run dir>/export`).
        formats: `trainer.export_formats`; `None`: the SavedModel alone.
        batch: The inputs to check the exports on (`first_batch(data)`); `None` writes them
            unchecked (`verify.json` says so).
        tolerance: The largest absolute difference from the model an export may show;
            `None`: 1e-4, or 1e-2 for a mixed-precision model (`resolve_tolerance`).
        endpoints: What `check_exportable(model, formats)` returned, when the caller checked
            the formats already (a run does, before training); `None`: checked here.

    Returns:
        `path`.

    Raises:
        TapefitError: in one line, a format that cannot take the model, a missing package,
            an export whose outputs differ from the model's by more than `tolerance`, or a
            failure to write; nothing is left at `path`'s side.
    """
    path = Path(path)
    stage = SAVED_MODEL
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp's 0o700 -> what a plain mkdir would give
    try:
        names = normalize_formats(formats)
        tolerance = resolve_tolerance(model, tolerance)
        stage = names[0]
        with _quiet_tensorflow(), _environment_kept():
            if endpoints is None:
                endpoints = check_exportable(model, names)
            files: dict[str, dict[str, str]] = {}
            for name in names:
                stage = name
                if name == SAVED_MODEL:
                    write_export(model, staging, endpoints)
                    files[name] = {e.name: "saved_model.pb" for e in endpoints}
                else:
                    written = write_format(model, endpoints, name, staging / name)
                    files[name] = {e: f.relative_to(staging).as_posix() for e, f in written.items()}
            stage = "verify"
            report = verify_exports(model, endpoints, staging, files, batch, tolerance)
            write_json(staging / VERIFY_FILE, report)
        _replace_directory(staging, path)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, TapefitError):
            raise TapefitError(f"{error}; {_after_failure(path, refused=True)}") from error
        if isinstance(error, Exception):
            raise TapefitError(_failure_message(model, path, error, stage)) from error
        raise
    verified = {k: v["max_abs_diff"] for k, v in report["formats"].items()}
    log.info("exports for serving written to %s, largest differences: %s", path, verified)
    return path


@contextmanager
def _quiet_tensorflow() -> Iterator[None]:
    """Silence TensorFlow's INFO lines while saving (they name the temporary directory)."""
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


@contextmanager
def _environment_kept() -> Iterator[None]:
    """Undo what the converters change in the process environment: tf2onnx sets
    `TF_CPP_MIN_LOG_LEVEL=3`, which would hide TensorFlow's errors in every process this one
    starts afterwards (a sweep's trials, a launcher's workers)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)


def _replace_directory(source: Path, target: Path) -> None:
    """Rename `source` onto `target`; an older `target` (a re-run) is moved aside first and
    removed only once the new one is in place."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
        target.rename(old / target.name)
    source.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _failure_message(model: keras.Model, path: Path, error: Exception, stage: str) -> str:
    """What failed and how to fix it, on one line; a run with checkpoints can be finished from
    them without training again."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    cause = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    if len(cause) > 300:
        cause = cause[:297] + "..."
    if isinstance(error, OSError):
        fix = "make the run directory writable and give it free space"
    else:
        fix = (
            f"Keras' model.export traces {type(model).__name__}.call in a tf.function on the "
            "inputs of its first call, so call() must run there and the step must call the model"
        )
    if stage == SAVED_MODEL:
        what = f"writing the SavedModel {path}"
    elif stage == "verify":
        what = f"checking the exports in {path} against the model"
    else:
        what = f"writing the {stage} export {path / stage}"
        fix += f", or leave {stage} out of trainer.export_formats"
    return f"trainer.export=true: {what} failed ({cause}); {fix}; {_after_failure(path)}"


def _after_failure(path: Path, refused: bool = False) -> str:
    """How to go on after a failed export: from the checkpoints when the run has them; after
    a refusal (`refused`), with other `trainer.export_formats`."""
    has_checkpoints = any((path.parent / RESUME_DIR).glob("*.json"))
    if refused:
        if not has_checkpoints:
            return "or set trainer.export=false"
        return (
            f"the trained weights stay in {RESUME_DIR}/: once fixed, run the same command with "
            f"resume=true, or finish with other formats: trainer.export_formats=[{SAVED_MODEL}] "
            "resume=true force_resume=true"
        )
    if has_checkpoints:
        return (
            f"the trained weights stay in {RESUME_DIR}/: once fixed, run the same command with "
            "resume=true, or finish without the export: trainer.export=false resume=true "
            "force_resume=true"
        )
    return "or set trainer.export=false"
