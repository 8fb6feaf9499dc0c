"""A pre-warmed Python that forks a fresh process per request: the tests' `python ...` runs.

Every `python -m tapefit ...` a test starts pays about 6 s of CPU before its first line of
tapefit runs (TensorFlow, Keras, Hydra, keras-tuner, matplotlib imports): with over a hundred
such processes in the suite, that was the largest single cost of `make test`. This server
imports those modules once, without running any TensorFlow op (so no device, thread pool or
logical-device setting is fixed yet), then forks a child per request. A child is a real process
with its own pid, exit status, signals, working directory, environment and output files; it
runs the request exactly as the interpreter would (`-m MODULE`, `-c CODE` or a script, through
`runpy`), and ends as the interpreter does (threads joined, atexit handlers, flushed output),
without tearing down every module (`end_child`).

What a fork cannot give is an import under a different environment: `tests/processes.py` sends
a request here only when every import-time variable (`TF_*`, `KERAS_*`, `CUDA_*`, `XLA_*`,
`PYTHON*` but `PYTHONPATH`/`PYTHONUNBUFFERED`) equals this server's, and starts a real
interpreter otherwise.

Protocol (JSON lines): this server's stdin carries requests
`{"argv": [...], "cwd": ..., "env": {...}, "stdout": path|null, "stderr": path|null}`;
its stdout answers `{"ready": pid}` once, then `{"started": pid}` per request and
`{"exited": pid, "code": returncode}` when a child ends (a signal as -signum, as Popen).
"""

import contextlib
import gc
import json
import os
import select
import sys

PRELOAD = (
    "tapefit.__main__",
    "tapefit.runner.train",
    "tapefit.evaluate",
    "tapefit.predict",
    # what a run imports on its way (a fork imported them anew each time: 60 ms a command)
    "tapefit.sweeps.tuning",
    "tapefit.data.loaders",
    "tapefit.data.pair_files",
    "tapefit.callbacks.tensorboard",
    "tapefit.callbacks.telemetry",
    "tensorboard.summary.v2",
    "sklearn.datasets",
    "keras_tuner",
    "keras_hub",
    "matplotlib.pyplot",
    "sklearn.metrics",
    "optuna",
    "mlflow",
)


def preload() -> None:
    """Import what the children would import first, and check TensorFlow is still unstarted."""
    import importlib

    from tapefit.backend import set_command_defaults

    set_command_defaults()  # what `python -m tapefit` sets before TensorFlow is imported
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    warm_pure_python_caches()
    import tensorflow as tf
    from tensorflow.python.eager import context

    # the tests' graph optimisation (tests/conftest.py), inherited by every fork
    off = os.environ.get("TAPEFIT_TESTS_GRAPPLER") == "off"
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": off})

    if context.context()._context_handle is not None:
        raise RuntimeError("an import started TensorFlow's runtime: forks would share it")


def warm_pure_python_caches() -> None:
    """Do once here what every child's first run would do again without touching TensorFlow:
    Hydra's plugin discovery and config parsing (a first composition costs 0.36 s, later ones
    0.14 s) and matplotlib's font loading (a first `savefig` 0.8 s, later ones 0.1 s). Nothing
    of it is state a run reads: Hydra is cleared again, the figure closed."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hydra.core.global_hydra import GlobalHydra

    from tapefit.runner.composition import compose

    compose(["experiment=siamese"])
    GlobalHydra.instance().clear()
    figure, axis = plt.subplots()
    axis.plot([0, 1], [0, 1], "o-", label="warm")
    axis.set_title("warm")
    axis.legend()
    figure.tight_layout()
    figure.savefig(io.BytesIO(), format="png", dpi=110)
    plt.close(figure)


def exit_code(stop: SystemExit) -> int:
    """What the interpreter makes of an uncaught SystemExit."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


