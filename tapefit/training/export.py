"""`trainer.export=true`: a TensorFlow SavedModel for serving in the run directory's `export/`.

The artefact holds traced functions and weights only, so `tf.saved_model.load(path)` serves it
without tapefit or any custom Keras class. What its endpoints take is the model's choice
(`serving_endpoints()`); every artefact has `serve`, which is also its `serving_default` signature.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import keras

from tapefit.errors import TapefitError
from tapefit.training.lifecycle import RESUME_DIR

log = logging.getLogger("tapefit")
EXPORT_DIR = "export"  # beside model.keras in the run directory
ENDPOINT = "serve"  # Keras' default endpoint name, and the first (serving_default) one

Endpoint = tuple[Callable[..., Any], Sequence[Any]]  # (function, input signature)


def write_endpoints(model: keras.Model, path: Path, endpoints: dict[str, Endpoint]) -> None:
    """Write a SavedModel at `path` whose endpoints are `name -> (function, input signature)`,
    the first of them also `serving_default`; `model` is tracked so lookup tables (a
    `TextVectorization`'s vocabulary) travel with it."""
    archive = keras.export.ExportArchive()
    archive.track(model)
    for name, (function, signature) in endpoints.items():
        archive.add_endpoint(name, function, input_signature=list(signature))
    archive.write_out(str(path), verbose=False)


def write_export(model: keras.Model, path: Path) -> None:
    """The model's `serving_endpoints()` when it has them, else Keras' `model.export`, whose
    endpoint `serve` takes what `call` was built with."""
    endpoints = getattr(model, "serving_endpoints", None)
    if callable(endpoints):
        write_endpoints(model, path, endpoints())
    else:
        model.export(str(path), format="tf_saved_model", verbose=False)


def export_for_serving(model: keras.Model, path: Path) -> Path:
    """Write the model's SavedModel (`write_export`) into a temporary sibling of `path`, then
    rename it onto `path`, so no half-written export is ever seen; a failure is one line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp's 0o700 -> what a plain mkdir would give
    try:
        with _quiet_tensorflow():
            write_export(model, staging)
        _replace_directory(staging, path)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, Exception) and not isinstance(error, TapefitError):
            raise TapefitError(_failure_message(model, path, error)) from error
        raise
    log.info("SavedModel for serving written to %s", path)
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


def _failure_message(model: keras.Model, path: Path, error: Exception) -> str:
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
    if any((path.parent / RESUME_DIR).glob("*.json")):
        after = (
            f"the trained weights stay in {RESUME_DIR}/: once fixed, run the same command with "
            "resume=true, or finish without the export: trainer.export=false resume=true "
            "force_resume=true"
        )
    else:
        after = "or set trainer.export=false"
    return f"trainer.export=true: writing the SavedModel {path} failed ({cause}); {fix}; {after}"
