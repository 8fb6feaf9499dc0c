"""`python -m tapefit.launch`, with the workers and tuners forked from this warm interpreter.

Run as a script in place of `-m tapefit.launch` (same arguments): the launcher is tapefit's own
(`tapefit.launch.main`: roles, TF_CONFIG, ports, output relay, signal forwarding, exit codes);
only the process it starts per role is a fork of this interpreter, which `tests/processes.py`
already forked from a server with TensorFlow imported, instead of a fresh `python -m tapefit`
that imports TensorFlow again (about 6 s of CPU each, two or three per launch). Each child is
still a real process in its own session, with its own pid, environment, output pipe, signals and
exit status, and runs `-m tapefit` through `tests/zygote.py`'s `run_child`, as every other
forked test process does.

With `TAPEFIT_TEST_FORKED_PIDS=FILE` in the environment, each child's pid is appended to FILE, so
a test can check that no process outlives the launcher. `TAPEFIT_TEST_FORK=0` starts real
interpreters, as it does in `tests/processes.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import zygote


class ForkedPopen:
    """The part of `subprocess.Popen` that `tapefit.launch.Group` uses, by `os.fork`."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        stdin: int | None = None,
        text: bool = False,
        start_new_session: bool = False,
        cwd: str | None = None,
    ) -> None:
        if args[0] != sys.executable or stdout != subprocess.PIPE or stdin != subprocess.DEVNULL:
            raise ValueError(f"ForkedPopen runs `{sys.executable} ...` into a pipe: {args}")
        from tensorflow.python.eager import context

        if context.context()._context_handle is not None:
            raise RuntimeError("the launcher started TensorFlow's runtime: forks would share it")
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become(
                args, env, cwd, write, merged=stderr == subprocess.STDOUT, session=start_new_session
            )
        os.close(write)
        self.args, self.pid, self.returncode = args, pid, None
        self.stdout = os.fdopen(read, "r" if text else "rb")
        record = os.environ.get("TAPEFIT_TEST_FORKED_PIDS")
        if record:
            with open(record, "a") as pids:
                pids.write(f"{pid}\n")

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode


def _become(args, env, cwd, write, merged, session) -> None:
    """In the child: run `args[1:]` as `tests/zygote.py` runs a request, then end the process
    as its children end (`zygote.end_child`), without returning into the launcher's frames."""
    code = 1
    try:
        if session:
            os.setsid()
        output = f"/proc/self/fd/{write}"
        request = {
            "argv": list(args[1:]),
            "cwd": cwd or os.getcwd(),
            "env": dict(os.environ if env is None else env),
            "stdout": output,
            "stderr": output if merged else None,
        }
        code = zygote.run_child(request)
    finally:
        zygote.end_child(code)


if __name__ == "__main__":
    import tapefit.launch

    if os.environ.get("TAPEFIT_TEST_FORK", "1") != "0":  # 0: real interpreters everywhere
        subprocess.Popen = ForkedPopen  # only tapefit.launch starts processes in this one
    sys.exit(tapefit.launch.main())
