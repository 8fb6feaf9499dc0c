"""The checkpoint connector's restore and write sides on a small Keras model, without a run
(the kill-point sweeps and the resume matrix drive it through whole runs)."""

import logging

import numpy as np
import tensorflow as tf

from tapefit.checkpointing.callback_state import CallbackStates, CarryCallbackStates
from tapefit.checkpointing.checkpoints import RestoreMetrics
from tapefit.checkpointing.connector import CheckpointConnector, CheckpointPolicy, Resumption
from tapefit.checkpointing.warm_start import WarmStart
from tapefit.objective import Objective
from tests.helpers import small_dense_model


def test_a_fresh_run_restores_nothing(tmp_path):
    state = CheckpointConnector(CheckpointPolicy(), tmp_path).restore(
        small_dense_model(seed=0), tf.distribute.get_strategy()
    )
    assert (state.done, state.steps_in, state.epochs) == (0, 0, [])
    assert not state.callback_states


def test_a_warm_start_loads_the_saved_weights_and_counts_its_epochs_as_done(tmp_path):
    saved = small_dense_model(seed=1)
    saved.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=1, verbose=0)
    saved.save(tmp_path / "model.keras")
    model = small_dense_model(seed=2)
    state = CheckpointConnector(CheckpointPolicy(), tmp_path / "run").restore(
        model, tf.distribute.get_strategy(), WarmStart(tmp_path / "model.keras", 3)
    )
    assert state.done == 3
    for mine, theirs in zip(model.weights, saved.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_resume_without_a_checkpoint_says_so_and_starts_afresh(tmp_path, caplog):
    connector = CheckpointConnector(CheckpointPolicy(resume=True), tmp_path)
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        state = connector.restore(small_dense_model(seed=0), tf.distribute.get_strategy())
    assert state.done == 0
    assert f"resume=true but {tmp_path} holds no checkpoint" in caplog.text


def test_the_write_side_continues_the_restored_history_and_steps(tmp_path):
    policy = CheckpointPolicy(every_steps=2, config={"seed": 0})
    connector = CheckpointConnector(policy, tmp_path)
    restored = Resumption(
        done=1,
        steps_in=3,
        epochs=[{"loss": 0.5}],
        callback_states=CallbackStates({"Counter#0": {"count": 1}}),
    )
    checkpointer = connector.checkpointer(restored)
    assert checkpointer.skipped_steps == 3 and checkpointer.directory == tmp_path / "resume"
    carry, metrics = connector.restoring_callbacks(restored)
    assert isinstance(carry, CarryCallbackStates) and carry.states == restored.callback_states
    assert isinstance(metrics, RestoreMetrics)


def test_kept_models_only_when_asked_and_discard_removes_the_checkpoints(tmp_path):
    objective = Objective("val_loss", "min")
    assert CheckpointConnector(CheckpointPolicy(), tmp_path).kept_models(objective) == []
    kept = CheckpointConnector(CheckpointPolicy(save_top_k=2), tmp_path).kept_models(objective)
    assert len(kept) == 1
    (tmp_path / "resume").mkdir()
    (tmp_path / "resume" / "epoch-1.weights.h5").write_bytes(b"x")
    CheckpointConnector(CheckpointPolicy(), tmp_path).discard()
    assert not (tmp_path / "resume").exists()
