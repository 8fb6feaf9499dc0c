"""A resume continues the same run (`check_same_config`): a checkpointed config that differs in
anything but how long, how chatty and where it is tracked is refused in one line that names
what differs, unless `force_resume`."""

import pytest

from tapefit.checkpointing.config_match import MAY_DIFFER, check_same_config
from tapefit.errors import TapefitError

SAVED = {
    "seed": 0,
    "model._target_": "tapefit.models.Classifier",
    "model.architecture": "mlp",
    "trainer.epochs": 3,
    "trainer.verbose": 1,
    "resume": False,
    "force_resume": False,
    "logger._target_": "tapefit.training.tracking.MLflowTracker",
    "logger.tracking_uri": "sqlite:///a.db",
}


def refusal(saved, current, **kwargs) -> str:
    with pytest.raises(TapefitError) as refused:
        check_same_config(saved, current, force=False, **kwargs)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def test_length_chattiness_the_resume_switches_and_the_tracker_may_differ():
    assert MAY_DIFFER == ("trainer.epochs", "trainer.verbose", "resume", "force_resume")
    current = {
        **SAVED,
        "trainer.epochs": 10,
        "trainer.verbose": 0,
        "resume": True,
        "force_resume": True,
        "logger.tracking_uri": "sqlite:///b.db",  # the `logger` group, whole
    }
    del current["logger._target_"]
    check_same_config(SAVED, current, force=False)
    check_same_config(SAVED, dict(SAVED), force=False)


def test_a_different_value_is_refused_naming_the_key_and_both_values():
    assert refusal(SAVED, {**SAVED, "seed": 1, "model.architecture": "cnn"}) == (
        "resume refused: the config differs from the checkpointed run's in "
        "model.architecture ('mlp' -> 'cnn'), seed (0 -> 1); resume with the same overrides, "
        "or add force_resume=true"
    )


def test_a_key_only_one_side_has_differs_and_six_keys_at_most_are_named():
    assert "in model.units (None -> 8);" in refusal(SAVED, {**SAVED, "model.units": 8})
    assert "in data.noise (0.1 -> None);" in refusal({**SAVED, "data.noise": 0.1}, SAVED)
    many = {**SAVED, **{f"model.k{i}": i for i in range(8)}}
    message = refusal(SAVED, many)
    assert "model.k5 (None -> 5);" in message and "model.k6" not in message  # sorted, six


def test_force_resume_compares_nothing():
    check_same_config(SAVED, {**SAVED, "seed": 1}, force=True)
    check_same_config({"model.name": "cnn"}, SAVED, force=True)


def test_the_keys_that_may_differ_can_be_given():
    check_same_config({"seed": 0}, {"seed": 1}, force=False, may_differ=("seed",))
    message = refusal({"trainer.epochs": 3}, {"trainer.epochs": 4}, may_differ=("seed",))
    assert "trainer.epochs (3 -> 4)" in message


def test_a_run_checkpointed_with_other_keys_is_refused_by_the_keys():
    message = refusal({"model.name": "cnn", "seed": 0}, {**SAVED, "seed": 0})
    assert message.startswith("resume refused: the config differs from the checkpointed run's in")
    assert "model.name ('cnn' -> None)" in message and message.endswith("force_resume=true")
