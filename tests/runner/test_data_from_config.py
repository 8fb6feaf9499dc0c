"""`tapefit.runner.data_from_config`: the `data` node checked, then called for the run's data."""

import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf

from tapefit.errors import TapefitError
from tapefit.runner.data_from_config import (
    check_data,
    data_options,
    ignored_data_keys,
    load_checked_data,
    load_data,
    owned_keys,
)

LOADER = "tests.runner.test_data_from_config.arrays"


def arrays(rows: int, seed: int):
    """A user's loader: train and test arrays, no validation split, `seed` from the run."""
    x = np.random.default_rng(seed).normal(size=(rows, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    return {"train": (x, y), "test": (x[:4], y[:4])}


def datasets(batch_size: int):
    """A user's loader that returns batched `tf.data.Dataset`s."""
    x = np.zeros((8, 3), "float32")
    split = tf.data.Dataset.from_tensor_slices((x, np.zeros(8, "int32"))).batch(batch_size)
    return {"train": split, "validation": split}


def node(**keys):
    return OmegaConf.create({"_target_": LOADER, **keys})


def test_a_loaders_arrays_become_pipelines_with_tapefits_own_keys():
    data = load_data(node(rows=40, batch_size=8, val_fraction=0.25), seed=3)
    assert data.sizes == {"train": 30, "val": 10, "test": 4}
    assert [int(y.shape[0]) for _, y in data.train] == [8, 8, 8, 6]
    again = load_data(node(rows=40, batch_size=8, val_fraction=0.25), seed=3)
    np.testing.assert_array_equal(data.arrays["val"][0], again.arrays["val"][0])


def test_the_keys_tapefit_owns_are_those_the_loader_does_not_take():
    assert owned_keys(arrays) == ("batch_size", "shuffle", "cache", "val_fraction")
    assert owned_keys(datasets) == ("shuffle", "cache", "val_fraction")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"rows": 4, "colour": "red"}, r"colour"),
        ({"rows": 4, "batch_size": 0}, r"data.batch_size=0 must be at least 1"),
        ({"rows": 4, "val_fraction": 1.0}, r"data.val_fraction=1.0 must lie in \[0, 1\)"),
        ({"rows": 4, "shuffle": "sometimes"}, r"^data.shuffle"),
    ],
)
def test_a_node_that_cannot_load_is_refused_in_one_line(keys, message):
    with pytest.raises(TapefitError, match=message) as refused:
        check_data(node(**keys))
    assert "\n" not in str(refused.value)
    with pytest.raises(TapefitError, match=message):
        load_data(node(**keys), seed=0)  # not checked before: checked as it loads


def test_a_node_without_a_target_names_the_fix():
    with pytest.raises(TapefitError, match=r"data needs _target_: .*data=digits"):
        load_data(OmegaConf.create({"batch_size": 4}), seed=0)


def test_a_checked_node_loads_without_being_checked_again(monkeypatch):
    import tapefit.config.targets

    def refuse(*args, **kwargs):
        raise AssertionError("checked again")

    monkeypatch.setattr(tapefit.config.targets, "checked_target", refuse)
    assert load_checked_data(node(rows=10, val_fraction=0.0), seed=0).sizes["train"] == 10


def test_keys_that_cannot_act_on_returned_datasets_are_named_with_the_fix():
    data = node(batch_size=4, shuffle=True, cache=False, val_fraction=0.2)
    ignored = ignored_data_keys(data, datasets(4), False, owned_keys(arrays))
    assert sorted(ignored) == ["batch_size", "cache", "shuffle", "val_fraction"]
    assert "give it a batch_size argument" in ignored["batch_size"]
    assert ignored_data_keys(data, datasets(4), True, owned_keys(datasets)) == {
        key: ignored[key] for key in ("cache", "shuffle", "val_fraction")
    }


def test_the_options_default_to_the_schemas():
    options = data_options(OmegaConf.create({}))
    assert (options.batch_size, options.shuffle, options.cache, options.val_fraction) == (
        32,
        True,
        True,
        0.1,
    )
