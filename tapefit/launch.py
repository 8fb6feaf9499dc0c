"""Several `python -m tapefit` processes on this machine, wired as TensorFlow and keras-tuner
expect, for trying on one machine what runs across several:

    python -m tapefit.launch --workers 2 -- OVERRIDES   # multi-worker training (TF_CONFIG)
    python -m tapefit.launch --tuners 2 -- tune=random OVERRIDES   # keras-tuner chief + tuners

Every process runs in the same run directory, its output prefixed with its role. One process
failing ends the others; so do SIGINT/SIGTERM (forwarded, so each stops after its current
step, with a checkpoint, within `--grace` seconds or are killed) and `--timeout` (the same,
then exit 124). On several machines, set the same variables by hand
(docs/how-to/distributed.md and docs/how-to/sweeps.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO

TAPEFIT = (sys.executable, "-m", "tapefit")  # what each process runs, followed by overrides
GRACE_S = 30.0  # how long a process has to stop after SIGTERM before it is killed
TIMEOUT_EXIT = 124  # like coreutils' timeout


@dataclass
class Role:
    """One process to start: its name (the output prefix) and its extra environment."""

    name: str
    env: dict[str, str]
    overrides: list[str] = field(default_factory=list)


def free_port(host: str) -> int:
    """A TCP port on `host` that nothing listens on now."""
    return free_ports(host, 1)[0]


def free_ports(host: str, count: int) -> list[int]:
    """`count` different TCP ports on `host` that nothing listens on now: each probe stays
    bound until all are chosen, so the system cannot hand the same port out twice.

    Examples:
        >>> ports = free_ports("127.0.0.1", 3)
        >>> len(set(ports)) == 3
        True
    """
    with contextlib.ExitStack() as probes:
        ports = []
        for _ in range(count):
            probe = probes.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            probe.bind((host, 0))
            ports.append(probe.getsockname()[1])
        return ports


def shared_run_dir(overrides: list[str]) -> list[str]:
    """All processes must share one run directory; Hydra's default one has the start second
    in it, so pin it to now unless the user chose one."""
    if any(o.startswith("hydra.run.dir=") for o in overrides):
        return overrides
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return [*overrides, f"hydra.run.dir=outputs/${{experiment_name}}/{stamp}"]


def tuner_roles(tuners: int, host: str, port: int) -> list[Role]:
    """keras-tuner's chief oracle plus `tuners` tuner processes that ask it for trials."""
    oracle = {"KERASTUNER_ORACLE_IP": host, "KERASTUNER_ORACLE_PORT": str(port)}
    roles = [Role("chief", {**oracle, "KERASTUNER_TUNER_ID": "chief"})]
    for index in range(tuners):
        name = f"tuner{index}"
        roles.append(Role(name, {**oracle, "KERASTUNER_TUNER_ID": name}, own_logs(name)))
    return roles


def worker_roles(workers: int, host: str) -> list[Role]:
    """`workers` tf.distribute workers, each with the `TF_CONFIG` that names the cluster (free
    ports on `host`) and its own index; worker 0 is the chief."""
    cluster = {"worker": [f"{host}:{port}" for port in free_ports(host, workers)]}
    roles = []
    for index in range(workers):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        name = f"worker{index}"
        roles.append(Role(name, {"TF_CONFIG": tf_config}, own_logs(name) if index else []))
    return roles


def multi_worker_overrides(overrides: list[str]) -> list[str]:
    """`trainer.strategy=multi_worker`, and one step per execution (Keras 3 cannot run a
    multi-worker step inside its multi-step loop), unless the user set them."""
    added = [
        default
        for default in ("trainer.strategy=multi_worker", "trainer.steps_per_execution=1")
        if not any(o.startswith(default.split("=")[0] + "=") for o in overrides)
    ]
    return [*overrides, *added]


def own_logs(name: str) -> list[str]:
    """A non-chief process logs to `<name>.log` and keeps its Hydra files in `.hydra/<name>`."""
    return [f"hydra.job.name={name}", f"hydra.output_subdir=.hydra/{name}"]


def pump(stream: IO[str], prefix: str, sink: IO[str], lock: threading.Lock) -> None:
    """Copy a child's output to ours line by line, each line prefixed with its role."""
    for line in stream:
        with lock:
            sink.write(f"[{prefix}] {line}")
            sink.flush()


