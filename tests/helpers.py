"""Test helpers shared by several test modules."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m tapefit ARGS` in a fresh process, bounded in time."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "tapefit", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def scalar_tags(log_dir: Path) -> dict[str, list[float]]:
    """Every scalar written to the TensorBoard event files in `log_dir`, tag -> values in order."""
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
    dashboard will show through its HTTP API; stopped on exit."""

    def __init__(self, logdir: Path) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}/data/plugin"
        self.process = subprocess.Popen(
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
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
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
