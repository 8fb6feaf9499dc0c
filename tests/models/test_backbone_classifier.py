"""`model=classifier_pretrained`: a pretrained image backbone (a KerasHub preset folder the
test writes) fine-tuned on a folder of photos by the Keras guide's recipe: head-only epochs
with the backbone frozen (its BatchNorm statistics kept), then the backbone too; the saved
model serves without the folder; the tape step equals Keras' own bitwise; bad settings are
one line."""

import csv
import json
import logging
import shutil

import keras
import numpy as np
import pytest

pytest.importorskip("keras_hub")

import tapefit
from tapefit import TapefitError
from tapefit.models import BackboneClassifier
from tests.helpers import built_once_per_session
from tests.models.image_checkpoints import (
    tiny_resnet,
    write_hf_vit,
    write_photos,
    write_resnet_preset,
)

PHOTOS = [
    "data=image_folder",
    "data.train_path=photos/train",
    "data.validation_path=photos/val",
    "data.test_path=photos/val",
    "data.image_size=[36,40]",
    "data.batch_size=8",
    "model=classifier_pretrained",
    "model.backbone.preset=checkpoints/resnet",
    "trainer.verbose=0",
]


# every export format, each loaded in its runtime and compared with the model by the export
EXPORT = ["trainer.export=true", "trainer.export_formats=[saved_model,onnx,litert,openvino]"]


class Snapshots(keras.callbacks.Callback):
    """Every weight of the model at the end of each epoch."""

    def on_train_begin(self, logs=None):
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(
            {
                "backbone": [(w.path, np.array(w)) for w in self.model.backbone.weights],
                "logits": [np.array(w) for w in self.model.logits.weights],
            }
        )


@pytest.fixture(scope="session")
@built_once_per_session
def photos_project(tmp_path_factory):
    """A user's project: the preset folder and the photos, nothing of tapefit's."""
    root = tmp_path_factory.mktemp("photos_project")
    write_resnet_preset(root / "checkpoints" / "resnet")
    write_hf_vit(root / "checkpoints" / "vit")
    write_photos(root / "photos" / "train", per_class=16)
    write_photos(root / "photos" / "val", per_class=6, seed=1)
    return root


@pytest.fixture(scope="session")
@built_once_per_session
def two_phase_run(photos_project, tmp_path_factory):
    """Two head-only epochs, then one with the backbone, exported in every format (the
    trainer's options reach a backbone run: one run for the recipe and the export): (results,
    each epoch's weights, the messages tapefit logged)."""
    import os

    snapshots, here = Snapshots(), os.getcwd()
    messages = Messages()
    logging.getLogger("tapefit").addHandler(messages)
    # its own copy of the preset, which the prediction test takes away
    shutil.copytree(photos_project / "checkpoints" / "resnet", photos_project / "two_phase_preset")
    os.chdir(photos_project)
    try:
        cfg = [
            *PHOTOS,
            "model.backbone.preset=two_phase_preset",
            "model.fine_tuning.freeze_backbone_epochs=2",
            "trainer.epochs=3",
            *EXPORT,
        ]
        with_info = logging.getLogger("tapefit").level
        logging.getLogger("tapefit").setLevel(logging.INFO)
        results = tapefit.run(
            tapefit.compose(cfg), photos_project / "runs" / "two_phase", [snapshots]
        )
    finally:
        os.chdir(here)
        logging.getLogger("tapefit").removeHandler(messages)
        logging.getLogger("tapefit").setLevel(with_info)
    return results, snapshots.epochs, messages.lines


