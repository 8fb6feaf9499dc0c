"""Process-wide set-up, done in one place: seeds, determinism, dtype policy, strategy."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import keras
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from tapefit.choices import parse_choice
from tapefit.config.schemas import Precision, ShardPolicy, Strategy
from tapefit.errors import TapefitError


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
            "measurements (docs/explanation/benchmark.md): use float32 unless you measured "
            "otherwise",
            stacklevel=2,
        )
    if precision == "mixed_float16" and on_cpu:
        warnings.warn(
            "mixed_float16 is meant for GPUs; on a CPU it is slow: use float32", stacklevel=2
        )
    keras.mixed_precision.set_global_policy(precision)


DEVICE = re.compile(r"^(gpu|cpu):(\d+)$")


def device_names(devices: Sequence[str], key: str = "trainer.devices") -> list[str]:
    """`[gpu:0, gpu:1]` as TensorFlow device names (`/gpu:0`, ...), each checked for form."""
    names = []
    for device in devices:
        if not DEVICE.match(str(device).lower()):
            raise TapefitError(
                f"{key}: {device!r} is not a device: write gpu:N or cpu:N, e.g. [gpu:0,gpu:1]"
            )
        names.append("/" + str(device).lower())
    return names


def checked_devices(devices: Sequence[str]) -> list[str]:
    """The configured devices, each one this machine has (logical devices count)."""
    names = device_names(devices)
    have = {
        f"/{d.device_type.lower()}:{d.name.rsplit(':', 1)[-1]}"
        for d in tf.config.list_logical_devices()
    }
    missing = [name for name in names if name not in have]
    if missing:
        raise TapefitError(
            f"trainer.devices asks for {', '.join(m[1:] for m in missing)}, which this machine "
            f"does not have (it has {', '.join(sorted(h[1:] for h in have))}): "
            "choose among those, or leave trainer.devices empty"
        )
    return names


def make_strategy(name: str, devices: Sequence[str] = ()) -> tf.distribute.Strategy:
    """The `tf.distribute` strategy named in config, on `devices` where one is given.

    `default` is TensorFlow's no-op strategy; `one_device` pins one device (the first GPU, or
    the CPU); `mirrored` replicates over `devices` (every local GPU by default); `auto` is
    `mirrored` when there are several GPUs (or devices), else `default`; `multi_worker` reads
    the cluster from the `TF_CONFIG` environment variable (`python -m tapefit.launch`).
    """
    strategy = parse_choice(Strategy, name, "trainer.strategy")
    if strategy == Strategy.multi_worker:  # first: it must set up TensorFlow's runtime itself
        slurm = cluster_source() == "slurm"
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver() if slurm else None
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    chosen = checked_devices(devices)
    gpus = [f"/gpu:{i}" for i in range(len(tf.config.list_logical_devices("GPU")))]
    if strategy == Strategy.auto:
        several = chosen or gpus
        strategy = Strategy.mirrored if len(several) > 1 else Strategy.default
        if strategy == Strategy.default and chosen:
            strategy = Strategy.one_device
    if strategy == Strategy.one_device:
        return tf.distribute.OneDeviceStrategy(chosen[0] if chosen else (gpus or ["/cpu:0"])[0])
    if strategy == Strategy.mirrored:
        return tf.distribute.MirroredStrategy(chosen or None)
    return tf.distribute.get_strategy()


def cluster_source() -> str | None:
    """Where a multi-worker cluster is described: `TF_CONFIG` (set by hand or by
    `tapefit.launch`), else a SLURM job step of several tasks (TensorFlow's
    SlurmClusterResolver reads it), else nowhere."""
    if "TF_CONFIG" in os.environ:
        return "tf_config"
    if int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1 and "SLURM_PROCID" in os.environ:
        return "slurm"
    return None


def writes_run_dir(strategy_name: str) -> bool:
    """Whether this process writes the run directory: always, except a multi-worker task that
    is not the chief (the `chief` task, else worker 0 of `TF_CONFIG`'s cluster, or SLURM's task
    0)."""
    if strategy_name != Strategy.multi_worker:
        return True
    if cluster_source() == "slurm":
        return os.environ["SLURM_PROCID"] == "0"
    try:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        cluster = resolver.cluster_spec().as_dict()
    except ValueError:  # malformed TF_CONFIG: the config check says so, from the chief's seat
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


LOST_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def lost_worker_error(error: tf.errors.OpError) -> TapefitError:
    """The one-line error of a multi-worker step that TensorFlow aborted because another
    worker stopped (killed, crashed, preempted: its heartbeats stopped)."""
    tasks = sorted(set(LOST_TASK.findall(error.message)))
    try:  # a collective's error names every task of its group, this one's too
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        own = (resolver.task_type, str(resolver.task_id))
    except ValueError:
        own = None
    tasks = [task for task in tasks if task != own] or tasks
    named = ", ".join(f"{job} {task}" for job, task in tasks) or "another worker"
    return TapefitError(
        f"{named} of the cluster stopped during a step ({type(error).__name__}): restart every "
        "worker together with the same command and resume=true"
    )


def worker_position(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(how many workers, this one's index) in a multi-worker cluster: the chief first, then
    the workers in their order."""
    resolver = strategy.cluster_resolver
    cluster = resolver.cluster_spec().as_dict()
    chiefs = len(cluster.get("chief", []))
    workers = chiefs + len(cluster.get("worker", []))
    index = 0 if resolver.task_type == "chief" else chiefs + int(resolver.task_id)
    return workers, index


def shard_options(policy: str) -> tf.data.Options:
    """tf.data options that split a dataset across workers by `policy` (ShardPolicy)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = {
        ShardPolicy.auto: tf.data.experimental.AutoShardPolicy.AUTO,
        ShardPolicy.data: tf.data.experimental.AutoShardPolicy.DATA,
        ShardPolicy.file: tf.data.experimental.AutoShardPolicy.FILE,
        ShardPolicy.off: tf.data.experimental.AutoShardPolicy.OFF,
    }[parse_choice(ShardPolicy, policy, "trainer.shard_policy")]
    return options


def jit_compile_argument(jit_compile: bool | None) -> str | bool:
    """`trainer.jit_compile` as `Model.compile` takes it: null means Keras' `"auto"`."""
    return "auto" if jit_compile is None else bool(jit_compile)


CUSTOM_GRADIENT_PREFIX = "CustomGradient-"


@contextmanager
def released_custom_gradients() -> Iterator[None]:
    """Forget the custom gradients TensorFlow registered while the block ran.

    Graph-mode `tf.custom_gradient` (every `ReplicaContext.all_reduce` in a Keras train step
    uses one) registers its closure in TensorFlow's process-wide gradient registry for good,
    and the closure keeps its whole traced graph alive (tensorflow/tensorflow#97697): about
    4 MB per model in a plain Keras loop. A run's graphs are unused once it returns, so a
    sweep or tuner trial after it starts from the same memory.
    """
    table = getattr(getattr(tf_ops, "_gradient_registry", None), "_registry", None)
    before = set(table) if isinstance(table, dict) else set()
    try:
        yield
    finally:
        if isinstance(table, dict):
            for name in set(table) - before:
                if name.startswith(CUSTOM_GRADIENT_PREFIX):
                    del table[name]
