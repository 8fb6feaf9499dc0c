"""`tapefit.config.snapshot`: the config as flat `dotted.key: value` pairs."""

from omegaconf import OmegaConf

import tapefit
from tapefit.config.snapshot import config_snapshot


def test_nested_keys_flatten_resolved_with_enums_as_names_and_lists_kept():
    cfg = OmegaConf.create({"a": {"b": {"c": 1}, "d": "${a.b.c}"}, "e": [1, 2], "f": None, "g": {}})
    assert config_snapshot(cfg) == {"a.b.c": 1, "a.d": 1, "e": [1, 2], "f": None}


def test_the_composed_config_snapshot_holds_every_setting_as_plain_values():
    snapshot = config_snapshot(tapefit.compose(["trainer.epochs=2", "debug=overfit"]))
    assert snapshot["trainer.epochs"] == 2 and snapshot["debug.mode"] == "overfit"
    assert all(
        isinstance(value, (str, int, float, bool, list, type(None))) for value in snapshot.values()
    )