class Messages(logging.Handler):
    """Every message a logger passes on, as text."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.slow
def test_the_backbone_is_frozen_for_the_first_epochs_then_trains(photos_project, two_phase_run):
    results, epochs, _ = two_phase_run
    start = [np.array(w) for w in tiny_resnet(seed=0).weights]  # what the preset holds
    paths = [path for path, _ in epochs[0]["backbone"]]
    assert len(paths) == len(start) == 30
    for epoch in epochs[:2]:  # head-only: the backbone exactly as the preset has it
        for (path, value), want in zip(epoch["backbone"], start, strict=True):
            np.testing.assert_array_equal(value, want, err_msg=path)
    last = epochs[2]["backbone"]
    moved = [
        path
        for (path, value), want in zip(last, start, strict=True)
        if not np.array_equal(value, want)
    ]
    assert moved and not any("moving" in path for path in moved)  # BatchNorm kept its statistics
    assert set(moved) == {path for path in paths if "moving" not in path}  # all 18 train
    for before, after in zip(epochs[0]["logits"], epochs[1]["logits"], strict=True):
        assert not np.array_equal(before, after)  # the head trains in the frozen epochs
    assert 0 <= results["test_accuracy"] <= 1 and results["epochs_run"] == 3


@pytest.mark.slow
def test_the_switch_is_logged_once(two_phase_run):
    switches = [line for line in two_phase_run[2] if "backbone unfrozen" in line]
    assert switches == [
        "epoch 3: backbone unfrozen after 2 head-only epochs: 18 of its variables train from now on"
    ]


@pytest.mark.slow
def test_the_saved_model_predicts_without_the_preset_folder(
    photos_project, two_phase_run, tmp_path
):
    """The folder gone, a fresh process reloads the model, predicts the photos and evaluates."""
    from tests.helpers import run_cli_batch

    run_dir = photos_project / "runs" / "two_phase"
    shutil.move(photos_project / "two_phase_preset", tmp_path / "elsewhere")
    out, photos = tmp_path / "preds.csv", photos_project / "photos" / "val"
    commands = [
        ("tapefit.predict", [f"run={run_dir}", f"output={out}", f"data.test_path={photos}"]),
        ("tapefit.evaluate", [f"run={run_dir}", f"data.test_path={photos}"]),
    ]
    for result in run_cli_batch(commands, cwd=photos_project):
        assert result.returncode == 0, result.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 12 and {r["label"] for r in rows} <= {"blue", "red"}
    for row in rows:
        assert abs(float(row["prob_blue"]) + float(row["prob_red"]) - 1) < 1e-5
    assert keras.models.load_model(run_dir / "model.keras").class_names == ["blue", "red"]


def test_the_top_layers_alone_are_unfrozen():
    model = BackboneClassifier(
        (24, 24, 3),
        2,
        backbone_layer=tiny_resnet(),
        converter=converter(),
        fine_tuning={"freeze_backbone_epochs": 1, "unfreeze_top_layers": 2},
    )
    assert not model.backbone.trainable
    model.set_backbone_frozen(False)
    weighted = [layer for layer in model.backbone.layers if layer.weights]
    assert [layer.trainable for layer in weighted] == [False] * (len(weighted) - 2) + [True] * 2
    head, backbone = model.tunable_variables()
    assert {v.path for v in backbone} == {
        v.path for layer in weighted[-2:] for v in layer.trainable_variables
    }
    assert {v.path.split("/")[0] for v in head} == {"logits"}


def converter(size=(24, 24)):
    import keras_hub

    return keras_hub.layers.ImageConverter(image_size=size, scale=1 / 255.0)


class BuiltinStep(BackboneClassifier):
    """The same model trained by Keras' own `train_step`."""

    def train_step(self, data):
        return keras.Model.train_step(self, data)


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
@pytest.mark.parametrize("backbone_training", [False, True])
def test_the_tape_step_equals_keras_builtin_step_bitwise(backbone_training):
    rng = np.random.default_rng(0)
    images = rng.random((24, 20, 22, 1)).astype("float32")  # grey: repeated to RGB inside
    labels = rng.integers(0, 3, 24)
    weights = []
    for cls in (BackboneClassifier, BuiltinStep):
        keras.utils.set_random_seed(7)
        model = cls(
            (20, 22, 1),
            3,
            backbone_layer=tiny_resnet(),
            converter=converter(),
            dropout=0.3,
            fine_tuning={"backbone_training": backbone_training},
        )
        model.compile(keras.optimizers.SGD(0.1), **model.compile_defaults())
        model.fit(images, labels, batch_size=8, epochs=2, shuffle=False, verbose=0)
        weights.append(model.get_weights())
    for tape, builtin in zip(*weights, strict=True):
        np.testing.assert_array_equal(tape, builtin)


