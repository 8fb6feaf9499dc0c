"""A run killed with SIGKILL at named points and resumed ends exactly like an uninterrupted one;
status.json tells the truth; SIGTERM/SIGINT stop cleanly; same seed, same result."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import processes
from tests.checkpointing.driver import OVERRIDES, drive, weights
from tests.helpers import REPO, SMALL_CNN, built_once_per_session, run_status, scalar_tags


def refusal(compose, run_dir, *extra):
    """The error `drive(run_dir, "none", *extra)` ends with (exit 2, `tapefit: error: ...`),
    from this process: a refused start trains nothing, so it needs no fresh process (and no
    TensorFlow start-up) of its own."""
    from tapefit import TapefitError
    from tapefit.runner.train import run

    with pytest.raises(TapefitError) as refused:
        run(compose([*OVERRIDES, *extra]), run_dir)
    return str(refused.value)


@pytest.fixture(scope="session")
@built_once_per_session
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("uninterrupted")
    result = drive(run_dir)
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="session")
@built_once_per_session
def killed_in_epoch_3(tmp_path_factory):
    """A run SIGKILLed after step 28 (epoch 3 of 3, 8 steps in): epochs 1 and 2 checkpointed,
    epoch 3 lost. The tests of what a resume does with such a directory copy it
    (`copy_killed`): what is on disk does not depend on which of them killed the run."""
    run_dir = tmp_path_factory.mktemp("killed_in_epoch_3")
    killed = drive(run_dir, "step:28")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    return run_dir


def copy_killed(source, run_dir):
    """`source` (a killed run's directory) copied into `run_dir`, its status.json (running)
    naming a process that has just ended, as the killed one had when it was left: by the
    time a test copies it, that pid may belong to another live process."""
    shutil.copytree(source, run_dir, dirs_exist_ok=True)
    ended = subprocess.Popen(["true"])
    ended.wait()
    left = run_status(run_dir)
    assert left["state"] == "running"
    (run_dir / "status.json").write_text(json.dumps({**left, "pid": ended.pid}))


@pytest.mark.parametrize(
    ("kill_at", "extra"),
    [
        ("step:3", []),  # early in epoch 1, before any checkpoint
        # (between epochs, checkpointed but not yet in TensorBoard or the CSV: the callbacks x
        # models matrix in tests/checkpointing/test_resume_matrix.py stops there, in process)
        # late in the last epoch: that epoch is repeated from its start (`killed_in_epoch_3`)
        ("step:28", []),
        # resumed mid-epoch after step 24 (epoch 3, 4 steps in), killed again after the
        # resumed epoch's own step checkpoint at step 27 (7 steps in), resumed again
        ("step:26,step:28", ["trainer.checkpoint_every_steps=3"]),
        # during epoch 1's validation (its first execution, batches 1-3), 3 steps an
        # execution: Keras names the last execution's end step 11 of 10, and no step
        # checkpoint may claim the epoch's 10 steps before it is validated
        # (tests/checkpointing/test_kill_points.py sweeps every point in process)
        (
            "point:validation-1-3",
            ["trainer.checkpoint_every_steps=5", "trainer.steps_per_execution=3"],
        ),
        # between the weights of epoch 2's checkpoint and its marker
        ("point:checkpoint-epoch-0002", []),
    ],
)
def test_resume_after_sigkill_equals_the_uninterrupted_run(
    uninterrupted, compose, tmp_path, kill_at, extra, request
):
    first, *later = kill_at.split(",")
    if kill_at == "step:28":  # the killed run other tests copy too
        copy_killed(request.getfixturevalue("killed_in_epoch_3"), tmp_path)
    else:
        killed = drive(tmp_path, first, *extra)
        assert killed.returncode == -signal.SIGKILL
    assert run_status(tmp_path)["state"] == "running"  # nothing claims it finished
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "model.keras").exists()
    if kill_at == "step:3":  # no checkpoint yet: a plain re-run starts again from scratch
        again = drive(tmp_path, "none", *extra)
        assert again.returncode == 0, again.stderr[-2000:]
    else:
        refused = refusal(compose, tmp_path, *extra)
        assert "holds a killed run with checkpoints: add resume=true" in refused
        for point in later:
            killed = drive(tmp_path, point, "resume=true", *extra)
            assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
            assert "after epoch 2 and 4 steps" in killed.stderr
        resumed = drive(tmp_path, "none", "resume=true", *extra)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        if later:
            assert "after epoch 2 and 7 steps" in resumed.stderr
        if kill_at == "point:validation-1-3":  # the step-5 checkpoint, epoch 1 repeated 6-10
            assert "after epoch 0 and 6 steps" in resumed.stderr
        if kill_at == "point:checkpoint-epoch-0002":  # a marker-less epoch 2: the one before
            assert "after epoch 1 and 0 steps" in resumed.stderr
    assert run_status(tmp_path)["state"] == "completed"
    for expected, actual in zip(weights(uninterrupted), weights(tmp_path), strict=True):
        np.testing.assert_array_equal(actual, expected)
    history = json.loads((tmp_path / "history.json").read_text())
    assert history == json.loads((uninterrupted / "history.json").read_text())
    csv_rows = (tmp_path / "history.csv").read_text().splitlines()
    assert csv_rows == (uninterrupted / "history.csv").read_text().splitlines()
    for split in ("train", "validation"):
        logged = scalar_tags(tmp_path / "tensorboard" / split)["epoch_loss"]
        assert len(logged) == 3  # every epoch exactly once
        expected = history["loss" if split == "train" else "val_loss"]
        np.testing.assert_allclose(sorted(logged), sorted(expected), rtol=1e-6)


def test_a_resume_with_another_config_is_refused_naming_the_keys(
    compose, tmp_path, killed_in_epoch_3
):
    from tapefit.runner.train import run

    copy_killed(killed_in_epoch_3, tmp_path)
    refused = refusal(compose, tmp_path, "resume=true", "optimizer.learning_rate=0.5")
    assert "config differs from the checkpointed run's in optimizer.learning_rate" in refused
    # forced, it trains to the end (in this process: nothing is compared with another run)
    forced = ["resume=true", "optimizer.learning_rate=0.5", "force_resume=true"]
    assert run(compose([*OVERRIDES, *forced]), tmp_path)["epochs_run"] == 3
    assert run_status(tmp_path)["state"] == "completed"


def test_a_run_checkpointed_with_other_config_keys_resumes_when_forced(
    uninterrupted, compose, tmp_path, killed_in_epoch_3
):
    """A run directory whose checkpoints record other keys for the same model (here
    `model.name=classifier` for the model's `_target_` and arguments) is refused in one line
    naming them and saying how to resume it; forced, it ends with the same weights as the
    uninterrupted run."""
    copy_killed(killed_in_epoch_3, tmp_path)
    for marker in (tmp_path / "resume").glob("*.json"):
        metadata = json.loads(marker.read_text())
        config = metadata["config"]
        for group, old in (("model", "classifier"), ("data", "digits"), ("optimizer", "adam")):
            for key in [k for k in config if k.startswith(f"{group}.")]:
                del config[key]
            config[f"{group}.name"] = old
        marker.write_text(json.dumps(metadata))
    refused = refusal(compose, tmp_path, "resume=true")
    assert "\n" not in refused  # one line
    assert "the config differs from the checkpointed run's in data._target_ (None -> " in refused
    assert "add force_resume=true" in refused
    forced = drive(tmp_path, "none", "resume=true", "force_resume=true")
    assert forced.returncode == 0, forced.stderr[-2000:]
    for mine, theirs in zip(weights(tmp_path), weights(uninterrupted), strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_a_corrupt_latest_checkpoint_falls_back_to_the_one_before(
    compose, tmp_path, killed_in_epoch_3
):
    from tapefit.runner.train import run

    copy_killed(killed_in_epoch_3, tmp_path)
    checkpoints = sorted((tmp_path / "resume").glob("*.weights.h5"))
    assert [p.name for p in checkpoints] == ["epoch-0001.weights.h5", "epoch-0002.weights.h5"]
    checkpoints[-1].write_bytes(b"truncated")
    # the resume in this process: it is compared with no other run
    with pytest.warns(UserWarning, match="checkpoint epoch-0002 is unreadable"):
        run(compose([*OVERRIDES, "resume=true"]), tmp_path)
    assert json.loads((tmp_path / "metrics.json").read_text())["epochs_run"] == 3


def test_a_checkpoint_write_failing_half_way_fails_the_run_and_keeps_the_one_before(
    uninterrupted, tmp_path
):
    """Epoch 2's checkpoint (1.6 MB of weights) cannot be written past 20 kB: the run fails in
    one line, no half-written file is left, and epoch 1's checkpoint resumes exactly."""
    failed = drive(tmp_path, "fsize:1")
    assert failed.returncode == 2, failed.stderr[-2000:]
    message = (
        f"checkpoint epoch-0002 could not be written to {tmp_path / 'resume'} (File too large); "
        "the last complete one, epoch-0001, is intact: free space there and continue with "
        "resume=true"
    )
    assert failed.stderr.strip().splitlines()[-1] == f"tapefit: error: {message}"
    assert "Traceback" not in failed.stderr
    assert run_status(tmp_path) | {"state": "failed", "error": message} == run_status(tmp_path)
    assert sorted(p.name for p in (tmp_path / "resume").iterdir()) == [
        "epoch-0001.callbacks.npz",
        "epoch-0001.json",
        "epoch-0001.weights.h5",
    ]
    resumed = drive(tmp_path, "none", "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming" in resumed.stderr and "after epoch 1 and 0 steps" in resumed.stderr
    for expected, actual in zip(weights(uninterrupted), weights(tmp_path), strict=True):
        np.testing.assert_array_equal(actual, expected)
    history = json.loads((tmp_path / "history.json").read_text())
    assert history == json.loads((uninterrupted / "history.json").read_text())


SIGNAL_AT = """
import os, signal
import keras

class SignalAt(keras.callbacks.Callback):
    # SIGUSR1 to this process at the end of optimizer step `step`, as SLURM sends it before a
    # job's time limit with sbatch --signal=USR1@90.
    def __init__(self, step):
        super().__init__()
        self.step = step
    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == self.step:
            os.kill(os.getpid(), signal.SIGUSR1)
"""


def test_sigusr1_in_a_slurm_job_checkpoints_mid_epoch_requeues_and_the_requeued_start_resumes(
    uninterrupted, tmp_path
):
    """SIGUSR1 at step 15's end (epoch 2, 5 steps in): the run stops there with a checkpoint
    of those steps, exit 138, and `scontrol requeue JOBID`; the same command started again
    as SLURM restarts a requeued job (SLURM_RESTART_COUNT=1) resumes there by itself, in the
    same default run directory, and ends like the uninterrupted run."""
    (tmp_path / "signal_at.py").write_text(SIGNAL_AT)
    scontrol = tmp_path / "bin" / "scontrol"  # records its arguments, as SLURM's would act
    scontrol.parent.mkdir()
    scontrol.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\n')
    scontrol.chmod(0o755)
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train"}
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", **slurm)
    env["PATH"] = f"{scontrol.parent}{os.pathsep}{env['PATH']}"
    command = [
        *(sys.executable, "-m", "tapefit", *OVERRIDES),
        "+callbacks.extra.preempt._target_=signal_at.SignalAt",
        "+callbacks.extra.preempt.step=15",
    ]
    kwargs = {"cwd": tmp_path, "capture_output": True, "text": True, "timeout": 240}
    first = processes.run(command, env=env, **kwargs)
    assert first.returncode == 138, first.stderr[-2000:]
    assert "interrupted by SIGUSR1 after the current step" in first.stderr
    run_dir = tmp_path / "outputs" / "classifier" / "slurm-4242"
    assert run_status(run_dir) | {"state": "interrupted", "requeued": True} == run_status(run_dir)
    assert (scontrol.parent / "calls").read_text() == "requeue 4242\n"
    markers = sorted(p.name for p in (run_dir / "resume").glob("*.json"))
    assert markers == ["epoch-0001-step-00005.json", "epoch-0001.json"]
    requeued = processes.run(command, env={**env, "SLURM_RESTART_COUNT": "1"}, **kwargs)
    assert requeued.returncode == 0, requeued.stderr[-2000:]
    log = (run_dir / "tapefit.log").read_text()
    assert "requeued SLURM job 4242: its next start resumes from this checkpoint" in log
    assert "SLURM restarted job 4242 (restart 1): resuming" in log
    assert "after epoch 1 and 5 steps" in log
    assert run_status(run_dir)["state"] == "completed"
    for expected, actual in zip(weights(uninterrupted), weights(run_dir), strict=True):
        np.testing.assert_array_equal(actual, expected)
    history = json.loads((run_dir / "history.json").read_text())
    assert history == json.loads((uninterrupted / "history.json").read_text())


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_stop_after_the_step_with_status_interrupted(tmp_path, signum, code):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    process = processes.Popen(
        [
            sys.executable,
            "-m",
            "tapefit",
            # the MLP on 10 steps an epoch: the first checkpoint, the signal's cue, comes
            # after a fraction of a second of training (how the run stops is not the CNN's)
            "model.architecture=mlp",
            "data.train_limit=320",
            "trainer.epochs=200",
            "trainer.verbose=0",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(tmp_path.glob("resume/*.json")):
            time.sleep(0.2)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == code
    assert "Traceback" not in stderr and "status.json says interrupted" in stderr
    assert run_status(tmp_path)["state"] == "interrupted"
    assert not (tmp_path / "metrics.json").exists()


def test_same_seed_and_determinism_give_identical_runs(compose, tmp_path):
    """The seed decides the run. The Siamese model's (and every resume cell's) two runs of one
    seed are compared bitwise in tests/checkpointing/test_resume_matrix.py."""
    from tapefit.runner.train import run

    overrides = [
        "experiment=classifier",
        *SMALL_CNN,
        "trainer.epochs=2",
        "trainer.deterministic=true",
        "trainer.verbose=0",
        "data.train_limit=400",
    ]
    results = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        run(compose([*overrides, f"seed={seed}"]), tmp_path / name)
        results[name] = (
            weights(tmp_path / name),
            json.loads((tmp_path / name / "history.json").read_text()),
        )
    for a, b in zip(results["a"][0], results["b"][0], strict=True):
        np.testing.assert_array_equal(a, b)
    assert results["a"][1] == results["b"][1]
    assert any(
        not np.array_equal(a, c) for a, c in zip(results["a"][0], results["c"][0], strict=True)
    )
