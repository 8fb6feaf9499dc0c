"""Scale-out: two multi-worker processes on 127.0.0.1 (started by `python -m tapefit.launch`)
train the classifier and the Siamese model to the same weights as one process on the same global
batches; only the chief writes the run directory; the launcher's own checks. The strategy and
cluster helpers these runs use: tests/training/test_runtime.py."""

import json
import os
import re
import signal
import sys

import keras
import numpy as np
import pytest

from tapefit.runner.train import run
from tests import processes
from tests.helpers import FORKED_LAUNCH, REPO, SMALL_CNN, SMALL_SIAMESE, shared_once

# model kind -> overrides, and how close the result must be to one process's. Float-order noise
# (two half-batch sums against one batch sum) stays below 1e-8 in the MLP and the Siamese
# model; BatchNorm's statistics magnify it in the CNN (2.4e-5 measured after 8 Adam steps).
CASES = {
    "mlp": (
        [
            "model.architecture=mlp",
            "data.train_limit=256",
            "data.batch_size=32",
            "trainer.shard_policy=data",
            "trainer.epochs=2",
        ],
        1e-5,
    ),
    "cnn": (
        [
            "model.architecture=cnn",  # BatchNormalization, synchronized across the workers
            *SMALL_CNN,
            "model.dropout=0",  # a per-replica mask would differ from one batch's
            "data.train_limit=256",
            "data.batch_size=32",
            "trainer.epochs=1",
        ],
        1e-4,
    ),
    "siamese": (
        [
            "experiment=siamese",
            "data.train_size=256",
            "data.val_size=64",
            "data.test_size=64",
            "data.batch_size=32",
            *SMALL_SIAMESE,
            "model.encoder.dropout=0",  # a per-replica mask would differ
            "trainer.shard_policy=auto",
            "trainer.epochs=2",
        ],
        1e-5,
    ),
}
COMMON = ["trainer.verbose=0", "trainer.steps_per_execution=1"]


def digest(log_text):
    found = re.findall(r"final weights digest: (\w+)", log_text)
    assert len(found) == 1, log_text[-2000:]
    return found[0]


def launch(overrides, run_dir, pythonpath=None, timeout=240, env=None):
    """`python -m tapefit.launch --workers 2 --timeout S` with `overrides` into `run_dir` (its
    workers forked from a warm interpreter: tests/forked_launch.py)."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    launcher = [sys.executable, str(FORKED_LAUNCH), "--workers", "2", "--timeout", str(timeout)]
    return processes.run(
        [*launcher, "--", *overrides, f"hydra.run.dir={run_dir}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="session")
def two_workers(tmp_path_factory):
    """model kind -> the run directory of its two-worker run, launched once a session."""

    def launched(model_kind):
        def launch_into(folder):
            run_dir = folder / "two"
            result = launch([*CASES[model_kind][0], *COMMON], run_dir)
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
            return run_dir

        return shared_once(tmp_path_factory, f"two_workers-{model_kind}", launch_into)

    return launched


@pytest.mark.parametrize("model_kind", sorted(CASES))
def test_two_workers_on_loopback_train_like_one_process(model_kind, compose, tmp_path, two_workers):
    run_dir = two_workers(model_kind)
    kind_overrides, atol = CASES[model_kind]
    overrides = [*kind_overrides, *COMMON]
    # Only the chief (worker 0) writes the run directory's results; worker 1 trained in a
    # temporary directory that is gone, and left only its log.
    for name in ("metrics.json", "model.keras", "curves.png", "history.json", "status.json"):
        assert (run_dir / name).is_file(), name
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    chief_log = (run_dir / "tapefit.log").read_text()
    worker_log = (run_dir / "worker1.log").read_text()
    scratch = re.search(r"run directory: (\S+)", worker_log).group(1)
    assert "tapefit-worker-" in scratch and not os.path.exists(scratch)
    assert str(run_dir) not in worker_log.split("run directory:")[1].splitlines()[0]
    assert digest(chief_log) == digest(worker_log)  # both workers end with identical weights
    # One process on the same global batches in the same order reaches the same weights.
    single = run(compose([*overrides, "trainer.strategy=default"]), tmp_path / "one")
    two = json.loads((run_dir / "metrics.json").read_text())
    assert two["samples"] == single["samples"]
    assert_same_run(run_dir, tmp_path / "one", atol)


def assert_same_run(run_dir, expected_dir, atol, keys=("loss",)):
    """Weights within `atol` and History's `keys` within 1e-5 of `expected_dir`'s run."""
    weights = keras.models.load_model(run_dir / "model.keras").get_weights()
    expected = keras.models.load_model(expected_dir / "model.keras").get_weights()
    assert len(weights) == len(expected)
    for actual, wanted in zip(weights, expected, strict=True):
        np.testing.assert_allclose(actual, wanted, atol=atol, rtol=0)
    history = json.loads((run_dir / "history.json").read_text())
    wanted = json.loads((expected_dir / "history.json").read_text())
    assert sorted(history) == sorted(wanted)
    for key in keys:
        assert history[key] == pytest.approx(wanted[key], abs=1e-5)


def history_keys(run_dir):
    return json.loads((run_dir / "history.json").read_text()).keys()


KILL_WORKER = """
import json, os, signal
from pathlib import Path
import keras

