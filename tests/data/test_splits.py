"""The data contract of a `data._target_` loader: every form of split `fit` takes becomes a
pipeline, a missing validation split is split off by `val_fraction` with the run's seed, a
dataset is used as built, and everything else is a one-line error."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit.data.splits import PipelineOptions, splits_from_loader
from tapefit.errors import TapefitError

OPTIONS = PipelineOptions(batch_size=8, shuffle=True, cache=True, val_fraction=0.25)


def arrays(n=40, features=3):
    x = np.arange(n * features, dtype="float32").reshape(n, features)
    return x, x[:, :1] * 2


def rows(dataset):
    """Every sample of a batched dataset's first component, in order."""
    batches = [tf.nest.flatten(batch)[0].numpy() for batch in dataset]
    return np.concatenate(batches)


def test_x_y_arrays_are_batched_and_a_seeded_validation_split_is_taken_off():
    splits = splits_from_loader({"train": arrays()}, "load", OPTIONS, seed=3)
    assert splits.sizes == {"train": 30, "val": 10}
    assert splits.test is None
    train, val = rows(splits.train), rows(splits.val)
    assert len(set(map(tuple, train)) | set(map(tuple, val))) == 40  # a partition of the 40
    again = splits_from_loader({"train": arrays()}, "load", OPTIONS, seed=3)
    np.testing.assert_array_equal(rows(again.val), val)  # the same seed, the same split
    other = splits_from_loader({"train": arrays()}, "load", OPTIONS, seed=4)
    assert not np.array_equal(np.sort(rows(other.val), axis=0), np.sort(val, axis=0))
    first, second = rows(splits.train), rows(splits.train)
    assert not np.array_equal(first, second)  # reshuffled every epoch
    assert next(iter(splits.train))[0].shape == (8, 3)


def test_every_form_fit_takes_is_accepted():
    x, y = arrays()
    weights = np.ones(40, "float32")
    forms = {
        "x": x,
        "x, y, sample_weight": (x, y, weights),
        "list": [x, y],
        "dict of inputs": ({"a": x, "b": x[:, :2]}, y),
    }
    for name, form in forms.items():
        splits = splits_from_loader(
            {"train": form, "validation": form, "test": form}, "load", OPTIONS, seed=0
        )
        assert splits.sizes == {"train": 40, "val": 40, "test": 40}, name
        element = splits.train.element_spec
        assert tf.nest.flatten(element)[0].shape[1:] == tf.nest.flatten(form)[0].shape[1:]


def test_a_dataset_is_used_as_the_loader_built_it():
    x, y = arrays()
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(5)
    validation = tf.data.Dataset.from_tensor_slices((x, y)).batch(5)
    splits = splits_from_loader({"train": train, "val": validation}, "load", OPTIONS, seed=0)
    np.testing.assert_array_equal(rows(splits.train), x)  # not re-batched, not shuffled
    assert next(iter(splits.train))[0].shape == (5, 3)
    assert splits.sizes == {"train": None, "val": None}
    rebuilt = splits.rebuilt(batch_size=4)
    assert next(iter(rebuilt.train))[0].shape == (5, 3)


def test_rebuilt_changes_the_batch_size_of_array_splits_only():
    splits = splits_from_loader({"train": arrays()}, "load", OPTIONS, seed=0)
    rebuilt = splits.rebuilt(batch_size=16)
    assert next(iter(rebuilt.train))[0].shape == (16, 3)
    np.testing.assert_array_equal(rows(rebuilt.val), rows(splits.val))


def test_no_validation_with_val_fraction_zero():
    options = PipelineOptions(batch_size=8, val_fraction=0.0)
    splits = splits_from_loader({"train": arrays()}, "load", options, seed=0)
    assert splits.val is None and splits.sizes == {"train": 40}


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ([1, 2], "returned list, not a mapping of splits"),
        ({"validation": arrays()}, "returned no 'train' split"),
        ({"train": arrays(), "holdout": arrays()}, "split named 'holdout'"),
        ({"train": (1, 2, 3, 4)}, "is a tuple of 4"),
        ({"train": (np.zeros((4, 2)), np.zeros(3))}, "arrays of different lengths [3, 4]"),
        ({"train": np.array([[1], [1, 2]], dtype=object)}, "ragged or mixed-type"),
        (
            {"train": (np.zeros((2, 3)), np.array(["up", "down"], dtype=object))},
            "holds strings in an object array (e.g. 'up'): give labels as numbers",
        ),
        ({"train": 5.0}, "holds no arrays with a sample axis"),
        ({"train": np.zeros((0, 2))}, "'train' is empty"),
        (
            {"train": tf.data.Dataset.from_tensor_slices(np.zeros((4, 2))).batch(2)},
            "cannot split",
        ),
        ({"train": (np.zeros((2, 2)), np.zeros((2, 1)))}, "leaves no validation samples"),
    ],
)
def test_what_breaks_the_contract_is_one_line(returned, message):
    with pytest.raises(TapefitError, match=r"^load ") as error:
        splits_from_loader(returned, "load", OPTIONS, seed=0)
    assert message in str(error.value) and "\n" not in str(error.value)
