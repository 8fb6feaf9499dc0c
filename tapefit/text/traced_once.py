"""Tokenisation traced once per layer: one TensorFlow graph that every traced step calls.

A tokenizer inside a model (a pretrained encoder's WordPiece, with its regex split and ragged
tensors) is graph code of its own, a large one: in a one-layer BERT's training step it was
some 2,100 of the 9,400 operations TensorFlow traced, and the train step, the test step and a
step traced again each traced it anew, under the gradient tape too (every assertion of its
ragged tensors was wrapped for gradients that strings never have). `TracedOnce` traces it
once, for strings of any batch size, and each step then calls that graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

STRINGS = tf.TensorSpec([None], tf.string)


class TracedOnce:
    """A layer's function of a batch of strings, as one graph traced once.

    The graph is traced at the first call in graph mode (`texts` of shape `(batch,)`); every
    later traced call (another step) calls that graph.

    Eagerly the function runs as it is (eager results, no graph). The holder is a plain
    object, so neither Keras' tracking nor a SavedModel export takes the graph for the
    layer's own function, and a copied layer gets an empty holder (it traces its own).

    Examples:
        >>> import tensorflow as tf
        >>> once = TracedOnce()
        >>> lengths = lambda texts: tf.strings.length(texts)
        >>> step = tf.function(lambda texts: once(lengths, texts) + 1)
        >>> [int(n) for n in step(tf.constant(["ab", "abc"]))]
        [3, 4]
        >>> [int(n) for n in once(lengths, ["a"])]  # eagerly: the function itself
        [1]
    """

    def __init__(self) -> None:
        self._graph: Any = None

    def __call__(self, function: Callable[[tf.Tensor], Any], texts: Any) -> Any:
        """`function(texts)`, through the graph traced at the first call in graph mode.

        Args:
            function: Strings `(batch,)` -> tensors (token ids, masks), creating no
                variables; the same function at every call.
            texts: Strings, reshaped to `(batch,)`.
        """
        texts = tf.reshape(tf.convert_to_tensor(texts, tf.string), [-1])
        if tf.executing_eagerly():
            return function(texts)
        if self._graph is None:
            self._graph = tf.function(function, input_signature=[STRINGS], autograph=False)
        return self._graph(texts)

    def __deepcopy__(self, memo: dict) -> TracedOnce:
        return TracedOnce()
