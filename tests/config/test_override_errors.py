"""`tapefit.config.override_errors`: Hydra's refusal of an override naming no key, in one line."""

import pytest
from hydra import compose, initialize_config_dir

from tapefit.config.override_errors import misspelt_override_line
from tapefit.config.schemas import config_dir
from tapefit.runner.composition import register_schemas


def refusal(override):
    """What Hydra's own composition raises for `override`."""
    register_schemas()
    with (
        initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"),
        pytest.raises(Exception) as refused,
    ):
        compose(config_name="config", overrides=[override])
    return refused.value


def test_a_misspelt_key_of_a_typed_group_names_the_closest_key_and_the_nodes_keys():
    line = misspelt_override_line(refusal("trainer.epoch=3"))
    assert line.startswith(
        "trainer.epoch is not a config key (did you mean trainer.epochs?): fix the override; "
        "trainer has allow_missing_gradients, "
    )
    assert "\n" not in line and "+trainer" not in line  # a schema's keys cannot be added


def test_an_unknown_argument_of_a_target_node_says_how_to_add_it():
    line = misspelt_override_line(refusal("optimizer.lr=3"))
    assert line.startswith("optimizer.lr is not a config key: fix the override; optimizer has")
    assert line.endswith("(to give optimizer a new argument, add it with +optimizer.lr=VALUE)")
    assert misspelt_override_line(refusal("foo=1")).startswith(
        "foo is not a config key: fix the override; the root has callbacks, checkpoint,"
    )


@pytest.mark.parametrize("override", ["~trainer.nothing", "trainer.epochs=abc"])
def test_other_refusals_are_left_to_hydra(override):
    assert misspelt_override_line(refusal(override)) is None
