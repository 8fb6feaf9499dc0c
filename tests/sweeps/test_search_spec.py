"""The search's specification (`tapefit.sweeps.spec`, `SearchSpec.of`): the composed config
turned once, at the sweep's edge, into frozen typed settings; what cannot be searched is refused
with the search's own messages."""

import dataclasses

import pytest

from tapefit import TapefitError
from tapefit.config.schemas import ParamType, Pruner, Sampler, Sampling, SpaceEntry, TuneAlgorithm
from tapefit.objective import Objective
from tapefit.sweeps.spec import SearchSpec


def test_the_settings_are_taken_from_the_composed_config(compose):
    cfg = compose(
        [
            "tune=optuna",
            "tune.max_trials=7",
            "tune.sampler=random",
            "tune.pruner=hyperband",
            "seed=3",
            "trainer.epochs=2",
            "trainer.verbose=0",
            "force_resume=true",
        ]
    )
    spec = SearchSpec.of(cfg)
    assert spec.tune.algorithm is TuneAlgorithm.optuna and spec.tune.max_trials == 7
    assert spec.tune.sampler is Sampler.random and spec.tune.pruner is Pruner.hyperband
    assert (spec.seed, spec.tune_seed, spec.epochs, spec.verbose) == (3, 3, 2, 0)
    assert spec.experiment_name == "classifier" and spec.force_resume is True
    assert spec.objective == Objective("val_accuracy", "max")
    assert spec.logger is None and spec.config is cfg  # handed on unread, not copied
    assert list(spec.tune.space) == list(cfg.tune.space)  # the entries, in order, typed
    rate = spec.tune.space["optimizer.learning_rate"]
    assert isinstance(rate, SpaceEntry) and rate.type is ParamType.float
    assert rate.sampling is Sampling.log and (rate.min, rate.max) == (1e-4, 1e-2)
    assert spec.tune.space["model.architecture"].values == ["mlp", "cnn"]
    assert spec.tune.space["model.dropout"].when == {"model.architecture": ["cnn"]}
    assert spec.configured["model.architecture"] == "cnn"  # the config's own value
    assert SearchSpec.of(compose(["tune=random", "tune.seed=5"])).tune_seed == 5


def test_a_searched_argument_the_config_does_not_list_is_named_unlisted(compose):
    cfg = compose(["tune=random"])
    cfg.tune.space = {
        "model.dropout": SpaceEntry(type="float", min=0.1, max=0.5),
        "model.num_classes": SpaceEntry(type="choice", values=[10]),  # the data supplies it
    }
    spec = SearchSpec.of(cfg)
    assert spec.configured == {"model.dropout": 0.5, "model.num_classes": None}
    assert spec.unlisted == {"model.num_classes"}


def test_the_specification_is_frozen(compose):
    spec = SearchSpec.of(compose(["tune=random"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1  # type: ignore[misc]


def test_an_objective_without_a_known_direction_is_refused_with_the_existing_message(compose):
    cfg = compose(["tune=random", "objective=val_agreement"])
    expected = (
        "cannot tell whether val_agreement is better higher or lower: set objective_direction=max"
    )
    with pytest.raises(TapefitError, match=expected):
        SearchSpec.of(cfg)
    cfg.objective_direction = "max"
    assert SearchSpec.of(cfg).objective.direction == "max"