class KillWorker(keras.callbacks.Callback):
    # SIGKILL worker `worker` at the end of optimizer step `step`, once (`once_file` marks it).
    def __init__(self, step, worker, once_file):
        super().__init__()
        self.step, self.worker, self.once_file = step, worker, Path(once_file)
    def on_train_batch_end(self, batch, logs=None):
        index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
        at = int(self.model.optimizer.iterations.numpy()) == self.step
        if index == self.worker and at and not self.once_file.exists():
            self.once_file.write_text("")
            os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tuners", "0", "--", "tune=random"], "--tuners must be at least 1"),
        (["--tuners", "2", "--", "trainer.epochs=1"], "--tuners runs a search"),
        (["--workers", "1", "--", "trainer.epochs=1"], "--workers must be at least 2"),
        (["--workers", "2", "--", "tune=random"], "--workers trains one model"),
        (["--", "trainer.epochs=1"], "one of the arguments --workers --tuners is required"),
    ],
)
def test_the_launcher_refuses_bad_arguments_before_starting_anything(argv, message, capsys):
    from tapefit.launch import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


class Ended:
    """A process that has ended with `returncode` (what `Group.wait` reads of a Popen)."""

    def __init__(self, returncode):
        self.returncode = returncode

    def poll(self):
        return self.returncode


@pytest.mark.parametrize(
    ("codes", "reported", "named"),
    [
        (
            {"worker0": 2, "worker1": -signal.SIGKILL},
            128 + signal.SIGKILL,
            "worker1 exited with -9",
        ),  # the kill, not its echo
        ({"worker0": 0, "worker1": 3}, 3, "worker1 exited with 3"),
        ({"worker0": 1, "worker1": 2}, 1, "worker0 exited with 1"),  # no signal: first started
        ({"worker0": 0, "worker1": 0}, 0, None),
    ],
)
def test_the_launcher_reports_the_cause_when_processes_end_together(codes, reported, named, capsys):
    from tapefit.launch import Group

    group = Group.__new__(Group)  # the processes already ended: nothing to start
    group.processes = {name: Ended(code) for name, code in codes.items()}
    group.pumps, group.signalled = [], None
    assert group.wait(timeout=1) == reported
    out = capsys.readouterr().out
    if named is None:
        assert out == ""
    else:  # named as when a poll sees the failure first
        assert out == f"tapefit.launch: {named}; the others had ended\n"


def test_the_launcher_adds_what_multi_worker_needs_unless_given():
    from tapefit.launch import multi_worker_overrides, worker_roles

    assert multi_worker_overrides(["trainer.epochs=1"]) == [
        "trainer.epochs=1",
        "trainer.strategy=multi_worker",
        "trainer.steps_per_execution=1",
    ]
    given = ["trainer.strategy=multi_worker", "trainer.steps_per_execution=1"]
    assert multi_worker_overrides(given) == given
    roles = worker_roles(3, "127.0.0.1")
    configs = [json.loads(role.env["TF_CONFIG"]) for role in roles]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    addresses = configs[0]["cluster"]["worker"]
    assert len(set(addresses)) == 3 and all(c["cluster"]["worker"] == addresses for c in configs)
    assert roles[0].overrides == [] and "hydra.job.name=worker1" in roles[1].overrides


