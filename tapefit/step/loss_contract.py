"""What the step's loss contract counts: the replicas a step runs on (a loss written as on one
device is divided by them when differentiated) and the samples a batch holds (the weight of
its loss in the running `loss` metric)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def replicas_in_sync() -> int:
    """How many replicas the current `tf.distribute` strategy runs (1 outside any).

    Returns:
        The number of replicas.

    Examples:
        >>> replicas_in_sync()
        1
    """
    return tf.distribute.get_strategy().num_replicas_in_sync


def batch_size_of(x: Any) -> Any:
    """The number of samples in a (possibly nested) batch of inputs.

    Args:
        x: A batch of inputs: a tensor, or a structure of them (None entries skipped).

    Returns:
        The first dimension of the first tensor, as a scalar tensor.

    Examples:
        >>> int(batch_size_of((None, tf.zeros((4, 2)))))
        4
    """
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    return tf.shape(first)[0]