def test_augmentation_changes_training_batches_only():
    flip = keras.layers.RandomFlip("horizontal_and_vertical", seed=1)
    plain = BackboneClassifier(
        (12, 12, 3), 2, backbone_layer=tiny_resnet(), converter=converter(), dropout=0.0
    )
    augmented = BackboneClassifier.from_config({**plain.get_config(), "augment": [flip]})
    augmented.set_weights(plain.get_weights())
    images = np.random.default_rng(0).random((4, 12, 12, 3)).astype("float32")
    for training in (False, None):
        np.testing.assert_array_equal(augmented(images, training=training), plain(images))
    assert not np.array_equal(augmented(images, training=True), plain(images, training=True))
    reloaded = BackboneClassifier.from_config(augmented.get_config())
    assert [type(layer).__name__ for layer in reloaded.augment] == ["RandomFlip"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["model.backbone.preset=checkpoints/none"],
            "model.backbone.preset=checkpoints/none: no such folder",
        ),
        (["model.backbone.preset=photos"], "the folder has no config.json"),
        (["model.backbone.preset=checkpoints/bert"], "BertBackbone does not read images"),
        (["model.backbone.preset=null"], "model.backbone.preset is not set"),
        (["model.backbone.pooling=cls"], "pooling=cls needs a transformer backbone's token"),
        (
            ["model.backbone.pooling=mean"],
            "model.backbone.pooling=mean must be one of avg, max, cls",
        ),
        (["+model.backbone.size=3"], "model.backbone.size is not a key of model.backbone"),
        (["model.fine_tuning.unfreeze_top_layers=0"], "unfreeze_top_layers=0 must be at least 1"),
        (["model.backbone.image_size=[32]"], "image_size=[32] must be [height, width]"),
        (["model.augment=[flip]"], "model.augment: 'flip' is not a Keras layer"),
    ],
)
def test_bad_settings_are_one_line_before_training(
    photos_project, overrides, message, monkeypatch, tmp_path
):
    monkeypatch.chdir(photos_project)
    if (
        "checkpoints/bert" in overrides[0]
        and not (photos_project / "checkpoints" / "bert").exists()
    ):
        from tests.text.pretrained_checkpoints import write_keras_hub_preset

        write_keras_hub_preset(photos_project / "checkpoints" / "bert")
    with pytest.raises(
        TapefitError, match=message.replace("[", r"\[").replace("]", r"\]")
    ) as error:
        tapefit.run(tapefit.compose([*PHOTOS, *overrides]), tmp_path / "bad")
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_a_backbone_run_takes_the_trainers_options(photos_project, two_phase_run):
    """The export's options (every format) in the two-phase run; the dtype policy's and the
    batch mixing's in the mirrored run below."""
    results, _, _ = two_phase_run
    run = photos_project / "runs" / "two_phase"
    assert results["epochs_run"] == 3 and 0 <= results["test_accuracy"] <= 1
    model = keras.models.load_model(run / "model.keras")
    assert model(np.zeros((2, 36, 40, 3), "float32")).dtype == "float32"  # the head's softmax
    export = run / "export"  # each format loaded in its runtime and compared
    assert (export / "onnx" / "serve.onnx").is_file()
    assert (export / "litert" / "serve.tflite").is_file()
    assert (export / "openvino" / "serve.xml").is_file()  # its dangling outputs dropped
    assert (export / "saved_model" / "saved_model.pb").is_file() or any(export.rglob("*.pb"))


