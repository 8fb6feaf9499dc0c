"""`checkpoint.save_top_k`: the K best epochs' models by the objective and the last one stay in
`checkpoints/`, named with epoch and value, and `evaluate ckpt=best|last|<epoch>` finds them."""

import json

import keras
import numpy as np
import pytest

import tapefit
from tapefit.checkpointing.top_k import kept_checkpoints
from tapefit.errors import TapefitError
from tapefit.runner.finished_runs import evaluate_run, model_file
from tests.helpers import built_once_per_session

pytestmark = pytest.mark.slow
OVERRIDES = [
    "trainer.verbose=0",
    "model.architecture=mlp",
    "data.train_limit=300",
    "trainer.epochs=5",
    "optimizer.learning_rate=0.003",
    "checkpoint.save_top_k=2",
]


@pytest.fixture(scope="session")
@built_once_per_session
def kept_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("topk") / "run"
    tapefit.run(tapefit.compose(OVERRIDES), run_dir)
    return run_dir


def test_the_two_best_epochs_and_the_last_are_kept_with_their_values(kept_run):
    history = json.loads((kept_run / "history.json").read_text())["val_accuracy"]
    kept = kept_checkpoints(kept_run / "checkpoints")
    ranked = sorted(range(len(history)), key=lambda e: (-history[e], e))[:2]
    assert sorted(epoch for epoch, _, _ in kept) == sorted(e + 1 for e in ranked)
    for epoch, value, _ in kept:
        assert value == pytest.approx(history[epoch - 1], abs=5e-5)
    assert (kept_run / "checkpoints" / "last.keras").is_file()
    assert len(list((kept_run / "checkpoints").glob("*.keras"))) == 3


def test_best_is_the_tested_model_and_last_the_last_epoch(kept_run):
    metrics = json.loads((kept_run / "metrics.json").read_text())
    best = keras.models.load_model(model_file(kept_run, "best"))
    tested = keras.models.load_model(kept_run / "model.keras")
    assert f"epoch-{metrics['tested_epoch']:04d}-" in model_file(kept_run, "best").name
    for a, b in zip(best.get_weights(), tested.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    evaluated = evaluate_run(kept_run, [], "best")
    assert evaluated["test_accuracy"] == metrics["test_accuracy"]
    last = evaluate_run(kept_run, [], "last")
    assert set(last) == {"test_loss", "test_accuracy"}


def test_an_epoch_not_kept_is_refused_naming_the_kept_ones(kept_run):
    kept = [epoch for epoch, _, _ in kept_checkpoints(kept_run / "checkpoints")]
    missing = next(e for e in range(1, 6) if e not in kept)
    with pytest.raises(TapefitError, match="kept epochs: "):
        model_file(kept_run, str(missing))
    assert model_file(kept_run, str(kept[0])).name.startswith(f"epoch-{kept[0]:04d}-")
