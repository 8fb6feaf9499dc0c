"""Test helpers shared by several test modules."""

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from tests import processes

REPO = Path(__file__).resolve().parents[1]
# Run in place of `-m tapefit.launch` (same arguments): tapefit's own launcher, its workers and
# tuners forked from a warm interpreter (tests/forked_launch.py says how).
FORKED_LAUNCH = REPO / "tests" / "forked_launch.py"
T = TypeVar("T")

# The digits CNN cut to one convolution block and a narrow dense layer: the same kinds of layers
# (Conv2D, BatchNorm, pooling, Dropout) and state, at about half the tutorial network's tracing
# cost. For tests whose subject is the run (stops, resumes, workers), not the network's size.
SMALL_CNN = ("model.conv_blocks=[[8,1]]", "model.dense_units=32")
# The Siamese model's encoder as a bag of embeddings (mean-pooled, no RNN): the same pair data,
# loss, dropout and evaluation at about half the LSTM's cost, where the encoder is not the
# subject.
SMALL_SIAMESE = ("model.encoder.rnn=none", "model.encoder.pooling=mean")


def run_in(
    folder: Path,
    words: Sequence[str],
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """Run the command `words` + `extra` (`python ...`, or a script installed beside it) in
    `folder` (a user's project: its files importable from the cwd) in a fresh process, with
    TensorFlow's backend and `env` added to the environment, bounded in time."""
    environment = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    environment.update(env or {})
    return processes.run(
        [*words, *extra],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(
    *args: str, timeout: float = 300, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run `python -m tapefit ARGS` in a fresh process in `cwd` (a user's project reads its own
    files with `--config-dir conf`), bounded in time."""
    return run_in(cwd, [sys.executable, "-m", "tapefit"], *args, env=env, timeout=timeout)


# The child of `run_cli_batch`: the module's real entry point (for `tapefit`, the Hydra one in
# tapefit/__main__.py), called once per argument list with sys.argv, stdout and stderr of its
# own; each result is appended as one JSON line as soon as the invocation ends, so a crash loses
# only the invocations after it.
_BATCH_CHILD = """
import contextlib, importlib, io, json, os, sys, traceback

results, invocations = sys.argv[1], json.loads(sys.argv[2])

for module, args, env in invocations:
    entry = importlib.import_module("tapefit.__main__" if module == "tapefit" else module)
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [module, *args]
    saved = dict(os.environ)
    os.environ.update(env)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            returned = entry.cli() if module == "tapefit" else entry.main()
            # `python -m tapefit` ignores main's value; the others end with sys.exit(main())
            if module != "tapefit":
                sys.exit(returned)
            code = 0
        except SystemExit as stop:  # what the interpreter would make of it
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
    os.environ.clear()
    os.environ.update(saved)
    with open(results, "a") as file:
        file.write(json.dumps([code, out.getvalue(), err.getvalue()]) + "\\n")
"""


def run_cli_batch(
    invocations: list[list[str] | tuple[str, list[str]] | tuple[str, list[str], dict]],
    cwd: Path = REPO,
    timeout: float = 300,
) -> list[subprocess.CompletedProcess]:
    """`python -m tapefit ARGS` for each ARGS in `invocations` (`python -m MODULE ARGS` for a
    (MODULE, ARGS) pair, e.g. ("tapefit.evaluate", ["run=..."]); a third item, a dict, is set in
    os.environ for that invocation only: run-time variables such as TF_CONFIG), one after another
    in ONE fresh process (one TensorFlow start-up for all): each calls the module's real entry point
    (`main()`; for tapefit the Hydra one) with its own sys.argv and gets its own stdout, stderr
    and exit code (SystemExit's code, as the interpreter would turn it into one). For
    independent invocations that train nothing, such as bad input refused before training; a
    process of its own still tests the real exit status (see `run_cli`). Text that TensorFlow's
    C++ side writes to file descriptor 2 is not in any invocation's stderr."""
    import json
    import tempfile

    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    pairs = [item if isinstance(item, tuple) else ("tapefit", item) for item in invocations]
    pairs = [(*pair, {}) if len(pair) == 2 else pair for pair in pairs]
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.jsonl"
        child = processes.run(
            [sys.executable, "-c", _BATCH_CHILD, str(results), json.dumps(pairs)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = results.read_text().splitlines() if results.exists() else []
    done = [
        subprocess.CompletedProcess(args, *json.loads(line))
        for args, line in zip(invocations, lines, strict=False)
    ]
    lost = (
        f"the batch process ended with {child.returncode} after {len(done)} of "
        f"{len(invocations)} invocations: {child.stderr[-3000:]}"
    )
    # An invocation the process never finished reads as a failure that says why.
    return done + [
        subprocess.CompletedProcess(args, -1, "", lost) for args in invocations[len(done) :]
    ]


def shared_once(tmp_path_factory, name: str, build: Callable[[Path], T]) -> T:
    """`build(folder)` once per pytest session, whichever xdist worker asks first; the value
    it returns (pickled: paths, dicts, finished processes) is what every later caller gets.

    A session fixture alone is built once per worker, and with `--dist load` the tests that
    share a trained run land on both workers: the run was trained twice. Here the first
    worker builds under a lock in the folder both workers share, and the other waits for it
    and reads the value back. A build that fails leaves nothing behind, so the next caller
    builds again (and fails the same way, in its own test).
    """
    import fcntl
    import pickle
    import shutil

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, value = shared / f"shared-{name}", shared / f"shared-{name}.pickle"
    with open(shared / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if value.exists():
            return pickle.loads(value.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            built = build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        value.write_bytes(pickle.dumps(built))
        return built


class _SharedFolder:
    """What a shared fixture sees as `tmp_path_factory`: folders made inside its own."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str, numbered: bool = True) -> Path:
        path, number = self.root / name, 0
        while path.exists():
            number += 1
            path = self.root / f"{name}{number}"
        path.mkdir(parents=True)
        return path

    def getbasetemp(self) -> Path:
        return self.root


def built_once_per_session(function: Callable[..., T]) -> Callable[..., T]:
    """Decorate a `scope="session"` fixture that takes `tmp_path_factory`: its body runs once
    a pytest session, not once per xdist worker (`shared_once`), its `mktemp` folders made in
    the shared folder. Its value must pickle (paths, dicts, finished processes)."""
    import functools

    @functools.wraps(function)
    def fixture(**kwargs):
        def build(folder: Path) -> T:
            return function(**{**kwargs, "tmp_path_factory": _SharedFolder(folder)})

        name = f"{function.__module__}.{function.__qualname__}"
        return shared_once(kwargs["tmp_path_factory"], name, build)

    return fixture


def scalar_tags(log_dir: Path) -> dict[str, list[float]]:
    """Every scalar written to the TensorBoard event files in `log_dir`, tag -> values in order."""
    import tensorflow as tf

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


class TensorBoardServer:
    """A real `tensorboard` on 127.0.0.1 over `logdir`, for tests that read back what the
    dashboard will show through its HTTP API; stopped on exit. Its process is forked from the
    tests' warm interpreter (`tests.processes`): ready in about 1 s where a fresh interpreter
    took 5.5 s and another 1.3 s to stop."""

    def __init__(self, logdir: Path) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}/data/plugin"
        self.process = processes.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                f"--logdir={logdir}",
                "--host=127.0.0.1",
                f"--port={port}",
                "--load_fast=false",
                "--reload_interval=1",
            ],
            stdout=processes.DEVNULL,
            stderr=processes.DEVNULL,
        )

    def __enter__(self) -> "TensorBoardServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)

    def request(self, route: str, body: dict | None = None) -> dict:
        """GET `route` (or POST `body` as JSON) below /data/plugin; the decoded JSON reply."""
        import json
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "X-XSRF-Protected": "1"}
        request = urllib.request.Request(f"{self.base}/{route}", data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def wait_for(self, route: str, ready, body: dict | None = None, timeout: float = 90):
        """Poll `route` until `ready(reply)` holds (TensorBoard loads event files lazily)."""
        import time

        deadline, reply = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                reply = self.request(route, body)
                if ready(reply):
                    return reply
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"TensorBoard never served {route} as expected; last: {reply}")

    def hparams_sessions(self, expected: int) -> tuple[dict, list[dict]]:
        """(experiment, session groups) from the HParams plugin once `expected` sessions are
        there: what the HParams dashboard's table and parallel coordinates draw."""
        experiment = self.wait_for(
            "hparams/experiment", lambda r: r.get("hparamInfos"), {"experimentName": ""}
        )
        request = {
            "experimentName": "",
            "allowedStatuses": [
                "STATUS_UNKNOWN",
                "STATUS_SUCCESS",
                "STATUS_FAILURE",
                "STATUS_RUNNING",
            ],
            "colParams": [
                *({"hparam": h["name"]} for h in experiment["hparamInfos"]),
                *({"metric": m["name"]} for m in experiment.get("metricInfos", [])),
            ],
            "startIndex": 0,
            "sliceSize": 1000,
        }
        groups = self.wait_for(
            "hparams/session_groups",
            lambda r: len(r.get("sessionGroups", [])) >= expected,
            request,
        )
        return experiment, groups["sessionGroups"]


def write_pairs_tsv(path, texts_a, texts_b, labels):
    """A pair file in the `left`, `right`, `score` columns `pair_file_overrides` names."""
    lines = ["left\tright\tscore"] + [
        f"{a}\t{b}\t{y:.3f}" for a, b, y in zip(texts_a, texts_b, labels, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def pair_file_overrides(folder) -> list[str]:
    """The Siamese experiment on `folder`'s train.tsv and test.tsv (`write_pairs_tsv`)."""
    return [
        "experiment=siamese",
        "data=pairs_file",
        f"data.train_path={folder / 'train.tsv'}",
        f"data.test_path={folder / 'test.tsv'}",
        "data.text1_column=left",
        "data.text2_column=right",
        "data.label_column=score",
    ]


def pair_lines(count: int, start: int = 0, label: Callable[[int], object] = lambda i: i % 6) -> str:
    """Rows `start` to `count` of a headerless comma-separated pair file: two distinct texts
    and a label (`label(i)`, graded 0-5 by default)."""
    return "".join(f"alpha {i} beta,gamma {i} delta,{label(i)}\n" for i in range(start, count))


def live_graphs() -> int:
    """How many TensorFlow function graphs are alive, after a garbage collection (a run that
    keeps its traced graphs alive grows this count)."""
    import gc

    from tensorflow.python.framework.func_graph import FuncGraph

    gc.collect()
    return sum(isinstance(o, FuncGraph) for o in gc.get_objects())


def unit(values):
    """`values` scaled to unit L2 norm along the last axis (embeddings, as the models give)."""
    import numpy as np

    return values / np.linalg.norm(values, axis=-1, keepdims=True)


def run_status(run_dir: Path) -> dict:
    """The run directory's `status.json`."""
    import json

    return json.loads((Path(run_dir) / "status.json").read_text())


def small_dense_model(learning_rate: float = 0.001, seed: int | None = None):
    """A compiled `Dense(2)` over 3 inputs (Adam, MSE): the checkpoint tests' model; `seed`
    sets Keras' seed first (the same initial weights each time)."""
    import keras

    if seed is not None:
        keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.Adam(learning_rate), "mse")
    return model
