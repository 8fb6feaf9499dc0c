"""A run in a process of its own, killed (SIGKILL) at a named point or not at all, and the
weights a finished run saved: what the resume tests compare."""

import os
import sys

import keras

from tests import processes
from tests.helpers import REPO

OVERRIDES = [
    # the MLP: what a kill leaves on disk does not depend on the model, and it starts in half
    # the CNN's time (the CNN's BatchNorm and Dropout state are swept over every kill point in
    # tests/checkpointing/test_kill_points.py)
    "model.architecture=mlp",
    "trainer.epochs=3",
    "trainer.deterministic=true",
    "trainer.steps_per_execution=1",
    "trainer.verbose=0",
    "data.train_limit=320",  # 10 steps an epoch
]


DRIVER = """
import logging, os, resource, signal, sys
import keras
import tapefit

class Kill(keras.callbacks.Callback):
    '''SIGKILL this process at a chosen point: a batch end (step N) or an epoch end; or, from
    an epoch end on, fail every file write past 20 kB (fsize:N), as a full disk would.'''
    def __init__(self, at):
        super().__init__()
        self.kind, self.value = at.split(":")
    def on_train_batch_end(self, batch, logs=None):
        if self.kind == "step" and int(self.model.optimizer.iterations) == int(self.value):
            os.kill(os.getpid(), signal.SIGKILL)
    def on_epoch_end(self, epoch, logs=None):
        if self.kind == "epoch" and epoch + 1 == int(self.value):
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "fsize" and epoch + 1 == int(self.value):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, resource.RLIM_INFINITY))

logging.basicConfig(level=logging.INFO)
run_dir, at, *overrides = sys.argv[1:]
cfg = tapefit.compose(overrides)
callbacks = [Kill(at)] if at != "none" and not at.startswith("point:") else []
if at.startswith("point:"):  # a named point of tests/killpoints.py
    from tests.killpoints import KillPoints, install
    callbacks = [install(KillPoints(run_dir, "kill", at.removeprefix("point:")), setattr)]
try:
    tapefit.run(cfg, run_dir, callbacks=callbacks)
except tapefit.TapefitError as error:
    print(f"tapefit: error: {error}", file=sys.stderr)
    sys.exit(2)
"""


def drive(run_dir, at="none", *extra, timeout=240, overrides=OVERRIDES):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    return processes.run(
        [sys.executable, "-c", DRIVER, str(run_dir), at, *overrides, *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def weights(run_dir):
    return keras.models.load_model(run_dir / "model.keras").get_weights()
