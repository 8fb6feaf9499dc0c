"""`TargetSpec`: a `_target_` node as a typed object, built with or without the checks."""

import pytest
from omegaconf import OmegaConf

from tapefit import TapefitError
from tapefit.config.target_spec import TargetSpec


def test_a_node_becomes_plain_resolved_arguments_without_its_own_and_missing_keys():
    cfg = OmegaConf.create(
        {
            "rate": 0.25,
            "node": {
                "_target_": "keras.optimizers.SGD",
                "learning_rate": "${rate}",
                "momentum": "???",  # left for something else to supply
                "enabled": True,
            },
        }
    )
    spec = TargetSpec.of(cfg.node, "optimizer", exclude=("enabled",), checked=True)
    assert spec == TargetSpec("optimizer", "keras.optimizers.SGD", {"learning_rate": 0.25}, True)
    assert spec.node() == {"_target_": "keras.optimizers.SGD", "learning_rate": 0.25}


def test_an_unchecked_spec_is_refused_in_one_line_a_checked_one_is_built_as_it_is():
    spec = TargetSpec("optimizer", "keras.optimizers.SGD", {"learning_rat": 0.1})
    with pytest.raises(TapefitError, match=r"optimizer.learning_rat: SGD takes no argument"):
        spec.build()
    # the run's checks passed it: no second check, and the class's own error is one line
    checked = TargetSpec("optimizer", "keras.optimizers.SGD", {"learning_rat": 0.1}, True)
    with pytest.raises(TapefitError, match=r"optimizer: SGD\(\.\.\.\) raised ValueError"):
        checked.build()


def test_what_tapefit_adds_is_passed_beside_the_arguments():
    spec = TargetSpec("scheduler", "tapefit.training.schedules.linear", {}, checked=True)
    schedule = spec.build(learning_rate=1.0, total_steps=11, steps_per_epoch=None)
    assert [float(schedule(step)) for step in (0, 10)] == [1.0, 0.0]


def test_a_located_target_is_built_without_importing_its_path_again():
    class Built:
        def __init__(self, size, scale=1):
            self.size, self.scale = size, scale

    spec = TargetSpec("model", "nowhere.Built", {"size": 3}, checked=True, located=Built)
    built = spec.build(scale=2)  # "nowhere" is no module: the path is not imported
    assert isinstance(built, Built) and (built.size, built.scale) == (3, 2)
    unchecked = TargetSpec("model", "nowhere.Built", {"sise": 3}, located=Built)
    with pytest.raises(TapefitError, match=r"model.sise: .*Built takes no argument 'sise'"):
        unchecked.build()
