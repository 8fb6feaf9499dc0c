"""The optimizer and scheduler nodes' checks, on configs composed as the CLI composes them."""

import pytest

from tapefit.config.target_spec import TargetSpec
from tapefit.errors import TapefitError
from tapefit.runner.optimizer_checks import (
    changes_learning_rate,
    check_optimizer_node,
    check_optimizers,
    check_scheduler,
    optimizer_nodes,
)
from tapefit.training.optimizers import build_optimizer
from tapefit.training.schedules import CONSTANT


def refusal(check, *args) -> str:
    with pytest.raises(TapefitError) as refused:
        check(*args)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def test_only_a_constant_rate_without_warmup_leaves_the_learning_rate_alone():
    assert changes_learning_rate(None) is False
    assert changes_learning_rate({"_target_": CONSTANT, "warmup_steps": 0}) is False
    assert changes_learning_rate({"_target_": CONSTANT, "warmup_steps": 3}) is True
    assert changes_learning_rate({"_target_": CONSTANT, "warmup_fraction": 0.1}) is True
    cosine = {"_target_": "tapefit.training.schedules.cosine", "warmup_steps": 0}
    assert changes_learning_rate(cosine) is True


def test_the_optimizer_nodes_are_the_named_ones_or_the_one(compose):
    assert list(optimizer_nodes(compose([]))) == ["optimizer"]
    named = compose(["+optimizers.critic._target_=keras.optimizers.SGD"])
    assert list(optimizer_nodes(named)) == ["optimizers.critic"]


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"learning_rate": 0.1}, "optimizers.g needs _target_: the optimizer class to build"),
        ({"_target_": "keras.optimizers.Adam", "ema": "often"}, "optimizers.g.ema=often must be"),
        (
            {"_target_": "keras.optimizers.Adam", "learning_rate": -1.0},
            "optimizers.g.learning_rate=-1.0 must be > 0",
        ),
        (
            {"_target_": "keras.optimizers.Adam", "beta1": 0.5},
            "optimizers.g.beta1: Adam takes no argument 'beta1' "
            "(did you mean optimizers.g.beta_1?)",
        ),
    ],
)
def test_a_bad_optimizer_node_is_refused_by_its_key(node, message):
    assert refusal(check_optimizer_node, node, "optimizers.g").startswith(message)


def test_every_named_optimizer_is_checked(compose):
    cfg = compose(["+optimizers.critic._target_=keras.optimizers.SGD", "+optimizers.g.lr=1"])
    assert refusal(check_optimizers, cfg).startswith("optimizers.g needs _target_")


def test_a_name_names_the_optimizer_and_nothing_else(compose):
    """`name` is an argument of every Keras optimizer: it renames the one `_target_` builds."""
    cfg = compose(["+optimizer.name=sgd"])
    check_optimizers(cfg)
    optimizer = build_optimizer(TargetSpec.of(cfg.optimizer, "optimizer"))
    assert type(optimizer).__name__ == "Adam" and optimizer.name == "sgd"


def test_a_schedule_beside_another_hand_on_the_learning_rate_is_refused(compose):
    check_scheduler(compose(["scheduler=cosine"]))  # ReduceLROnPlateau is off by default
    plateau = compose(["scheduler=cosine", "callbacks.reduce_lr_on_plateau.enabled=true"])
    assert "and ReduceLROnPlateau both set the learning rate: choose one" in refusal(
        check_scheduler, plateau
    )
    twice = compose(["scheduler=cosine"])
    twice.optimizer.learning_rate = {"_target_": "keras.optimizers.schedules.ExponentialDecay"}
    assert "optimizer.learning_rate is a schedule and scheduler._target_=" in refusal(
        check_scheduler, twice
    )


def test_a_constant_rate_stays_beside_reduce_lr_on_plateau(compose):
    check_scheduler(compose(["scheduler=constant", "callbacks.reduce_lr_on_plateau.enabled=true"]))
    bad = compose(["scheduler=constant", "+scheduler.warmup_stepz=3"])
    assert "scheduler.warmup_stepz" in refusal(check_scheduler, bad)