@pytest.mark.parametrize(("name", "nodes"), [("slurm", 1), ("slurm_multi_worker", 2)])
def test_the_slurm_launcher_configs_compose_with_submitits_plugin(name, nodes):
    """The `slurm` extra's plugin takes conf/hydra/launcher/ (submitting needs a cluster)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tapefit.config.schemas import config_dir
    from tapefit.runner.composition import register_schemas

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", [f"hydra/launcher={name}"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert launcher.nodes == nodes and launcher.tasks_per_node == 1 and launcher.gpus_per_node == 1


def test_with_shard_policy_file_each_worker_streams_its_own_files(tmp_path):
    """Four pair shards of uneven length (200, 200, 200, 100 rows), two workers: each reads
    two of them, disjoint, every row once; both end with the same weights."""
    shards = tmp_path / "shards"
    shards.mkdir()
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]

    def rows(count):
        return [
            f"{' '.join(rng.choice(words, 4))}\t{' '.join(rng.choice(words, 4))}\t"
            f"{rng.integers(0, 6)}\n"
            for _ in range(count)
        ]

    for index, count in enumerate((200, 200, 200, 100)):
        (shards / f"part-{index}.tsv").write_text("text1\ttext2\tlabel\n" + "".join(rows(count)))
    (tmp_path / "dev.tsv").write_text("text1\ttext2\tlabel\n" + "".join(rows(60)))
    run_dir = tmp_path / "run"
    overrides = [
        "experiment=siamese",
        "data=pairs_file",
        f"data.train_path={shards / '*.tsv'}",
        f"data.validation_path={tmp_path / 'dev.tsv'}",
        "data.stream=true",
        "data.batch_size=20",
        "data.vocabulary_pairs=100",
        *SMALL_SIAMESE,
        "trainer.shard_policy=file",
        "trainer.epochs=2",
        *COMMON,
    ]
    result = launch(overrides, run_dir)
    assert result.returncode == 0, result.stdout[-3000:]
    logs = [(run_dir / name).read_text() for name in ("tapefit.log", "worker1.log")]
    files = [re.search(r"reads 2 training files: (.*)", log).group(1) for log in logs]
    assert files[0].count("part-0.tsv") + files[0].count("part-2.tsv") == 2
    assert files[1].count("part-1.tsv") + files[1].count("part-3.tsv") == 2
    read = [int(re.search(r"this worker read (\d+) training rows", log).group(1)) for log in logs]
    assert read == [400, 300]
    assert digest(logs[0]) == digest(logs[1])
    assert json.loads((run_dir / "metrics.json").read_text())["train_rows_read"] == 400


STOP_LAUNCHER = """
import os, signal, time
from pathlib import Path
import keras

class StopLauncher(keras.callbacks.Callback):
    # Worker 1 sends the launcher (its parent) SIGTERM at the end of optimizer step `step`,
    # once (`once_file` marks it), as a user's kill or a scheduler would. With SLOW_STEPS_S in
    # the environment every step takes that much longer, so a --timeout lands in training.
    def __init__(self, step, once_file):
        super().__init__()
        self.step, self.once_file = step, Path(once_file)
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(float(os.environ.get("SLOW_STEPS_S", "0")))
        index = int(os.environ["TF_CONFIG"].split('"index": ')[1][0])
        at = int(self.model.optimizer.iterations.numpy()) == self.step
        if index == 1 and at and not self.once_file.exists():
            self.once_file.write_text("")
            os.kill(os.getppid(), signal.SIGTERM)