@pytest.mark.slow
def test_a_search_the_overfit_check_and_a_vit_folder_run_through_the_cli(photos_project, tmp_path):
    """Through the real CLI: `search_space=classifier_pretrained` searches the recipe's keys,
    `debug=overfit` learns four fixed batches by heart, and a Hugging Face ViT folder trains
    by the two-phase recipe on its `cls` token."""
    from tests.helpers import run_cli_batch

    # one trial of one epoch: the trials' table names the recipe's keys it searched
    search = [*PHOTOS, "search_space=classifier_pretrained", "tune=random", "tune.max_trials=1"]
    search += ["trainer.epochs=1", f"hydra.run.dir={tmp_path / 'search'}"]
    # 4 of debug=overfit's 60 epochs: the loss falls from 0.42 below its threshold (0.042) at
    # epoch 3 and stays there (0.00016 at epoch 4, at most 0.0035 over epochs 4 to 60, measured)
    overfit = [*PHOTOS, "debug=overfit", "trainer.epochs=4"]
    overfit += [f"hydra.run.dir={tmp_path / 'overfit'}"]
    vit = [*PHOTOS, "model.backbone.preset=checkpoints/vit", "model.backbone.pooling=cls"]
    vit += ["model.fine_tuning.freeze_backbone_epochs=1", "trainer.epochs=2"]
    vit += [f"hydra.run.dir={tmp_path / 'vit'}"]
    for result in run_cli_batch([search, overfit, vit], cwd=photos_project):
        assert result.returncode == 0, result.stderr[-2000:]
    vit_metrics = json.loads((tmp_path / "vit" / "metrics.json").read_text())
    assert vit_metrics["epochs_run"] == 2 and vit_metrics["test_accuracy"] > 0.5
    log = (tmp_path / "vit" / "tapefit.log").read_text()
    assert "preprocessing read from its preprocessor_config.json" in log
    assert "epoch 2: backbone unfrozen after 1 head-only epoch: " in log
    trials = (tmp_path / "search" / "trials.csv").read_text().splitlines()
    assert len(trials) == 2 and "model.fine_tuning.freeze_backbone_epochs" in trials[0]
    assert ",completed," in trials[1]
    verdict = json.loads((tmp_path / "overfit" / "metrics.json").read_text())["overfit"]
    assert verdict["passed"] and verdict["last_loss"] < verdict["threshold"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.mixing={kind:blend,alpha:0.2}"], "model.mixing.kind=blend must be one of mixup"),
        (["model.mixing={kind:mixup,alpha:0}"], "model.mixing.alpha=0 must be above 0"),
        (
            ["model.mixing={kind:mixup,alpha:0.2}", "compile.loss=categorical_crossentropy"],
            "compile.loss=categorical_crossentropy would not be the training loss",
        ),
    ],
)
def test_bad_mixing_is_one_line(photos_project, overrides, message, monkeypatch, tmp_path):
    monkeypatch.chdir(photos_project)
    with pytest.raises(TapefitError, match=message) as error:
        tapefit.run(tapefit.compose([*PHOTOS, *overrides]), tmp_path / "bad")
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def application_weights(tmp_path_factory):
    """A weights file saved for VGG16 without its top, as keras.applications' downloads are
    (random weights here: no network), and the model that saved it. VGG16: the application
    of fewest layers (19, no BatchNorm), whose run traces in half MobileNetV2's time (154
    layers, 52 BatchNorm); the frozen backbone's BatchNorm statistics are the subject of the
    two-phase run above."""
    folder = tmp_path_factory.mktemp("applications")
    keras.utils.set_random_seed(5)
    source = keras.applications.VGG16(include_top=False, weights=None, input_shape=(32, 32, 3))
    source.save_weights(folder / "vgg16_notop.weights.h5")
    return folder / "vgg16_notop.weights.h5", source


