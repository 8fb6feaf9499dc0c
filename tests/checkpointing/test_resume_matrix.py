"""Resume is exact wherever a run stops: the matrix users meet.

Each cell trains one configuration twice: once uninterrupted, and once stopped three times in
the same run directory and resumed after each stop:

1. SIGTERM in the middle of epoch 1 (the handler's checkpoint of the steps done, exit as
   interrupted);
2. a crash right after a mid-epoch step checkpoint in epoch 2 (`trainer.checkpoint_every_steps`:
   what a SIGKILL leaves behind; tests/checkpointing/test_resume.py kills real processes with
   SIGKILL);
3. a crash at the end of epoch 3, after its checkpoint and before TensorBoard and the CSV log
   wrote it.

The resumed run must end with the uninterrupted run's History, final weights, optimizer state
and test metrics, bit for bit. The cells: the digits CNN (one block: BatchNorm, Dropout) with
EarlyStopping keeping its last weights and ReduceLROnPlateau, and a user's `_target_` model
(BatchNorm, Dropout) with both and a user callback with state;
tests/checkpointing/test_kill_points.py sweeps the CNN and the Siamese model with EarlyStopping
restoring its best weights over every point a run can stop at. EarlyStopping watches the
training loss in `mode=max`, so it stops the run at the end of epoch 3 (restoring epoch 1's
weights) and ReduceLROnPlateau lowers the learning rate every epoch: both act inside the
window the stops fall in.
"""

import gc
import json
import signal
import textwrap

import keras
import numpy as np
import pytest

import tapefit
from tapefit.callbacks.stop_on_signal import RunInterrupted
from tests.helpers import SMALL_CNN, SMALL_SIAMESE, scalar_tags

STEPS = 6  # optimizer steps per epoch in every cell
COMMON = [
    "trainer.epochs=4",  # the third stop ends epoch 3; the last resume trains epoch 4
    "trainer.verbose=0",
    "trainer.steps_per_execution=1",
    "trainer.deterministic=true",
    "trainer.checkpoint_every_steps=3",
]
CNN = ["data.train_limit=192", *SMALL_CNN]  # the digits CNN (BatchNorm, Dropout): 6 steps of 32
USER = [
    "model=resume_net",
    "data=resume_arrays",
    "compile.loss=mse",
    # the loss falls every epoch (4.71, 2.89, 1.39 measured; at 1e-3 it rose in epoch 2 of 6
    # steps), as EarlyStopping and ReduceLROnPlateau in mode=max here need
    "optimizer.learning_rate=0.01",
]  # a user's project: conf/ and module below

STOPPING = [
    "callbacks.early_stopping.enabled=true",
    "callbacks.early_stopping.monitor=loss",
    "callbacks.early_stopping.mode=max",
    "callbacks.early_stopping.patience=2",
]
PLATEAU = [
    "callbacks.reduce_lr_on_plateau.enabled=true",
    "callbacks.reduce_lr_on_plateau.monitor=loss",
    "callbacks.reduce_lr_on_plateau.mode=max",
    "callbacks.reduce_lr_on_plateau.patience=1",
]
COUNTER = ["+callbacks.extra.counter._target_=resume_user.BatchCounter"]
PRETRAINED = [  # 6 steps of 32 pairs; the folder is written into the user's project
    "data=pairs_synthetic",
    "data.train_size=192",
    "data.val_size=32",
    "data.test_size=32",
    "data.batch_size=32",
    "data.tokenizer=pretrained",
    "model=siamese_pretrained",
    "model.encoder.preset={project}/checkpoints/st",
    "model.encoder.projection=8",
    "model.fine_tuning.freeze_backbone_steps=8",
    "+optimizers.head._target_=keras.optimizers.AdamW",
    "+optimizers.head.learning_rate=0.001",
    "+optimizers.backbone._target_=keras.optimizers.AdamW",
    "+optimizers.backbone.learning_rate=0.0001",
]
IMAGE = [  # 6 steps of 32 photos; the preset folder and photos are in the user's project
    "data=image_folder",
    "data.train_path={project}/photos/train",
    "data.validation_path={project}/photos/val",
    "data.test_path={project}/photos/val",
    "data.image_size=[24,24]",
    "data.batch_size=32",
    "model=classifier_pretrained",
    "model.backbone.preset={project}/checkpoints/resnet",
    "model.backbone.image_size=[24,24]",
    "model.fine_tuning.freeze_backbone_epochs=2",
    "model.augment=[{{_target_:keras.layers.RandomFlip,mode:horizontal}},"  # {{: str.format
    "{{_target_:keras.layers.RandomRotation,factor:0.05}}]",  # seeded: the stops keep the draws
    "model.mixing={{kind:mixup,alpha:0.4}}",
    "+optimizers.head._target_=keras.optimizers.Adam",
    "+optimizers.head.learning_rate=0.001",
    "+optimizers.backbone._target_=keras.optimizers.Adam",
    "+optimizers.backbone.learning_rate=0.0001",
]
BOTH = [*STOPPING, *PLATEAU]
CACHED = [
    "experiment=siamese",
    "data.train_size=192",
    "data.val_size=32",
    "data.test_size=32",
    "data.batch_size=32",
    # the bag of embeddings with dropout on its token embeddings: the cached step's masks,
    # drawn again in its second pass and after each resume, are the subject (a dropout layer's
    # seed generator, as an LSTM's recurrent dropout has). The LSTM traced this run's step
    # and evaluation in 5.6 s of 8.0 s, five times a cell (measured); its recurrent dropout in
    # the cached step equals the ordinary step in tests/models/test_cached_step.py.
    *SMALL_SIAMESE,
    "model.encoder.dropout=0.2",
    "model.loss.name=in_batch_negatives",
    "model.loss.symmetric=true",
    "model.loss.cache_chunk_size=12",
]

