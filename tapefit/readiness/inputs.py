"""What the training split feeds a step: whether its shapes change from batch to batch (each
new shape traces the step again, and under XLA compiles it again), and how the `tf.data`
pipeline keeps a GPU fed (prefetch, parallel maps, the autotuner).

Read from the dataset itself: its element spec, and the transformations it is made of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from tapefit.keras_compat import flatten_layers

# Where tokenizers keep the length they pad or cut to: Keras' TextVectorization, keras-hub's
# preprocessors and packers, tapefit's WordPiece layer.
LENGTH_ATTRIBUTES = ("output_sequence_length", "sequence_length")


@dataclass(frozen=True)
class Inputs:
    """The training split's inputs and pipeline.

    Attributes:
        shapes: One line per input: its dtype, shape, and whether its length varies.
        varying: Whether any input's non-batch dimension changes from batch to batch.
        partial_last_batch: The size of the smaller last batch of an epoch, or None.
        pipeline: The transformations, outermost last (`cache -> shuffle -> batch(32) ->
            prefetch(2)`).
        autotune: Whether tf.data's autotuner is on.
    """

    shapes: tuple[str, ...]
    varying: bool
    partial_last_batch: int | None
    pipeline: str
    autotune: bool

    def lines(self) -> list[str]:
        """The report's lines.

        Example:
            >>> Inputs(("float32 (batch, 28, 28, 1)",), False, 16, "batch(32)", False).lines()
            ... # doctest: +NORMALIZE_WHITESPACE
            ['inputs: float32 (batch, 28, 28, 1)',
             'retracing: one shape per batch, but the last batch of an epoch holds 16: one
              more trace (and, under XLA, one more compilation)',
             'input pipeline: batch(32); tf.data autotuner off']
        """
        lines = [f"inputs: {'; '.join(self.shapes)}"]
        if self.varying:
            lines.append(
                "retracing: lengths change from batch to batch: tf.function traces a "
                "shape-generic step after the second length (reduce_retracing), but XLA "
                "compiles each new length again: pad to a fixed length for XLA"
            )
        elif self.partial_last_batch:
            lines.append(
                "retracing: one shape per batch, but the last batch of an epoch holds "
                f"{self.partial_last_batch}: one more trace (and, under XLA, one more "
                "compilation)"
            )
        else:
            lines.append("retracing: none, every batch has one shape")
        autotune = "on" if self.autotune else "off"
        lines.append(f"input pipeline: {self.pipeline}; tf.data autotuner {autotune}")
        return lines


def inputs_of(dataset: tf.data.Dataset, model: Any) -> Inputs:
    """The inputs `dataset` gives `model`'s step.

    Example:
        >>> import numpy as np, keras
        >>> data = tf.data.Dataset.from_tensor_slices((np.zeros((10, 3)), np.zeros(10)))
        >>> inputs_of(data.batch(4).prefetch(2), keras.Sequential()).partial_last_batch
        2
    """
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) and len(spec) >= 2 else spec
    length = tokenized_length(model)
    shapes, varying = [], False
    for leaf in tf.nest.flatten(features):
        dims = ", ".join("batch" if i == 0 else str(d) for i, d in enumerate(leaf.shape))
        line = f"{leaf.dtype.name} ({dims})"
        if leaf.dtype == tf.string:
            line += f", tokenized inside the model to {length} tokens" if length else ""
        elif any(d is None for d in leaf.shape[1:]):
            varying = True
            line += ": its length varies by batch"
        shapes.append(line)
    stages = transformations(dataset)
    return Inputs(
        shapes=tuple(shapes),
        varying=varying,
        partial_last_batch=partial_last_batch(dataset),
        pipeline=" -> ".join(stages) or "as given",
        autotune=bool(dataset.options().autotune.enabled is not False),
    )


def tokenized_length(model: Any) -> int | None:
    """The length the model's tokenizer pads or cuts texts to; None if none is fixed."""
    for layer in flatten_layers(model):
        for name in LENGTH_ATTRIBUTES:
            value = getattr(layer, name, None)
            if isinstance(layer, keras.layers.TextVectorization):  # kept in its config only
                value = layer.get_config().get(name)
            if isinstance(value, int) and value > 0:
                return value
    return None


def _chain(dataset: tf.data.Dataset) -> list[tf.data.Dataset]:
    """The dataset and its inputs, outermost first (first input of each, `_inputs`)."""
    chain = []
    while dataset is not None:
        chain.append(dataset)
        inputs = dataset._inputs() if hasattr(dataset, "_inputs") else []
        dataset = inputs[0] if inputs else None
    return chain


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def transformations(dataset: tf.data.Dataset) -> list[str]:
    """The transformations that matter for speed, innermost first.

    Example:
        >>> data = tf.data.Dataset.range(8).map(lambda x: x, num_parallel_calls=4)
        >>> transformations(data.batch(2).prefetch(tf.data.AUTOTUNE))
        ['map(parallel 4)', 'batch(2)', 'prefetch(autotuned)']
    """
    named = []
    for stage in reversed(_chain(dataset)):
        kind = type(stage).__name__.strip("_").replace("Dataset", "")
        if kind == "Prefetch":
            size = _number(stage._buffer_size)
            named.append(f"prefetch({'autotuned' if size == -1 else size})")
        elif kind in ("Batch", "ParallelBatch", "PaddedBatch"):
            named.append(f"{kind[0].lower() + kind[1:]}({_number(stage._batch_size)})")
        elif kind == "ParallelMap":
            calls = _number(stage._num_parallel_calls)
            named.append(f"map(parallel {'autotuned' if calls == -1 else calls})")
        elif kind in ("Map", "Cache", "Shuffle", "Interleave", "ParallelInterleave"):
            named.append(kind.lower())
    return named


def partial_last_batch(dataset: tf.data.Dataset) -> int | None:
    """The size of an epoch's smaller last batch, when the batching keeps one; None if every
    batch is full or the count is unknown."""
    for stage in _chain(dataset):
        if type(stage).__name__.strip("_") in ("BatchDataset", "PaddedBatchDataset"):
            if bool(stage._drop_remainder):
                return None
            elements = _number(stage._inputs()[0].cardinality())
            size = _number(stage._batch_size)
            if elements is None or elements < 0 or not size:
                return None
            return elements % size or None
    return None
