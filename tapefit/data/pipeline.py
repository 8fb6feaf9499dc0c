"""The `tf.data` recipe every split shares: cache, shuffle (seeded), batch, prefetch."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def make_pipeline(
    arrays: Any,
    batch_size: int,
    *,
    shuffle: bool,
    seed: int,
    cache: bool = True,
) -> tf.data.Dataset:
    """Turn in-memory arrays (a tuple of features and labels) into a batched, prefetched dataset.

    Training splits are reshuffled each epoch from `seed`, so runs with the same seed see the
    same batches in the same order.
    """
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    if cache:
        dataset = dataset.cache()
    if shuffle:
        size = len(tf.nest.flatten(arrays)[0])
        dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
