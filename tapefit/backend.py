"""Pins Keras 3 to the TensorFlow backend before Keras is imported anywhere in tapefit."""

import gc
import itertools
import os
import sys
from pathlib import Path

from tapefit.errors import TapefitError

REQUIRED_BACKEND = "tensorflow"


def ensure_tensorflow_backend() -> None:
    """Set KERAS_BACKEND=tensorflow, or fail clearly if another backend was asked for."""
    requested = os.environ.get("KERAS_BACKEND", REQUIRED_BACKEND)
    if requested != REQUIRED_BACKEND:
        raise TapefitError(
            f"KERAS_BACKEND={requested!r} is not supported: tapefit's steps use tf.GradientTape; "
            f"unset KERAS_BACKEND or set KERAS_BACKEND={REQUIRED_BACKEND}"
        )
    # the one setting `import tapefit` makes: Keras' own default, pinned against a keras.json
    # that names another backend
    os.environ["KERAS_BACKEND"] = REQUIRED_BACKEND
    keras = sys.modules.get("keras")
    if keras is not None and keras.backend.backend() != REQUIRED_BACKEND:
        raise TapefitError(
            f"keras was imported with the {keras.backend.backend()!r} backend before tapefit: "
            f"import tapefit first or set KERAS_BACKEND={REQUIRED_BACKEND}"
        )


def set_command_defaults() -> None:
    """The process-wide settings of `python -m tapefit` (never of `import tapefit`), each
    only where the environment does not already choose: TensorFlow's C++ log level, and its
    oneDNN kernels, which TensorFlow turns on by itself only on some Intel CPUs (on this
    project's AVX2 test machine they made the tutorial CNN step 1.33x faster,
    docs/explanation/benchmark.md;
    `TF_ENABLE_ONEDNN_OPTS=0` opts out). Both act only before TensorFlow is imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def freeze_startup_objects() -> None:
    """Put every object alive now (the modules and the import-time state of TensorFlow, Keras,
    Hydra and tapefit: some 425,000 objects) out of the garbage collector's reach.

    Why: every run starts with `keras.backend.clear_session()`, whose `gc.collect()` walks all
    of them each time, 0.2 s a run in a `python -m tapefit` process and once per trial in a
    sweep; frozen, a collection walks only what the runs made, and the memory of a finished
    trial is still freed. Objects alive at start-up live as long as the process anyway. Only
    the command calls it (`import tapefit` changes no process-wide setting).
    """
    gc.freeze()


def started_as_command() -> bool:
    """Whether this process is `python -m tapefit` or the `tapefit` script."""
    argv = getattr(sys, "orig_argv", [])
    as_module = any(
        flag == "-m" and module == "tapefit" for flag, module in itertools.pairwise(argv)
    )
    return as_module or Path(sys.argv[0] if sys.argv else "").name == "tapefit"


def ensure_tensorflow_backend_or_exit() -> None:
    """`ensure_tensorflow_backend`; from the command line a refusal is one line and exit code 2,
    since the package is imported before `__main__` could catch anything."""
    if started_as_command():
        set_command_defaults()
    try:
        ensure_tensorflow_backend()
    except TapefitError as error:
        if not started_as_command():
            raise
        print(f"tapefit: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
