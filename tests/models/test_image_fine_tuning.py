"""`tapefit.models.image_fine_tuning`: the backbone and fine-tuning settings' checks, the
`model.augment` check, and the callback that ends the frozen epochs."""

import logging
from types import SimpleNamespace

import keras
import pytest

from tapefit.errors import TapefitError
from tapefit.models.image_fine_tuning import (
    BackboneUnfreezing,
    check_settings,
    checked_augmentation,
)


def test_settings_that_can_work_pass():
    check_settings(
        {"preset": "checkpoints/vit", "image_size": [32, 32], "pooling": "cls"},
        {"freeze_backbone_epochs": 2, "unfreeze_top_layers": 1, "backbone_training": False},
    )
    check_settings({"application": "ResNet50", "weights": "resnet.h5"}, {})


@pytest.mark.parametrize(
    ("backbone", "fine_tuning", "message"),
    [
        (
            {"preset": "p"},
            {"freeze_epochs": 1},
            "model.fine_tuning.freeze_epochs is not a key of model.fine_tuning: it takes "
            "freeze_backbone_epochs, unfreeze_top_layers, backbone_training",
        ),
        (
            {"preset": "p", "application": "ResNet50"},
            {},
            "model.backbone.preset and model.backbone.application both name a backbone: set one",
        ),
        (
            {"preset": "p", "weights": "w.h5"},
            {},
            "model.backbone.weights is a keras.applications model's weights file: set "
            "model.backbone.application too",
        ),
        (
            {"preset": "p"},
            {"freeze_backbone_epochs": -1},
            "model.fine_tuning.freeze_backbone_epochs=-1 must be at least 0",
        ),
        (
            {"preset": "p"},
            {"unfreeze_top_layers": 0},
            "model.fine_tuning.unfreeze_top_layers=0 must be at least 1 (null: all layers)",
        ),
    ],
    ids=[
        "unknown_key",
        "preset_and_application",
        "weights_without_application",
        "negative",
        "zero",
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(backbone, fine_tuning, message):
    with pytest.raises(TapefitError) as error:
        check_settings(backbone, fine_tuning)
    assert str(error.value).startswith(message)


def test_the_first_unknown_key_in_sorted_order_is_named():
    with pytest.raises(
        TapefitError, match=r"^model\.backbone\.depth is not a key of model\.backbone"
    ):
        check_settings({"preset": "p", "width": 2, "depth": 3}, {})


def test_a_null_count_of_frozen_epochs_means_none():
    check_settings({"preset": "p"}, {"freeze_backbone_epochs": None, "unfreeze_top_layers": None})


def test_an_augmentation_layer_is_returned_as_it_is():
    flip = keras.layers.RandomFlip("horizontal")
    assert checked_augmentation(flip) is flip


def test_an_augmentation_that_is_not_a_layer_shows_how_to_name_one():
    with pytest.raises(TapefitError, match=r"model\.augment: \{'mode': 'horizontal'\} is not a"):
        checked_augmentation({"mode": "horizontal"})


class TwoPhaseModel:
    """What `BackboneUnfreezing` uses of a `BackboneClassifier`, recording its calls."""

    def __init__(self, frozen_epochs, trainable=True):
        self.frozen_epochs = frozen_epochs
        self.backbone = SimpleNamespace(trainable=trainable)
        self.calls = []

    def set_backbone_frozen(self, frozen):
        self.backbone.trainable = not frozen
        self.calls.append(("frozen", frozen))

    def make_train_function(self, force=False):
        self.calls.append(("traced", force))

    def tunable_variables(self):
        return ["head"], ["kernel", "bias", "gamma"]


def unfreezing(model):
    callback = BackboneUnfreezing()
    callback.set_model(model)
    return callback


def test_the_backbone_is_frozen_for_the_first_epochs_then_unfrozen_once(caplog):
    model = TwoPhaseModel(frozen_epochs=2)
    callback = unfreezing(model)
    trainable = []
    with caplog.at_level(logging.INFO, logger="tapefit"):
        for epoch in range(4):
            callback.on_epoch_begin(epoch)
            trainable.append(model.backbone.trainable)
    assert trainable == [False, False, True, True]
    assert model.calls == [("frozen", True), ("traced", True), ("frozen", False), ("traced", True)]
    assert [r.getMessage() for r in caplog.records] == [
        "epoch 3: backbone unfrozen after 2 head-only epochs: 3 of its variables train from now on"
    ]


def test_a_run_resumed_past_the_frozen_epochs_unfreezes_at_its_first_epoch():
    model = TwoPhaseModel(frozen_epochs=2, trainable=False)  # as the model was saved
    unfreezing(model).on_epoch_begin(5)
    assert model.backbone.trainable and model.calls == [("frozen", False), ("traced", True)]


def test_without_frozen_epochs_a_trainable_backbone_is_left_alone():
    model = TwoPhaseModel(frozen_epochs=0)
    callback = unfreezing(model)
    for epoch in range(2):
        callback.on_epoch_begin(epoch)
    assert model.backbone.trainable and model.calls == []
