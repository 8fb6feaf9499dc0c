"""`run` and `Popen` for the tests' `python ...` commands, forked from a pre-warmed interpreter.

Drop-in for the subset of `subprocess.run`/`subprocess.Popen` the tests use. A command that
starts with `sys.executable` and runs `-m MODULE`, `-c CODE` or a script is forked from one
`tests/zygote.py` server per test process (TensorFlow and tapefit imported once); anything else,
an environment that differs in an import-time variable, or `TAPEFIT_TEST_FORK=0` in the
environment, starts a real interpreter through `subprocess`. Either way the test gets a real
process: its own pid, exit status (-signum when a signal ended it), signals and files.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PIPE, DEVNULL, STDOUT = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT
ZYGOTE = Path(__file__).with_name("zygote.py")
# Variables Python, TensorFlow or Keras read when they are imported: a request whose value
# differs from the server's cannot be forked from it.
# TAPEFIT_TESTS_GRAPPLER: the graph optimisation the server set up for its forks (conftest.py).
IMPORT_TIME = (
    "TF_",
    "KERAS_",
    "CUDA_",
    "XLA_",
    "PYTHON",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "TAPEFIT_TESTS_GRAPPLER",
)
RUN_TIME = {"TF_CONFIG", "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER"}
_SUPPORTED = {"cwd", "env", "stdout", "stderr", "capture_output", "text", "timeout", "check"}


def _import_time(env: dict[str, str]) -> dict[str, str]:
    return {
        key: value
        for key, value in env.items()
        if key.startswith(IMPORT_TIME) and key not in RUN_TIME
    }


class _Zygote:
    """The forking server of this test process, started on first use."""

    def __init__(self) -> None:
        env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # as tests/zygote.py's preload sets it
        self.server = subprocess.Popen(
            [sys.executable, str(ZYGOTE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ZYGOTE.parent.parent,
            env=env,
        )
        self.env = env
        self.pending = b""
        self.exits: dict[int, int] = {}
        self.answer("ready", timeout=300)

    def answer(self, kind: str, pid: int | None = None, timeout: float | None = None) -> dict:
        """Read answers until one of `kind` (for `pid`) arrives; exits are kept as they come."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                message = json.loads(line)
                if "exited" in message:
                    self.exits[message["exited"]] = message["code"]
                if kind in message and (pid is None or message[kind] == pid):
                    return message
            if kind == "exited" and pid in self.exits:
                return {"exited": pid, "code": self.exits[pid]}
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError
            readable, _, _ = select.select([self.server.stdout], [], [], left)
            if readable:
                chunk = os.read(self.server.stdout.fileno(), 65536)
                if not chunk:
                    raise RuntimeError("the test's forking server ended")
                self.pending += chunk

    def accepts(self, env: dict[str, str]) -> bool:
        return self.server.poll() is None and _import_time(env) == _import_time(self.env)

    def start(self, argv: list[str], cwd: str, env: dict, stdout: str, stderr: str) -> int:
        request = {"argv": argv, "cwd": cwd, "env": env, "stdout": stdout, "stderr": stderr}
        self.server.stdin.write(json.dumps(request).encode() + b"\n")
        self.server.stdin.flush()
        return self.answer("started", timeout=60)["started"]

    def close(self) -> None:
        self.server.stdin.close()
        try:
            self.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.server.kill()


_zygote: _Zygote | None = None


def _server() -> _Zygote:
    global _zygote
    if _zygote is None or _zygote.server.poll() is not None:
        _zygote = _Zygote()
        atexit.register(_zygote.close)
    return _zygote


def server_env() -> dict[str, str]:
    """A copy of the environment the forking server imported under (a request with it forks)."""
    return dict(_server().env)


def _forkable(command, kwargs: dict) -> bool:
    if os.environ.get("TAPEFIT_TEST_FORK", "1") == "0" or not set(kwargs) <= _SUPPORTED:
        return False
    words = [str(word) for word in command] if isinstance(command, list | tuple) else []
    if len(words) < 2 or words[0] != sys.executable:
        return False
    if words[1] in ("-m", "-c"):
        return len(words) >= 3
    return not words[1].startswith("-")


