"""Test helpers shared by several test modules."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m tapefit ARGS` in a fresh process, bounded in time."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "tapefit", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def scalar_tags(log_dir: Path) -> dict[str, list[float]]:
    """Every scalar written to the TensorBoard event files in `log_dir`, tag -> values in order."""
    scalars: dict[str, list[float]] = {}
    for events in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                number = (
                    tf.make_ndarray(value.tensor)
                    if value.HasField("tensor")
                    else value.simple_value
                )
                scalars.setdefault(value.tag, []).append(float(number))
    return scalars


def load_experiment(name: str):
    """Import `experiments/<name>.py` as a module (the scripts are user code, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and Keras registration look the module up
    spec.loader.exec_module(module)
    return module
