"""`tapefit.runner.model_from_config`: the `model` node located, checked and its defaults."""

import pytest
from omegaconf import OmegaConf

import tapefit
from tapefit.errors import TapefitError
from tapefit.models import Classifier, SiameseModel
from tapefit.runner.model_from_config import check_model, default_objective, model_class


def test_the_model_class_is_located_and_a_node_without_target_names_the_fix():
    assert model_class(OmegaConf.create({"_target_": "tapefit.models.Classifier"})) is Classifier
    with pytest.raises(TapefitError, match=r"^model needs _target_: .*model=classifier"):
        model_class(OmegaConf.create({"units": 3}))


def test_a_class_that_is_not_a_tape_model_is_refused():
    node = OmegaConf.create({"_target_": "keras.layers.Dense", "units": 3})
    with pytest.raises(TapefitError, match=r"keras.layers.Dense is not a tapefit.TapeModel"):
        check_model(node, OmegaConf.create({}))


def test_an_argument_the_model_does_not_take_is_named():
    cfg = tapefit.compose(["+model.colour=red"])
    with pytest.raises(TapefitError, match=r"^model.colour: Classifier takes no argument 'colour'"):
        check_model(cfg.model, cfg.data)


def test_the_default_objective_is_the_models_own_or_val_loss():
    assert default_objective(tapefit.compose([]).data, Classifier) == "val_accuracy"
    siamese = tapefit.compose(["experiment=siamese"])
    assert default_objective(siamese.data, SiameseModel) == "val_spearman"
    assert default_objective(OmegaConf.create({}), tapefit.TapeModel) == "val_loss"
