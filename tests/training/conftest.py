"""What the tests under tests/training/ share: a TensorBoard server forked from the tests' warm
interpreter."""

import socket
import sys
from pathlib import Path

import pytest

from tests import processes
from tests.helpers import TensorBoardServer


class ForkedTensorBoardServer(TensorBoardServer):
    """`tests.helpers.TensorBoardServer` (the same `python -m tensorboard.main` and options, the
    same HTTP reads), its process forked from the tests' warm interpreter (`tests.processes`),
    which has imported TensorFlow: ready in about 1 s where a fresh interpreter took 5.5 s and
    another 1.3 s to stop (measured)."""

    def __init__(self, logdir: Path) -> None:
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


@pytest.fixture
def tensorboard_server():
    """`tensorboard_server(logdir)`: a context manager serving `logdir`, as
    `tests.helpers.TensorBoardServer` but forked (`ForkedTensorBoardServer`)."""
    return ForkedTensorBoardServer
