"""`tapefit.checkpointing.checkpoints`: a small model's epoch and step checkpoints in a folder
(the weights, the callbacks' arrays, then the marker that commits them; the newest kept), read
back into a fresh model, and a bad latest one skipped for the one before. Whole runs resumed
from them: tests/checkpointing/test_resume.py and the kill-point sweeps."""

import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tapefit.checkpointing import checkpoints
from tapefit.checkpointing.checkpoints import (
    CheckpointWriteError,
    EpochCheckpoint,
    checkpoints_in,
    restore_latest,
)
from tests.helpers import small_dense_model

X = np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3)
Y = X[:, :2] * 2.0


def small_model():
    return small_dense_model(learning_rate=0.01)


def trained(directory, epochs=3, **options):
    """A small model fitted `epochs` epochs of 2 steps, checkpointed into `directory`."""
    model = small_model()
    checkpointer = EpochCheckpoint(directory, {"seed": 7}, **options)
    model.fit(X, Y, batch_size=4, epochs=epochs, verbose=0, callbacks=[checkpointer])
    return model


def names(directory):
    return sorted(path.name for path in directory.iterdir())


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Three epochs checkpointed once for this module's readers: (folder, the model's weights,
    its optimizer's variables). A test that changes the folder changes a copy (`copy_of`)."""
    directory = tmp_path_factory.mktemp("checkpoints") / "resume"
    model = trained(directory)
    weights = [np.array(w) for w in model.weights]
    return directory, weights, [np.array(v) for v in model.optimizer.variables]


def copy_of(saved, tmp_path):
    return Path(shutil.copytree(saved[0], tmp_path / "resume"))


def test_each_epoch_end_commits_a_checkpoint_and_the_newest_two_are_kept(saved):
    assert names(saved[0]) == [
        "epoch-0002.callbacks.npz",
        "epoch-0002.json",
        "epoch-0002.weights.h5",
        "epoch-0003.callbacks.npz",
        "epoch-0003.json",
        "epoch-0003.weights.h5",
    ]  # no temporary file left behind
    marker = json.loads((saved[0] / "epoch-0003.json").read_text())
    assert (marker["epochs_done"], marker["steps_in_epoch"], marker["seed"]) == (3, 0, 7)
    assert len(marker["history"]) == 3 and all("loss" in epoch for epoch in marker["history"])
    assert marker["optimizer_variables"] == {"optimizer": [0, 1]}  # kernel and bias
    assert marker["stop_training"] is False


def test_a_fresh_model_gets_back_the_weights_the_optimizer_state_and_the_marker(saved):
    directory, weights, optimizer_variables = saved
    fresh = small_model()  # its Adam not built yet: no slots to load into
    metadata = restore_latest(directory, fresh)
    assert metadata["epochs_done"] == 3 and metadata["callback_arrays"] == {}
    for mine, theirs in zip(fresh.weights, weights, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), theirs)
    assert int(fresh.optimizer.iterations) == 6
    for mine, theirs in zip(fresh.optimizer.variables, optimizer_variables, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), theirs)


def test_a_corrupt_latest_checkpoint_is_skipped_for_the_one_before(saved, tmp_path):
    directory = copy_of(saved, tmp_path)
    (directory / "epoch-0003.weights.h5").write_bytes(b"not an HDF5 file")
    with pytest.warns(UserWarning, match=r"checkpoint epoch-0003 is unreadable \(\w+\); trying"):
        metadata = restore_latest(directory, small_model())
    assert metadata["epochs_done"] == 2
    (directory / "epoch-0002.json").write_text("{")  # a marker cut short: nothing readable
    with pytest.warns(UserWarning) as warned:
        assert restore_latest(directory, small_model()) is None
    assert [str(w.message).split(" is ")[0] for w in warned] == [
        "checkpoint epoch-0003",
        "checkpoint epoch-0002",
    ]
    assert restore_latest(tmp_path / "empty", small_model()) is None


def test_a_step_checkpoint_that_counts_a_whole_epoch_is_skipped_for_the_one_before(saved, tmp_path):
    directory = copy_of(saved, tmp_path)
    for suffix in (".json", ".weights.h5", ".callbacks.npz"):  # as earlier tapefit wrote one
        (directory / f"epoch-0003-step-00002{suffix}").write_bytes(
            (directory / f"epoch-0003{suffix}").read_bytes()
        )
    with pytest.warns(UserWarning, match="epoch-0003-step-00002 counts all 2 steps of epoch 4"):
        metadata = restore_latest(directory, small_model(), epoch_steps=2)
    assert metadata["epochs_done"] == 3 and metadata["steps_in_epoch"] == 0


def test_every_n_steps_a_step_checkpoint_is_written_between_the_epochs_ends(tmp_path):
    trained(tmp_path, epochs=2, keep=10, every_steps=3)  # steps 1-2, then 3-4
    assert [marker.stem for marker in checkpoints_in(tmp_path)] == [
        "epoch-0001",
        "epoch-0001-step-00001",  # step 3: the first of epoch 2's
        "epoch-0002",  # step 4 ends the epoch, whose own checkpoint it is
    ]
    marker = json.loads((tmp_path / "epoch-0001-step-00001.json").read_text())
    assert (marker["epochs_done"], marker["steps_in_epoch"]) == (1, 1)


def test_a_checkpoint_that_cannot_be_written_says_the_one_before_is_intact(tmp_path, monkeypatch):
    write = checkpoints.atomic_write

    def disk_full_after_the_first_checkpoint(path, write_to, mode="w"):
        def half_then_full(file):
            file.write(b"x" if "b" in mode else "x")
            raise OSError(errno.ENOSPC, "No space left on device")

        return write(path, half_then_full if path.name.startswith("epoch-0002") else write_to, mode)

    monkeypatch.setattr(checkpoints, "atomic_write", disk_full_after_the_first_checkpoint)
    checkpointer = EpochCheckpoint(tmp_path, {})
    checkpointer.set_model(small_model())  # the epochs' ends without fit: nothing to train
    checkpointer.on_train_begin()
    checkpointer.on_epoch_end(0, {"loss": 1.0})
    with pytest.raises(CheckpointWriteError) as failed:
        checkpointer.on_epoch_end(1, {"loss": 0.5})
    assert str(failed.value) == (
        f"checkpoint epoch-0002 could not be written to {tmp_path} (No space left on device); "
        "the last complete one, epoch-0001, is intact: free space there and continue with "
        "resume=true"
    )
    assert [marker.stem for marker in checkpoints_in(tmp_path)] == ["epoch-0001"]
    assert not list(tmp_path.glob("*epoch-0002*"))  # nor a temporary file of it
