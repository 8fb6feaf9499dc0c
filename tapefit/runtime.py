"""Process-wide set-up, done in one place: seeds, determinism, dtype policy, strategy."""

from __future__ import annotations

import warnings
from pathlib import Path

import keras
import tensorflow as tf

from tapefit.choices import parse_choice
from tapefit.config import Precision, Strategy


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed Python, NumPy and TensorFlow; optionally make TF ops deterministic (slower)."""
    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()


def cpu_has_amx_bfloat16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether the CPU has AMX bfloat16 tiles, the only CPU feature that made bf16 pay off in
    tapefit's measurements; None if the flags cannot be read."""
    try:
        flags = set(cpuinfo.read_text().split())
    except OSError:
        return None
    return "amx_bf16" in flags


def set_precision(precision: str) -> None:
    """Set Keras' global dtype policy; models built afterwards compute in it."""
    precision = parse_choice(Precision, precision, "trainer.precision").value
    on_cpu = not tf.config.list_physical_devices("GPU")
    if precision == "mixed_bfloat16" and on_cpu and cpu_has_amx_bfloat16() is False:
        warnings.warn(
            "mixed_bfloat16 on a CPU without AMX trained slower than float32 in tapefit's "
            "measurements (README, Benchmark): use float32 unless you measured otherwise",
            stacklevel=2,
        )
    if precision == "mixed_float16" and on_cpu:
        warnings.warn(
            "mixed_float16 is meant for GPUs; on a CPU it is slow: use float32", stacklevel=2
        )
    keras.mixed_precision.set_global_policy(precision)


def make_strategy(name: str) -> tf.distribute.Strategy:
    """The `tf.distribute` strategy named in config.

    `default` is TensorFlow's no-op strategy; `one_device` pins the first GPU (or the CPU);
    `mirrored` replicates over every local GPU (or logical device); `multi_worker` reads the
    cluster from the `TF_CONFIG` environment variable.
    """
    strategy = parse_choice(Strategy, name, "trainer.strategy")
    if strategy == Strategy.one_device:
        device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if strategy == Strategy.mirrored:
        return tf.distribute.MirroredStrategy()
    if strategy == Strategy.multi_worker:
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.get_strategy()


def jit_compile_argument(jit_compile: bool | None) -> str | bool:
    """`trainer.jit_compile` as `Model.compile` takes it: null means Keras' `"auto"`."""
    return "auto" if jit_compile is None else bool(jit_compile)