# Every cell trains five times, so none repeats another: EarlyStopping keeping its last weights
# beside ReduceLROnPlateau on the CNN, and both with a user callback on the user's
# BatchNorm/Dropout model. The CNN and the Siamese model with EarlyStopping restoring its best
# weights, ReduceLROnPlateau and the user callback are swept over every kill point of a run in
# tests/checkpointing/test_kill_points.py.
CELLS = {
    "cnn-early_stopping-keep-plateau": [
        *CNN,
        *BOTH,
        "callbacks.early_stopping.restore_best_weights=false",
    ],
    "user_model-both-user_callback": [*USER, *BOTH, *COUNTER],
    # a pretrained BERT encoder (one layer, dropout), its head alone for 8 steps (epoch 2, 2
    # steps in: between the first two stops), its own optimizer
    "pretrained-frozen_start-backbone_optimizer": [*PRETRAINED, *PLATEAU],
    # the cached (GradCache) step, chunks of 12 of 32 pairs, with dropout redrawn
    "siamese-cached_in_batch_negatives-plateau": [*CACHED, *PLATEAU],
    # a pretrained ResNet frozen for 2 epochs (the stops fall before, at and after the switch),
    # then unfrozen at its own optimizer's rate; random flips and rotations of each batch, MixUp
    "image_backbone-frozen_epochs-backbone_optimizer": [*IMAGE, *PLATEAU],
}

USER_MODULE = '''
import keras
import numpy as np

import tapefit


@keras.saving.register_keras_serializable(package="resume_user")
class Net(tapefit.TapeModel):
    """A user's regressor with BatchNorm and Dropout (a random state the checkpoint carries)."""

    def __init__(self, units=16, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden = keras.layers.Dense(units, activation="relu")
        self.norm = keras.layers.BatchNormalization(momentum=0.9)
        self.drop = keras.layers.Dropout(0.3)
        self.out = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.drop(self.norm(self.hidden(x), training=training), training=training))


def load_arrays(n_samples=288, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_samples, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]], "float32") + 0.1).astype("float32")
    return {"train": (x[:-48], y[:-48]), "test": (x[-48:], y[-48:])}


class BatchCounter(keras.callbacks.Callback):
    """A user callback with state: batches seen over the whole run, in the epoch logs."""

    def on_train_begin(self, logs=None):
        self.seen = 0  # reset here, as Keras' own callbacks do; a resume puts it back

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1

    def on_epoch_end(self, epoch, logs=None):
        logs["batches_seen"] = float(self.seen)

    def get_state(self):
        return {"seen": self.seen}

    def set_state(self, state):
        self.seen = state["seen"]
'''


@pytest.fixture(scope="session")
def user_project(tmp_path_factory):
    """A user's module and conf/ outside tapefit (the model, its loader, a callback)."""
    root = tmp_path_factory.mktemp("resume_user")
    (root / "resume_user.py").write_text(USER_MODULE)
    conf = root / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "data").mkdir()
    (conf / "model" / "resume_net.yaml").write_text("_target_: resume_user.Net\nunits: 16\n")
    (conf / "data" / "resume_arrays.yaml").write_text(
        textwrap.dedent(
            """\
            _target_: resume_user.load_arrays
            n_samples: 288
            batch_size: 32
            val_fraction: 0.2
            """
        )
    )
    return root