"""


def test_sigterm_the_timeout_and_a_killed_worker_stop_both_workers_resumably(two_workers, tmp_path):
    """One two-worker run stopped three ways and resumed after each (a launch per stop; what
    each stop checks does not depend on the stops before it):

    1. SIGTERM to `python -m tapefit.launch` at step 1 reaches both workers, which stop after
       the same step with a checkpoint (exit 143, status interrupted);
    2. the resumed launch, given `--timeout 10` and slowed down, is stopped the same way and
       exits 124;
    3. in the next resumed launch worker 1 is SIGKILLed after step 11 (epoch 2, 3 steps in;
       checkpoints every 3 steps): the chief fails in one line, the launcher ends with 137;
    4. the last launch restores the chief's step-9 checkpoint on both workers and ends like
       the uninterrupted two-worker run, bit for bit."""
    (tmp_path / "stop_launcher.py").write_text(STOP_LAUNCHER)
    (tmp_path / "kill_worker.py").write_text(KILL_WORKER)
    run_dir = tmp_path / "run"
    overrides = [
        *CASES["mlp"][0],
        *COMMON,
        "trainer.checkpoint_every_steps=3",
        "+callbacks.extra.stop._target_=stop_launcher.StopLauncher",
        "+callbacks.extra.stop.step=1",
        f"+callbacks.extra.stop.once_file={tmp_path / 'signalled'}",
        "+callbacks.extra.kill._target_=kill_worker.KillWorker",
        "+callbacks.extra.kill.step=11",
        "+callbacks.extra.kill.worker=1",
        f"+callbacks.extra.kill.once_file={tmp_path / 'killed'}",
    ]
    stopped = launch(overrides, run_dir, pythonpath=tmp_path)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stdout[-3000:]
    for worker in ("worker0", "worker1"):
        assert f"[{worker}] tapefit: interrupted by SIGTERM after the current step" in (
            stopped.stdout
        )
    state = json.loads((run_dir / "status.json").read_text())
    assert state["state"] == "interrupted" and state["signal"] == signal.SIGTERM
    assert not (run_dir / "metrics.json").exists()
    [marker] = [p.stem for p in (run_dir / "resume").glob("epoch-0000-step-*.json")]
    steps = int(marker.split("-")[-1])
    assert 1 <= steps < 4  # after the same step on both workers, early in epoch 1

    timed_out = launch(
        [*overrides, "resume=true"],
        run_dir,
        pythonpath=tmp_path,
        timeout=10,
        env={"SLOW_STEPS_S": "3"},
    )
    assert timed_out.returncode == 124, timed_out.stdout[-3000:]
    assert "still running after --timeout 10 s" in timed_out.stderr
    assert "killed" not in timed_out.stderr  # each stopped by itself, within the grace
    assert json.loads((run_dir / "status.json").read_text())["state"] == "interrupted"

    killed = launch([*overrides, "resume=true"], run_dir, pythonpath=tmp_path)
    assert killed.returncode == 128 + signal.SIGKILL, killed.stdout[-3000:]
    # the kill is named, whether a poll saw it first or the chief's failure ended in the same one
    assert "tapefit.launch: worker1 exited with -9; " in killed.stdout
    state = json.loads((run_dir / "status.json").read_text())
    assert state["state"] == "failed" and "\n" not in state["error"]
    assert state["error"].startswith("worker 1 of the cluster stopped during a step")
    assert not (run_dir / "metrics.json").exists()
    markers = sorted(p.name for p in (run_dir / "resume").glob("*.json"))
    assert markers == ["epoch-0001-step-00001.json", "epoch-0001.json"]

    resumed = launch([*overrides, "resume=true"], run_dir, pythonpath=tmp_path)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    for log in ("tapefit.log", "worker1.log"):
        assert "after epoch 1 and 1 steps" in (run_dir / log).read_text()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    baseline = two_workers("mlp")
    assert_same_run(run_dir, baseline, 0, keys=sorted(history_keys(baseline)))
    assert digest((run_dir / "tapefit.log").read_text()) == digest(
        (run_dir / "worker1.log").read_text()
    )


IGNORES_SIGTERM = """
import os, signal, sys, time
if os.environ["ROLE"] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(60)
"""


def test_a_process_that_ignores_the_signal_is_killed_after_the_grace_and_named(capsys):
    from tapefit.launch import Group, Role

    roles = [Role("worker0", {"ROLE": "polite"}), Role("worker1", {"ROLE": "stubborn"})]
    group = Group(roles, [], command=(sys.executable, "-c", IGNORES_SIGTERM))
    try:
        assert group.wait(timeout=1, grace=2) == 124
    finally:
        group.signal_all(signal.SIGKILL)
    err = capsys.readouterr().err
    assert "still running after --timeout 1 s" in err
    assert "tapefit.launch: worker1 still running 2 s after SIGTERM; killed" in err
    assert group.processes["worker0"].returncode == -signal.SIGTERM
    assert group.processes["worker1"].returncode == -signal.SIGKILL