def open_output(path: str | None, fd: int) -> None:
    """Point file descriptor `fd` at `path` (or /dev/null)."""
    inherited = bool(path) and path.startswith("/proc/")  # the test's own output: append
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if inherited else os.O_TRUNC)
    target = os.open(path or os.devnull, flags, 0o644)
    os.dup2(target, fd)
    os.close(target)


def rebind_log_streams(inherited: dict) -> None:
    """Point the logging handlers made before the fork (TensorFlow's and absl's, bound to the
    server's `sys.stderr` at import) at the child's own streams, as in a fresh interpreter.
    Left on the server's, they broke at the child's first logging configuration: absl's handler
    closes its stream when it is no longer `sys.stderr`, and the `tensorflow` logger, which
    writes to the same object, then printed "--- Logging error ---" for each of its lines."""
    import logging

    for reference in list(logging._handlerList):
        handler = reference()
        for name, stream in inherited.items():
            if handler is not None and getattr(handler, "stream", None) is stream:
                handler.stream = getattr(sys, name)


def run_child(request: dict) -> int:
    """In the forked child: become the requested interpreter run; its exit code."""
    import io
    import runpy
    import signal
    import traceback
    import types

    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGUSR1, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.close(stdin)
    open_output(request["stdout"], 1)
    open_output(request["stderr"], 2)
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    inherited = {"stdout": sys.stdout, "stderr": sys.stderr}
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), write_through=unbuffered, line_buffering=unbuffered
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True
    )
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
    rebind_log_streams(inherited)

    argv = request["argv"]
    sys.orig_argv = [sys.executable, *argv]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base = [p for p in sys.path[1:] if p not in extra]
    try:
        try:
            if argv[0] == "-m":
                sys.argv = ["-m", *argv[2:]]
                sys.path[:] = [os.getcwd(), *extra, *base]
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            elif argv[0] == "-c":
                sys.argv = ["-c", *argv[2:]]
                sys.path[:] = ["", *extra, *base]
                main = types.ModuleType("__main__")
                sys.modules["__main__"] = main
                exec(compile(argv[1], "<string>", "exec"), main.__dict__)
            else:
                sys.argv = list(argv)
                sys.path[:] = [os.path.dirname(os.path.abspath(argv[0])), *extra, *base]
                runpy.run_path(argv[0], run_name="__main__")
            return 0
        except SystemExit as stop:
            return exit_code(stop)
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # die of SIGINT, as the interpreter does
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except BaseException:
        traceback.print_exc()
        return 1


def end_child(code: int) -> None:
    """End a child as the interpreter ends, minus tearing down the modules: wait for its
    threads, run its atexit handlers, flush its output, exit with `code`. The teardown of
    TensorFlow's and Keras' module objects took 0.26 s of every child (a bare `python -c` went
    from 0.32 s to 0.06 s), and runs no handler a program may rely on: Python does not promise
    `__del__` for what is still alive at exit. `tests/forked_launch.py` ends its workers so."""
    import atexit
    import threading

    try:
        threading._shutdown()  # what Py_FinalizeEx does first: non-daemon threads finish
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe keeps the exit code
                stream.flush()
        os._exit(code)


def serve() -> int:
    """Answer requests until stdin closes; in a child, the child's exit code."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    preload()
    gc.freeze()  # before forking: the children's collections skip the preloaded objects
    answers.write(json.dumps({"ready": os.getpid()}) + "\n")
    pending, children = b"", set()
    while True:
        readable, _, _ = select.select([requests], [], [], 0.05)
        if readable:
            chunk = requests.read(65536)
            if not chunk:
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    requests.close()
                    answers.close()
                    end_child(run_child(request))
                children.add(pid)
                answers.write(json.dumps({"started": pid}) + "\n")
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                code = os.waitstatus_to_exitcode(status)
                answers.write(json.dumps({"exited": pid, "code": code}) + "\n")


if __name__ == "__main__":
    sys.exit(serve())
