"""Every kill point of a short run, swept: resumed from each, the run ends bitwise like the
uninterrupted one (History, weights, optimizer state, test metrics, the CSV log and the step
telemetry's `steps.csv` byte for byte, TensorBoard).

A SIGKILL leaves on disk exactly the bytes written before it. So one uninterrupted run, with
`tests/killpoints.py` copying its run directory at every point it passes (each step's
callbacks one by one, validation batches, each callback's `on_epoch_end`, between every
checkpoint's weights and its marker, each write of the last phase), holds what a kill at each
point leaves; copies with the same bytes are one state, resumed once (in this process, as a
new run of the same config would). Some of those resumes are themselves swept once more (a
second kill in the resumed run, then a second resume); a state of that second sweep whose
files are a state of the first's but for the `resume=true` its checkpoints record (a resume
reads that setting nowhere) was resumed there, and is not resumed again.
`tests/checkpointing/test_resume.py` kills real processes at named points with the same hook,
to show a kill leaves what a copy holds.

SIGTERM (the graceful stop) is swept over the places a stop can happen, with the step
checkpoints and executions of the CNN cell (on the MLP), in
`test_a_sigterm_at_every_point_stops_and_resumes_bitwise`.

The cells: the digits CNN cut to one block (BatchNorm, Dropout; `tests.helpers.SMALL_CNN`)
with EarlyStopping restoring its best weights, ReduceLROnPlateau and a user callback with
state, with step checkpoints every 2 steps of a 3-step epoch run 2 steps per execution (not a
multiple; the last execution is short, and Keras names its end a step past the epoch's last,
a multiple of 2: no step checkpoint may claim the epoch before its validation); the MLP with
the same callbacks and epoch checkpoints only; the Siamese model (its encoder a bag of
embeddings with dropout: `SMALL_SIAMESE`) with the same callbacks and step checkpoints every 2
steps of a 4-step epoch (a multiple).
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import shutil
import zipfile
from collections import defaultdict
from copy import deepcopy
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest

import tapefit
from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.files import read_json
from tests.helpers import SMALL_CNN, SMALL_SIAMESE, scalar_tags
from tests.killpoints import KillPoints, epoch_scalars, install, state_digest

pytestmark = pytest.mark.slow

COMMON = [
    "trainer.epochs=3",
    "trainer.verbose=0",
    "trainer.deterministic=true",
    "trainer.validation_steps=2",
    # EarlyStopping on the training loss in mode=max stops at epoch 2's end (patience 1) and
    # restores epoch 1's weights; ReduceLROnPlateau lowers the rate at epoch 2's end.
    "callbacks.early_stopping.enabled=true",
    "callbacks.early_stopping.monitor=loss",
    "callbacks.early_stopping.mode=max",
    "callbacks.early_stopping.patience=1",
    "callbacks.reduce_lr_on_plateau.enabled=true",
    "callbacks.reduce_lr_on_plateau.monitor=loss",
    "callbacks.reduce_lr_on_plateau.mode=max",
    "callbacks.reduce_lr_on_plateau.patience=1",
    "+callbacks.extra.counter._target_=tests.checkpointing.test_kill_points.BatchCounter",
    "callbacks.step_telemetry.every_n_steps=3",  # steps.csv rows inside the epochs too
]
# The MLP (no BatchNorm or Dropout; half the CNN's start-up) where the cell varies the stop,
# not the model's state: epoch checkpoints only, and SIGTERM's graceful stop.
MLP = ["model.architecture=mlp", "data.train_limit=128", "trainer.steps_per_execution=1"]
SIAMESE = [
    "experiment=siamese",
    *("data.train_size=256", "data.val_size=64", "data.test_size=64"),  # 4 steps of 64
    *SMALL_SIAMESE,
]
CELLS = {
    # the epoch's length not a multiple of the checkpoints' interval, and its last execution
    # short: Keras names that execution's end step 3 of an epoch of 3 as step 4
    "cnn-every_2_of_3-2_per_execution": [
        *SMALL_CNN,
        "data.train_limit=96",
        "trainer.steps_per_execution=2",
        "trainer.checkpoint_every_steps=2",
    ],
    "mlp-epoch_checkpoints_only": MLP,
    "siamese-every_2_of_4": [*SIAMESE, "trainer.checkpoint_every_steps=2"],
}


class BatchCounter(keras.callbacks.Callback):
    """A user callback with state: batches seen over the whole run, in the epoch logs."""

    def on_train_begin(self, logs=None):
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1

    def on_epoch_end(self, epoch, logs=None):
        logs["batches_seen"] = float(self.seen)

    def get_state(self):
        return {"seen": self.seen}

    def set_state(self, state):
        self.seen = state["seen"]


def saved_model(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """The model a `.keras` archive holds: its config, and every variable it saved (the
    layers' and the optimizer's), read from the archive without building the model (0.01 s
    against load_model's 0.1-0.3 s, dozens of times a sweep). Two archives equal in both load
    as the same model: `want`'s is loaded once with Keras."""
    variables: dict[str, np.ndarray] = {}

    def read(name: str, item: object) -> None:
        if isinstance(item, h5py.Dataset):
            variables[name] = item[()]

    with zipfile.ZipFile(path) as archive:
        config = archive.read("config.json").decode()
        with h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r") as weights:
            weights.visititems(read)
    return config, variables


def final_state(run_dir: Path) -> dict:
    """What must be equal after a resume: History, the saved model (config, weights, optimizer
    state), test metrics, the CSV log and TensorBoard's epoch scalars."""
    config, variables = saved_model(run_dir / "model.keras")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {
        "history": json.loads((run_dir / "history.json").read_text()),
        "model_config": config,
        "weights": [v for name, v in sorted(variables.items()) if not name.startswith("optimizer")],
        "optimizer": [v for name, v in sorted(variables.items()) if name.startswith("optimizer")],
        "tested": {k: v for k, v in metrics.items() if k.startswith(("test_", "tested_"))},
        "epochs_run": metrics["epochs_run"],
        "csv": (run_dir / "history.csv").read_bytes(),  # bytes: line endings too
        "steps": (run_dir / "steps.csv").read_bytes(),
        "tensorboard": {
            split: sorted(scalar_tags(run_dir / "tensorboard" / split)["epoch_loss"])
            for split in ("train", "validation")
        },
        "state": json.loads((run_dir / "status.json").read_text())["state"],
    }


def assert_loads_as_saved(run_dir: Path, state: dict) -> None:
    """Keras loads the run's model.keras with the weights and optimizer state `state` read."""
    model = keras.models.load_model(run_dir / "model.keras")
    for got, want in (
        (model.weights, state["weights"]),
        (model.optimizer.variables, state["optimizer"]),
    ):
        assert sorted(np.asarray(v).tobytes() for v in got) == sorted(w.tobytes() for w in want)


def assert_same(got: dict, want: dict, where: str) -> None:
    assert got["state"] == "completed", where
    for key in ("history", "model_config", "tested", "epochs_run", "csv", "steps", "tensorboard"):
        assert got[key] == want[key], f"{where}: {key} differs"
    for key in ("weights", "optimizer"):
        assert len(got[key]) == len(want[key]), f"{where}: {key}"
        for a, b in zip(got[key], want[key], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{where}: {key}")


class Runs:
    """Runs of one cell's config in this process, each from the same global state (the
    config composed once for a fresh run and once for a resume)."""

    def __init__(self, overrides: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.configs = {
            extra: tapefit.compose([*overrides, *extra]) for extra in ((), ("resume=true",))
        }

    def __call__(self, run_dir: Path, points: KillPoints | None = None, *extra: str) -> dict:
        gc.collect()  # what a stopped run left open (TensorBoard writers) is closed, as at exit
        keras.utils.set_random_seed(1234)
        with self.monkeypatch.context() as patch:
            callbacks = [install(points, patch.setattr)] if points is not None else []
            cfg = deepcopy(self.configs[extra])
            return tapefit.run(cfg, run_dir, callbacks)


def distinct_states(snapshots: Path) -> dict[str, list[tuple[Path, str]]]:
    """The snapshots grouped by what a resume reads from them: digest -> [(copy, point)]."""
    states: dict[str, list[tuple[Path, str]]] = defaultdict(list)
    for copy in sorted(p for p in snapshots.iterdir() if p.is_dir()):
        states[state_digest(copy)].append((copy, (copy.parent / f"{copy.name}.point").read_text()))
    return states


def resume_digest(run_dir: Path) -> str:
    """`state_digest` but for the `resume` setting each checkpoint records: a resumed run's
    checkpoints record resume=true where the uninterrupted run's record false, and a resume
    reads that setting nowhere (it is among the keys a resume may change,
    tapefit/checkpointing/config_match.py), so states that differ only there resume alike."""
    digest = hashlib.sha256()
    for path in sorted(p for p in (run_dir / "resume").rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".json":  # a marker, written whole (through a temporary name)
            marker = json.loads(data)
            marker["config"].pop("resume")
            data = json.dumps(marker, sort_keys=True).encode()
        digest.update(path.name.encode() + b"\0" + data + b"\0")
    if (run_dir / "tensorboard").is_dir():
        digest.update(repr(epoch_scalars(run_dir / "tensorboard")).encode())
    status = read_json(run_dir / "status.json") or {}
    digest.update(str(status.get("state")).encode())
    return digest.hexdigest()


def resume_from(runs: Runs, copy: Path, run_dir: Path, points: KillPoints | None = None) -> dict:
    shutil.copytree(copy, run_dir)
    if points is not None:
        points.run_dir = run_dir
    runs(run_dir, points, "resume=true")
    return final_state(run_dir)


@pytest.mark.parametrize("cell", list(CELLS))
def test_a_kill_at_every_point_resumes_bitwise(cell, tmp_path, monkeypatch):
    runs = Runs([*COMMON, *CELLS[cell]], monkeypatch)
    snapshots = tmp_path / "snapshots"
    points = KillPoints(tmp_path / "uninterrupted", "snapshot", snapshots=snapshots)
    runs(tmp_path / "uninterrupted", points)
    want = final_state(tmp_path / "uninterrupted")
    assert_loads_as_saved(tmp_path / "uninterrupted", want)
    assert want["epochs_run"] == 2  # EarlyStopping stopped it inside the swept window
    kinds = {name.split("-")[0] for name in points.passed}
    assert kinds == {"begin", "batch_end", "validation", "epoch_end", "checkpoint", "final"}
    states = distinct_states(snapshots)
    resumed = {resume_digest(copies[0][0]) for copies in states.values()}
    epoch_steps = 3 if "of_3" in cell else 4
    written = {p.stem for p in snapshots.glob("*/resume/*.json")}
    step_markers = [name for name in written if "-step-" in name]
    assert step_markers or "only" in cell
    for name in step_markers:  # never "all steps done" for an epoch not yet validated
        assert int(name.split("-")[-1]) < epoch_steps, name
    second = 0
    for index, (_digest, copies) in enumerate(sorted(states.items())):
        copy, point = copies[0]
        where = f"{cell}: killed at {point} (and {len(copies) - 1} points with the same files)"
        # a second sweep inside the resumed run, for the states a step checkpoint holds
        again = "-step-" in " ".join(p.name for p in (copy / "resume").glob("*.json")) and (
            second < 1
        )
        nested = (
            KillPoints(copy, "snapshot", snapshots=tmp_path / f"nested-{index}") if again else None
        )
        got = resume_from(runs, copy, tmp_path / f"resumed-{index}", nested)
        assert_same(got, want, where)
        if nested is None:
            continue
        second += 1
        # killed again in the resumed run, at each of its own points, and resumed again
        for nested_index, (_, nested_copies) in enumerate(
            sorted(distinct_states(tmp_path / f"nested-{index}").items())
        ):
            nested_copy, nested_point = nested_copies[0]
            if not nested_point.startswith(("validation", "checkpoint")):
                continue
            if resume_digest(nested_copy) in resumed:  # a state of the first sweep, resumed
                continue  # there, but for the resume=true its checkpoints record
            twice = resume_from(runs, nested_copy, tmp_path / f"twice-{index}-{nested_index}")
            assert_same(twice, want, f"{where}, then at {nested_point} of the resumed run")
    assert second == 1 or "only" in cell


def sigterm_points(passed: list[str]) -> list[str]:
    """Where a SIGTERM is sent: before every step (it lands during the step), during each
    epoch's validation, in `on_epoch_end` before epoch 1's first callback and after each
    epoch's last one (the stopper's check has passed), between the first step checkpoint's
    weights and marker, and in the last phase during the test, before model.keras and after
    metrics.json. A signal only sets a flag, which the stopper reads after each step, after
    validation and at the epoch's end, and outside training stops the run at once: these
    points reach each of those places."""
    chosen = [name for name in passed if name.startswith("begin-")]
    for epoch in (1, 2):  # its first point: validation-E-2 with 2 batches an execution
        chosen += [next(name for name in passed if name.startswith(f"validation-{epoch}-"))]
    chosen += ["final-test", "final-model", "final-written"]
    epoch_ends = [name for name in passed if name.startswith("epoch_end-")]
    chosen += [epoch_ends[0]]
    for epoch in (1, 2):
        chosen += [[name for name in epoch_ends if name.startswith(f"epoch_end-{epoch}-")][-1]]
    chosen += [next(name for name in passed if name.startswith("checkpoint-") and "-step-" in name)]
    return sorted(set(chosen), key=passed.index)


# One cell, the MLP with the CNN cell's checkpoints and executions: a stop is a flag read at the
# same places whatever the model (the SIGKILL sweeps cover the CNN's and the Siamese model's
# state; the Siamese SIGTERM sweep, 77 s, found nothing the CNN's did not).
@pytest.mark.parametrize("cell", ["cnn-every_2_of_3-2_per_execution"])
def test_a_sigterm_at_every_point_stops_and_resumes_bitwise(cell, tmp_path, monkeypatch):
    """SIGTERM at each point: the run stops (status interrupted, no metrics.json unless the
    signal came after it), and `resume=true` ends like the uninterrupted run."""
    cnn_only = set(SMALL_CNN)
    overrides = [o for o in CELLS[cell] if o not in cnn_only]
    runs = Runs([*COMMON, *overrides, "model.architecture=mlp"], monkeypatch)
    points = KillPoints(tmp_path / "uninterrupted")
    runs(tmp_path / "uninterrupted", points)
    want = final_state(tmp_path / "uninterrupted")
    assert_loads_as_saved(tmp_path / "uninterrupted", want)
    resumed: set[str] = set()
    for index, point in enumerate(sigterm_points(points.passed)):
        run_dir = tmp_path / f"stopped-{index}"
        with pytest.raises(RunInterrupted):
            runs(run_dir, KillPoints(run_dir, "term", at=point))
        assert json.loads((run_dir / "status.json").read_text())["state"] == "interrupted"
        digest = state_digest(run_dir)
        if digest in resumed:  # a stop that left what an earlier one left resumes alike
            continue
        resumed.add(digest)
        runs(run_dir, None, "resume=true")
        assert_same(final_state(run_dir), want, f"{cell}: SIGTERM at {point}")
    # the steps (epoch 1's and epoch 2's step checkpoint), the two epoch ends and the last
    # phase at least: 5 distinct states measured
    assert len(resumed) >= 5
