"""The `tf.data` recipe every split shares: cache, shuffle (seeded), batch, prefetch."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

# In-memory slices need no tuning: two batches ahead keep the step fed. tf.data's autotuner
# is off because its background thread made each iterator's teardown wait 3-13 s after the
# last batch of an epoch (TensorFlow 2.21; docs/explanation/benchmark.md, "Fast defaults").
PREFETCH_BATCHES = 2


def pipeline_options() -> tf.data.Options:
    """tf.data options for in-memory pipelines: the autotuner off (see above)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options


def make_pipeline(
    arrays: Any,
    batch_size: int,
    *,
    shuffle: bool,
    seed: int,
    cache: bool = True,
    repeat: bool = False,
) -> tf.data.Dataset:
    """Turn in-memory arrays (a tuple of features and labels) into a batched, prefetched dataset.

    Training splits are reshuffled each epoch from `seed`, so runs with the same seed see the
    same batches in the same order. `repeat=True` makes an endless stream (benchmarks, or
    `fit` with `steps_per_epoch`).
    """
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    if cache:
        dataset = dataset.cache()
    if repeat:
        dataset = dataset.repeat()
    if shuffle:
        size = len(tf.nest.flatten(arrays)[0])
        dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(PREFETCH_BATCHES).with_options(pipeline_options())
