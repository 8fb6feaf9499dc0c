"""`tapefit.training.runtime`: the process-wide set-up a run makes once: precision (and its
CPU warnings), devices and the distribution strategy, the multi-worker cluster and which task
writes, shard options, and the release of a run's custom gradients."""

import json
import types
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.runtime import (
    device_names,
    jit_compile_argument,
    lost_worker_error,
    set_precision,
    shard_options,
    worker_position,
    writes_run_dir,
)
from tests.helpers import live_graphs


def test_cpu_amx_bfloat16_support_is_read_from_cpu_flags(tmp_path):
    from tapefit.training.runtime import cpu_has_amx_bfloat16

    (tmp_path / "amx").write_text("flags : fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n")
    (tmp_path / "avx512").write_text("flags : fpu avx2 avx512f avx512_bf16\n")
    (tmp_path / "plain").write_text("flags : fpu avx2 fma\n")
    assert cpu_has_amx_bfloat16(tmp_path / "amx") is True
    assert cpu_has_amx_bfloat16(tmp_path / "avx512") is False
    assert cpu_has_amx_bfloat16(tmp_path / "plain") is False
    assert cpu_has_amx_bfloat16(tmp_path / "missing") is None


@pytest.mark.parametrize("has_amx", [False, True])
def test_mixed_bfloat16_warns_only_on_cpus_without_amx(monkeypatch, has_amx):
    import warnings

    from tapefit.training import runtime

    monkeypatch.setattr(runtime, "cpu_has_amx_bfloat16", lambda: has_amx)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runtime.set_precision("mixed_bfloat16")
    messages = [str(w.message) for w in caught if "mixed_bfloat16" in str(w.message)]
    if has_amx:
        assert messages == []
    else:
        assert len(messages) == 1 and "without AMX trained slower than float32" in messages[0]


@pytest.mark.slow
def test_released_custom_gradients_frees_a_plain_keras_models_graphs():
    """The advice in docs/how-to/sweeps.md for a user's own loop of Keras `fit` calls."""
    import keras

    from tapefit.training.runtime import released_custom_gradients

    x, y = np.random.rand(64, 8).astype("float32"), np.random.randint(0, 3, 64)
    before = live_graphs()
    with released_custom_gradients():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
        model.compile("adam", "sparse_categorical_crossentropy")
        model.fit(x, y, epochs=1, verbose=0)
    del model
    assert live_graphs() == before


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("auto", tf.data.experimental.AutoShardPolicy.AUTO),
        ("data", tf.data.experimental.AutoShardPolicy.DATA),
        ("off", tf.data.experimental.AutoShardPolicy.OFF),
    ],
)
def test_the_shard_policy_reaches_the_datasets(policy, expected):
    dataset = tf.data.Dataset.range(4).batch(2).with_options(shard_options(policy))
    assert dataset.options().experimental_distribute.auto_shard_policy == expected


def test_only_the_chief_writes_the_run_directory(monkeypatch):
    def task(task_type, index, chief=False):
        cluster = {"worker": ["h:1", "h:2"], **({"chief": ["h:0"]} if chief else {})}
        monkeypatch.setenv(
            "TF_CONFIG",
            json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}}),
        )
        return writes_run_dir("multi_worker")

    assert task("worker", 0) and not task("worker", 1)
    assert task("chief", 0, chief=True) and not task("worker", 0, chief=True)
    assert writes_run_dir("default")  # one process always writes


def test_a_slurm_job_of_several_tasks_is_a_cluster_and_task_0_writes(monkeypatch):
    from tapefit.training.runtime import cluster_source

    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    assert cluster_source() is None
    monkeypatch.setenv("SLURM_NTASKS", "2")
    for procid, writes in (("0", True), ("1", False)):
        monkeypatch.setenv("SLURM_PROCID", procid)
        assert cluster_source() == "slurm" and writes_run_dir("multi_worker") == writes
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1"]}, "task": {}}))
    assert cluster_source() == "tf_config"  # an explicit TF_CONFIG wins


def test_auto_and_devices_pick_the_strategy_from_what_the_machine_has():
    from tapefit.training.runtime import make_strategy

    assert not tf.config.list_logical_devices("GPU")  # this machine: two logical CPUs, no GPU
    assert make_strategy("auto") is tf.distribute.get_strategy()  # no GPUs: the default
    chosen = make_strategy("auto", ["cpu:1"])  # one listed device: pinned to it
    assert isinstance(chosen, tf.distribute.OneDeviceStrategy)
    assert chosen.extended.worker_devices[0].endswith("CPU:1")
    pinned = make_strategy("one_device", ["cpu:1"])
    assert pinned.extended.worker_devices[0].endswith("CPU:1")


def test_mixed_float16_on_a_cpu_warns_that_it_is_meant_for_gpus():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        set_precision("mixed_float16")
    assert [str(w.message) for w in caught] == [
        "mixed_float16 is meant for GPUs; on a CPU it is slow: use float32"
    ]
    assert keras.mixed_precision.global_policy().name == "mixed_float16"
    with pytest.raises(TapefitError, match=r"^trainer\.precision='float8' is unknown: choose one"):
        set_precision("float8")


def test_devices_become_tensorflow_names_and_a_malformed_one_is_named():
    assert device_names(["GPU:1", "cpu:0"]) == ["/gpu:1", "/cpu:0"]
    with pytest.raises(TapefitError, match=r"^trainer\.devices: 'gpu0' is not a device: write"):
        device_names(["gpu:0", "gpu0"])


def test_jit_compile_null_is_keras_auto():
    assert [jit_compile_argument(v) for v in (None, True, False, 1)] == ["auto", True, False, True]


def test_a_lost_worker_is_named_and_this_task_left_out(monkeypatch):
    message = (
        "Collective ops is aborted by: failed to connect to all addresses; tasks "
        "/job:worker/replica:0/task:0 and /job:worker/replica:0/task:1 of the group"
    )
    error = tf.errors.UnavailableError(None, None, message)
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 0}}),
    )
    assert str(lost_worker_error(error)) == (
        "worker 1 of the cluster stopped during a step (UnavailableError): restart every worker "
        "together with the same command and resume=true"
    )
    monkeypatch.delenv("TF_CONFIG")
    unnamed = tf.errors.UnavailableError(None, None, "the coordination service is gone")
    assert str(lost_worker_error(unnamed)).startswith("another worker of the cluster stopped")


@pytest.mark.parametrize(
    ("task_type", "task_id", "position"), [("chief", 0, (3, 0)), ("worker", 1, (3, 2))]
)
def test_the_chief_comes_first_then_the_workers_in_order(task_type, task_id, position):
    cluster = tf.train.ClusterSpec({"chief": ["h:0"], "worker": ["h:1", "h:2"]})
    resolver = types.SimpleNamespace(
        cluster_spec=lambda: cluster, task_type=task_type, task_id=task_id
    )
    assert worker_position(types.SimpleNamespace(cluster_resolver=resolver)) == position