def _subprocess_popen(command, kwargs: dict) -> subprocess.Popen:
    kwargs = dict(kwargs)
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = PIPE
    return subprocess.Popen(command, **kwargs)


class Popen:
    """A forked `python ...` with the Popen calls the tests use (`pid`, `poll`, `wait`,
    `send_signal`, `terminate`, `kill`, `communicate`, `returncode`, `args`)."""

    def __init__(self, command, **kwargs) -> None:
        self.args = command
        self.returncode: int | None = None
        self._real = None if _forkable(command, kwargs) else _subprocess_popen(command, kwargs)
        if self._real is not None:
            self.pid = self._real.pid
            return
        env = {str(k): str(v) for k, v in (kwargs.get("env") or os.environ).items()}
        server = _server()
        if not server.accepts(env):
            if os.environ.get("TAPEFIT_TEST_FORK_LOG"):
                theirs, ours = _import_time(env), _import_time(server.env)
                differ = sorted(k for k in {*theirs, *ours} if theirs.get(k) != ours.get(k))
                with open(os.environ["TAPEFIT_TEST_FORK_LOG"], "a") as log:
                    log.write(f"real interpreter: {differ} differ for {command[:4]}\n")
            self._real = _subprocess_popen(command, kwargs)
            self.pid = self._real.pid
            return
        self._text = kwargs.get("text", False)
        capture = kwargs.get("capture_output", False)
        self._scratch = tempfile.mkdtemp(prefix="forked-")
        self._paths = {}
        for name in ("stdout", "stderr"):
            wanted = PIPE if capture else kwargs.get(name)
            if wanted == PIPE:
                self._paths[name] = os.path.join(self._scratch, name)
            elif wanted is None:  # inherited: the test's own output, as subprocess would
                self._paths[name] = f"/proc/{os.getpid()}/fd/{1 if name == 'stdout' else 2}"
            elif wanted == STDOUT and name == "stderr":
                self._paths[name] = self._paths["stdout"]
            elif hasattr(wanted, "fileno"):  # an open file: the child appends to it
                self._paths[name] = f"/proc/{os.getpid()}/fd/{wanted.fileno()}"
            else:
                self._paths[name] = None  # DEVNULL
        words = [str(word) for word in command]
        cwd = str(kwargs.get("cwd") or os.getcwd())
        self._server = server
        self.pid = server.start(words[1:], cwd, env, self._paths["stdout"], self._paths["stderr"])

    def poll(self) -> int | None:
        if self._real is not None:
            self.returncode = self._real.poll()
        elif self.returncode is None:
            with contextlib.suppress(TimeoutError):
                self.returncode = self._server.answer("exited", self.pid, timeout=0)["code"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self._real is not None:
            self.returncode = self._real.wait(timeout)
            return self.returncode
        if self.returncode is None:
            try:
                self.returncode = self._server.answer("exited", self.pid, timeout)["code"]
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self._real is not None:
            self._real.send_signal(signum)
        elif self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read(self, name: str):
        path = self._paths.get(name)
        if path is None or not path.startswith(self._scratch):
            return None
        if name == "stderr" and path == self._paths.get("stdout"):
            return None
        data = Path(path).read_bytes()
        return data.decode(errors="replace") if self._text else data

    def communicate(self, timeout: float | None = None):
        if self._real is not None:
            return self._real.communicate(timeout=timeout)
        self.wait(timeout)
        outputs = self._read("stdout"), self._read("stderr")
        shutil.rmtree(self._scratch, ignore_errors=True)
        return outputs


def run(command, timeout: float | None = None, check: bool = False, **kwargs):
    """`subprocess.run(command, ...)`, forked from the warm interpreter where it can be."""
    process = Popen(command, **kwargs)
    if process._real is not None:
        try:
            stdout, stderr = process._real.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process._real.kill()
            process._real.wait()
            raise
        returncode = process._real.returncode
    else:
        try:
            stdout, stderr = process.communicate(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        returncode = process.returncode
    result = subprocess.CompletedProcess(command, returncode, stdout, stderr)
    if check:
        result.check_returncode()
    return result