@pytest.mark.slow
def test_a_keras_applications_model_starts_from_its_weights_file(
    photos_project, application_weights, tmp_path, monkeypatch
):
    weights, source = application_weights
    monkeypatch.chdir(photos_project)
    cfg = [
        *PHOTOS,
        "model.backbone.preset=null",
        "model.backbone.application=VGG16",
        f"model.backbone.weights={weights}",
        "model.backbone.image_size=[32,32]",
        "model.fine_tuning.freeze_backbone_epochs=1",  # the backbone as the file has it
        "trainer.epochs=1",
    ]
    results = tapefit.run(tapefit.compose(cfg), tmp_path / "run")
    assert 0 <= results["test_accuracy"] <= 1
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    for got, want in zip(model.backbone.weights, source.weights, strict=True):
        np.testing.assert_array_equal(np.array(got), np.array(want), err_msg=want.path)
    images = np.random.default_rng(0).random((2, 36, 40, 3)).astype("float32")
    # VGG16's preprocess_input ("caffe"): RGB to BGR, less ImageNet's mean of each channel
    pixels = keras.ops.image.resize(images * 255.0, (32, 32))[..., ::-1]
    pixels = pixels - np.array([103.939, 116.779, 123.68], "float32")
    features = np.mean(np.asarray(source(pixels)), axis=(1, 2))
    logits = features @ np.asarray(model.logits.kernel) + np.asarray(model.logits.bias)
    want = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(model(images)), want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    ("backbone", "message"),
    [
        (["preset=null", "application=ResNet5"], "application=ResNet5 is not a keras.applications"),
        (
            ["preset=null", "application=MobileNetV2", "weights=no/such.h5"],
            "model.backbone.weights=no/such.h5: no such file",
        ),
        (
            ["preset=null", "application=MobileNetV3Small", "weights={weights}"],
            "does not fit MobileNetV3Small without its top",
        ),
        (["application=MobileNetV2"], "model.backbone.preset and model.backbone.application"),
        (["preset=null", "weights={weights}"], "model.backbone.weights is a keras.applications"),
    ],
)
def test_bad_applications_are_one_line(
    photos_project, application_weights, backbone, message, tmp_path, monkeypatch
):
    monkeypatch.chdir(photos_project)
    weights = application_weights[0]
    overrides = [f"model.backbone.{item.format(weights=weights)}" for item in backbone]
    overrides.append("model.backbone.image_size=[32,32]")
    with pytest.raises(TapefitError, match=message) as error:
        tapefit.run(tapefit.compose([*PHOTOS, *overrides]), tmp_path / "bad")
    assert "\n" not in str(error.value)


MIRRORED = """
import sys
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tapefit

tapefit.run(tapefit.compose(sys.argv[2:]), sys.argv[1])
"""


@pytest.mark.slow
def test_a_backbone_run_mirrors_over_two_devices_in_mixed_bfloat16_with_cutmix(
    photos_project, tmp_path
):
    """In a process of its own: a second MirroredStrategy in the tests' process would reuse
    the session strategy's collective keys (tests/conftest.py). The default experiment's 8
    steps a call run as 1 over 2 replicas, with a warning (keras-team/keras#19246). The same
    run takes two trainer options that act on other parts (the dtype policy, the batches)."""
    import sys

    from tests import processes

    cfg = [*PHOTOS, "model.fine_tuning.freeze_backbone_epochs=1", "trainer.epochs=2"]
    cfg += ["trainer.strategy=mirrored", "trainer.devices=[cpu:0,cpu:1]"]
    cfg += ["trainer.precision=mixed_bfloat16", "model.mixing={kind:cutmix,alpha:1.0}"]
    result = processes.run(
        [sys.executable, "-c", MIRRORED, str(tmp_path / "run"), *cfg],
        cwd=photos_project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "trainer.steps_per_execution=8 runs as 1 over 2 replicas" in result.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["epochs_run"] == 2 and 0 <= metrics["test_accuracy"] <= 1
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    assert model.backbone.compute_dtype == "bfloat16"
    assert model(np.zeros((2, 36, 40, 3), "float32")).dtype == "float32"  # the head's softmax
