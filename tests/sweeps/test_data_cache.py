"""`tapefit.sweeps.data_cache`: a search's trials load their data once."""

import numpy as np

import tapefit
from tapefit.sweeps.data_cache import DataCache


def batch_sizes(data):
    return [int(y.shape[0]) for _, y in data.train]


def test_a_trial_that_changes_only_the_batch_size_gets_the_loaded_arrays_in_new_pipelines():
    cfg = tapefit.compose(["data.train_limit=64", "data.batch_size=32"])
    cache = DataCache(keep=2)
    first = cache(cfg.data, cfg.seed)
    cfg.data.batch_size = 16
    second = cache(cfg.data, cfg.seed)
    assert second is not first and second.splits is first.splits  # not loaded again
    assert batch_sizes(first) == [32, 32] and batch_sizes(second) == [16] * 4
    first_labels = np.concatenate([y for _, y in first.train])
    second_labels = np.concatenate([y for _, y in second.train])
    np.testing.assert_array_equal(first_labels, second_labels)  # the same first shuffle
    assert len(cache.loaded) == 1


def test_other_options_or_another_seed_load_again_and_the_oldest_is_dropped():
    cfg = tapefit.compose(["data.train_limit=64"])
    cache = DataCache(keep=2)
    first = cache(cfg.data, 0)
    assert cache(cfg.data, 1).splits is not first.splits
    limited = cfg.data.copy()
    limited.train_limit = 48
    assert cache(limited, 0).sizes["train"] == 48
    assert len(cache.loaded) == 2  # the first was dropped: it loads again
    assert cache(cfg.data, 0).splits is not first.splits