class SigtermAt(keras.callbacks.Callback):
    """Sends this process SIGTERM at the end of optimizer step `step`, as a scheduler would."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == self.step:
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler), "tapefit's SIGTERM handler is not installed"
            signal.raise_signal(signal.SIGTERM)


class Crash(Exception):  # noqa: N818 - a stand-in for a kill, not an error
    """Stands for a SIGKILL: the process ends with what is on disk, nothing else."""


class CrashAt(keras.callbacks.Callback):
    """Raises `Crash` after optimizer step `step` or epoch `epoch` (from 1), once the
    checkpointer (which comes before this callback) has written that point's checkpoint."""

    def __init__(self, step: int | None = None, epoch: int | None = None) -> None:
        super().__init__()
        self.step, self.epoch = step, epoch

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == self.step:
            raise Crash(f"after step {self.step}")

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epoch:
            raise Crash(f"after epoch {self.epoch}")


def markers(run_dir):
    return sorted(p.stem for p in (run_dir / "resume").glob("*.json"))


def final_state(run_dir):
    """History, tested weights, optimizer variables and test metrics of a finished run."""
    model = keras.models.load_model(run_dir / "model.keras")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {
        "history": json.loads((run_dir / "history.json").read_text()),
        "weights": model.get_weights(),
        "optimizer": [np.array(v) for v in model.optimizer.variables],
        "tested": {k: v for k, v in metrics.items() if k.startswith(("test_", "tested_"))},
        "epochs_run": metrics["epochs_run"],
    }


@pytest.mark.parametrize("cell", list(CELLS))
def test_three_stops_and_resumes_end_bitwise_like_the_uninterrupted_run(
    cell, user_project, tmp_path, monkeypatch
):
    monkeypatch.syspath_prepend(str(user_project))
    if cell.startswith("pretrained") and not (user_project / "checkpoints").exists():
        pytest.importorskip("keras_hub")
        from tests.text.pretrained_checkpoints import write_hf_folder

        write_hf_folder(user_project / "checkpoints" / "st", num_layers=1)
    if cell.startswith("image") and not (user_project / "photos").exists():
        pytest.importorskip("keras_hub")
        from tests.models.image_checkpoints import write_photos, write_resnet_preset

        write_resnet_preset(user_project / "checkpoints" / "resnet", image_size=(24, 24))
        write_photos(user_project / "photos" / "train", per_class=96)
        write_photos(user_project / "photos" / "val", per_class=16, seed=1)
    cell_overrides = [o.format(project=user_project) for o in CELLS[cell]]
    overrides = [f"hydra.searchpath=[file://{user_project / 'conf'}]", *COMMON, *cell_overrides]

    def run(run_dir, *extra, callbacks=()):
        gc.collect()  # what a stopped run left open (its TensorBoard writers) is closed, as at exit
        keras.utils.set_random_seed(1234)
        return tapefit.run(tapefit.compose([*overrides, *extra]), run_dir, list(callbacks))

    expected = run(tmp_path / "uninterrupted")
    run_dir = tmp_path / "stopped"
    with pytest.raises(RunInterrupted):  # the signal lands at step 2, the stop after step 3
        run(run_dir, callbacks=[SigtermAt(2)])
    assert markers(run_dir)[-1] == "epoch-0000-step-00003"
    with pytest.raises(Crash):  # epoch 2, 3 steps in: checkpoint, then the crash
        run(run_dir, "resume=true", callbacks=[CrashAt(step=STEPS + 3)])
    assert markers(run_dir)[-1] == "epoch-0001-step-00003"
    with pytest.raises(Crash):
        run(run_dir, "resume=true", callbacks=[CrashAt(epoch=3)])
    assert markers(run_dir)[-1] == "epoch-0003"
    resumed = run(run_dir, "resume=true")

    want, got = final_state(tmp_path / "uninterrupted"), final_state(run_dir)
    assert got["history"] == want["history"]
    assert got["epochs_run"] == want["epochs_run"] == expected["epochs_run"]
    if "early_stopping" in cell or "both" in cell:
        assert want["epochs_run"] == 3  # stopped by EarlyStopping where the third stop fell
    for name in ("weights", "optimizer"):
        assert len(got[name]) == len(want[name])
        for a, b in zip(got[name], want[name], strict=True):
            np.testing.assert_array_equal(a, b)
    assert got["tested"] == want["tested"]
    assert {k: v for k, v in resumed.items() if k.startswith("test_")} == {
        k: v for k, v in expected.items() if k.startswith("test_")
    }
    # every epoch once in the CSV log and TensorBoard, those the crashes left unlogged included
    csv_rows = (run_dir / "history.csv").read_text().splitlines()
    assert csv_rows == (tmp_path / "uninterrupted" / "history.csv").read_text().splitlines()
    logged = scalar_tags(run_dir / "tensorboard" / "train")["epoch_loss"]
    assert sorted(logged) == sorted(want["history"]["loss"])
    if "user_callback" in cell:
        assert got["history"]["batches_seen"] == [
            float(STEPS * (epoch + 1)) for epoch in range(want["epochs_run"])
        ]