class Group:
    """The started processes; ended together, by pid, whatever happens."""

    def __init__(
        self, roles: list[Role], overrides: list[str], command: Sequence[str] = TAPEFIT
    ) -> None:
        self.processes: dict[str, subprocess.Popen] = {}
        self.pumps: list[threading.Thread] = []
        self.signalled: int | None = None  # a SIGINT/SIGTERM the launcher forwarded
        lock = threading.Lock()
        for role in roles:
            process = subprocess.Popen(
                [*command, *overrides, *role.overrides],
                env={**os.environ, **role.env},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # a terminal's Ctrl-C reaches them through us only
            )
            self.processes[role.name] = process
            thread = threading.Thread(
                target=pump, args=(process.stdout, role.name, sys.stdout, lock), daemon=True
            )
            thread.start()
            self.pumps.append(thread)

    def signal_all(self, signum: int) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signum)

    def stop(self, signum: int, grace: float = GRACE_S, send: bool = True) -> list[str]:
        """Send `signum` to every process still running (each stops after its current step,
        with a checkpoint; `send=False`: it was sent already, and a second one would stop them
        at once, wherever they are), give them `grace` seconds, then SIGKILL those still
        running; returns their names."""
        if send:
            self.signal_all(signum)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self.running():
            time.sleep(0.2)
        stuck = self.running()
        if stuck:
            print(
                f"tapefit.launch: {', '.join(stuck)} still running {grace:g} s after "
                f"{signal.Signals(signum).name}; killed (raise --grace to give them longer)",
                file=sys.stderr,
                flush=True,
            )
        self.signal_all(signal.SIGKILL)
        for process in self.processes.values():
            process.wait()
        for thread in self.pumps:
            thread.join(timeout=5)
        return stuck

    def end(self, grace: float = GRACE_S) -> None:
        """SIGTERM every process still running, then SIGKILL what is left after the grace."""
        self.stop(signal.SIGTERM, grace)

    def running(self) -> list[str]:
        return [name for name, p in self.processes.items() if p.poll() is None]

    def wait(self, timeout: float | None, grace: float = GRACE_S) -> int:
        """The group's exit code: 0 when every process ended with 0, else the first failure's
        (128 + N for one killed by signal N, 124 on timeout); the others are ended as soon as
        one fails. When several are found failed at once, one killed by a signal is the
        cause reported: its peers' errors ("worker 1 stopped during a step") follow from it.
        A signal the launcher received (`self.signalled`, set by `main`'s handler) was
        forwarded to every process: they are given `grace` seconds to stop after their step,
        and the group ends with 128 + that signal."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running():
            if self.signalled is not None:
                return self._stopped_by(self.signalled, grace)
            failed = self.failures()
            if failed:
                name, code = failed[0]
                print(f"tapefit.launch: {name} exited with {code}; ending the others", flush=True)
                self.end(grace)
                return code if code > 0 else 128 - code  # killed by signal N: 128 + N
            if deadline is not None and time.monotonic() > deadline:
                print(
                    f"tapefit.launch: error: still running after --timeout {timeout:g} s; "
                    "stopping every process after its current step",
                    file=sys.stderr,
                    flush=True,
                )
                self.stop(signal.SIGTERM, grace)
                return TIMEOUT_EXIT
            time.sleep(0.2)
        for thread in self.pumps:
            thread.join(timeout=5)
        if self.signalled is not None:
            return self._stopped_by(self.signalled, grace)
        failed = self.failures()
        if not failed:
            return 0
        name, code = failed[0]  # every process ended before a poll saw one fail
        print(f"tapefit.launch: {name} exited with {code}; the others had ended", flush=True)
        return code if code > 0 else 128 - code

    def _stopped_by(self, signum: int, grace: float) -> int:
        """Wait for the processes a forwarded signal stops (killing those past `grace`)."""
        self.stop(signum, grace, send=False)
        return 128 + signum

    def failures(self) -> list[tuple[str, int]]:
        """`(name, returncode)` of the processes that ended with an error, the cause first:
        one killed by a signal (a negative code) before those that exited on their own."""
        failed = [
            (name, p.returncode)
            for name, p in self.processes.items()
            if p.returncode not in (None, 0)
        ]
        return sorted(failed, key=lambda failure: failure[1] > 0)  # stable: start order next


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="python -m tapefit.launch",
        description="Start N multi-worker training processes, or a keras-tuner chief and N "
        "tuners, on this machine; each is `python -m tapefit OVERRIDES`.",
        epilog="examples: python -m tapefit.launch --workers 2 -- trainer.epochs=3\n"
        "          python -m tapefit.launch --tuners 2 -- tune=random tune.max_trials=6",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--workers", type=int, help="tf.distribute workers (>= 2)")
    kind.add_argument("--tuners", type=int, help="keras-tuner tuner processes (>= 1)")
    parser.add_argument("--host", default="127.0.0.1", help="address the chief listens on")
    parser.add_argument(
        "--port", type=int, default=0, help="--tuners: the chief's port (0: a free one)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="after S s, stop every process after its step (exit 124)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=GRACE_S,
        help=f"seconds a process has to stop after a signal before it is killed ({GRACE_S:g})",
    )
    argv = list(argv)
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.workers is not None and args.workers < 2:
        parser.error(f"--workers must be at least 2, got {args.workers}")
    if args.grace < 0:
        parser.error(f"--grace must be at least 0, got {args.grace:g}")
    if args.tuners is not None and args.tuners < 1:
        parser.error(f"--tuners must be at least 1, got {args.tuners}")
    searching = any(o.startswith("tune=") and o != "tune=none" for o in overrides)
    if args.tuners is not None and not searching:
        parser.error("--tuners runs a search: add tune=<random|bayesian|hyperband|grid> after --")
    if args.tuners is not None and "tune=optuna" in overrides:
        parser.error(
            "--tuners starts keras-tuner's chief and tuners; tune=optuna shares its study "
            "through a database instead: start each process with the same tune.storage=URL "
            "and its own hydra.run.dir"
        )
    if args.workers is not None and searching:
        parser.error("--workers trains one model: drop tune=..., or use --tuners for a search")
    return args, overrides


def main(argv: Sequence[str] | None = None) -> int:
    """Start the processes, relay their output and signals, return the group's exit code."""
    args, overrides = parse(sys.argv[1:] if argv is None else argv)
    if args.workers is not None:
        roles = worker_roles(args.workers, args.host)
        overrides = multi_worker_overrides(overrides)
    else:
        roles = tuner_roles(args.tuners, args.host, args.port or free_port(args.host))
    group = Group(roles, shared_run_dir(overrides))

    def forward(signum: int, frame: object) -> None:
        group.signalled = signum  # `wait` gives them the grace, then ends with 128 + signum
        group.signal_all(signum)  # each process stops after its current step

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        return group.wait(args.timeout, args.grace)
    finally:
        if group.running():
            group.end(args.grace)


if __name__ == "__main__":
    sys.exit(main())
