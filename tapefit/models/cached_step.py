"""The cached (GradCache) training step of in-batch-negative losses: batches larger than the
encoder's activations can hold in memory.

Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"
(sentence-transformers' `CachedMultipleNegativesRankingLoss`). A loss that ranks every pair
of a batch against the others couples all rows, so gradient accumulation (several small
batches) changes the loss: it sees fewer negatives. The cached step keeps the whole batch:

1. embed the batch chunk by chunk without a tape (memory: one chunk's activations);
2. compute the loss on all embeddings under a tape watching only them, and its gradient with
   respect to each embedding;
3. embed each chunk again under a tape and back-propagate its cached embedding gradients
   into the weights, summing over chunks.

The sum is the full batch's gradient. Dropout draws from Keras' seed generators, whose state
variables the step puts back before the second pass, so each chunk's re-run draws the masks
its first pass drew (and the step leaves the generators where one pass would). Mixed
precision's loss scale and `tf.distribute`'s replica factor are applied to the cached
gradients as `apply_tape_gradients` applies them to a loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.keras_compat import seed_generator_states
from tapefit.models.fine_tuning import apply_split_gradients, head_and_backbone, splits_the_step
from tapefit.step.step_guards import checked_loss

CACHED_LOSSES = ("in_batch_negatives", "triplet")  # losses that couple every row of a batch


def check_cache_chunk_size(value: Any, loss_name: str) -> int | None:
    """`model.loss.cache_chunk_size` as an int, or None when unset.

    Raises:
        TapefitError: not a whole number >= 1, or set for a loss whose rows are independent
            (a per-pair loss: gradient accumulation already bounds its memory).

    Examples:
        >>> check_cache_chunk_size(32, "in_batch_negatives")
        32
        >>> check_cache_chunk_size(32, "cosine_mse")
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: model.loss.cache_chunk_size works with in_batch_negatives...
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TapefitError(
            f"model.loss.cache_chunk_size={value!r} must be a whole number >= 1 (texts "
            "embedded at once), or null for the ordinary step"
        )
    if loss_name not in CACHED_LOSSES:
        raise TapefitError(
            f"model.loss.cache_chunk_size works with {' and '.join(CACHED_LOSSES)}, whose loss "
            f"couples the rows of a batch; model.loss.name={loss_name} scores each pair alone: "
            "bound its memory with trainer.gradient_accumulation_steps and a smaller "
            "data.batch_size instead"
        )
    return value


def seed_states(model: keras.Model) -> list[Any]:
    """The state variables of every seed generator the model's layers draw from (dropout),
    and Keras' global one when it exists.

    Examples:
        >>> import keras
        >>> inputs = keras.Input((2,))
        >>> model = keras.Model(inputs, keras.layers.Dropout(0.5)(inputs))
        >>> [tuple(state.shape) for state in seed_states(model)][:1]
        [(2,)]
    """
    return seed_generator_states(model)


def _chunk(sides: Sequence[tf.Tensor], index: Any, size: int) -> list[tf.Tensor]:
    return [side[index * size : (index + 1) * size] for side in sides]


def embed_in_chunks(
    model: Any, sides: Sequence[tf.Tensor], size: int, training: bool = True
) -> tf.Tensor:
    """`model.embed_aligned(sides, training)`, `size` rows at a time, without a tape."""
    count = (tf.shape(sides[0])[0] + size - 1) // size
    first = tf.stop_gradient(model.embed_aligned(_chunk(sides, 0, size), training=training))

    def body(index: Any, parts: tf.TensorArray) -> tuple:
        part = model.embed_aligned(_chunk(sides, index, size), training=training)
        return index + 1, parts.write(index, tf.stop_gradient(part))

    parts = tf.TensorArray(first.dtype, size=count, infer_shape=False).write(0, first)
    _, parts = tf.while_loop(
        lambda index, _: index < count, body, (tf.constant(1), parts), parallel_iterations=1
    )
    # the static shape a loss reads (a third side: hard negatives) survives the loop
    return tf.ensure_shape(parts.concat(), [None, *first.shape[1:]])


def chunk_gradients(
    model: Any,
    sides: Sequence[tf.Tensor],
    cotangents: tf.Tensor,
    size: int,
    variables: Sequence[Any],
) -> list[Any]:
    """The sum over chunks of d(embeddings . cotangents)/d(variables): each chunk embedded
    again under a tape and its cached embedding gradients back-propagated. A variable the
    embeddings do not reach gets None, as `tape.gradient` gives it."""

    def gradients_of(index: Any) -> list[Any]:
        with tf.GradientTape() as tape:
            embeddings = model.embed_aligned(_chunk(sides, index, size), training=True)
        part = cotangents[index * size : (index + 1) * size]
        found = tape.gradient(embeddings, variables, output_gradients=part)
        return [None if g is None else tf.convert_to_tensor(g) for g in found]

    first = gradients_of(0)
    reached = [i for i, gradient in enumerate(first) if gradient is not None]
    count = (tf.shape(sides[0])[0] + size - 1) // size

    def body(index: Any, *sums: tf.Tensor) -> tuple:
        found = gradients_of(index)
        return (index + 1, *(total + found[i] for total, i in zip(sums, reached, strict=True)))

    _, *sums = tf.while_loop(
        lambda index, *_: index < count,
        body,
        (tf.constant(1), *(first[i] for i in reached)),
        parallel_iterations=1,  # one chunk's activations alive at a time: the memory bound
    )
    gradients: list[Any] = [None] * len(first)
    for i, total in zip(reached, sums, strict=True):
        gradients[i] = total
    return gradients


def cached_step_gradients(
    model: Any, texts: Sequence[tf.Tensor], loss_of: Any, size: int, variables: Sequence[Any]
) -> tuple[tf.Tensor, tf.Tensor, list[Any]]:
    """The cached step's loss, embeddings and (unscaled) gradients of `variables`.

    Args:
        model: A compiled `SiameseModel`.
        texts: The batch's aligned sides (two texts per pair, or three with hard negatives).
        loss_of: `embeddings -> loss`, the step's loss of the stacked embeddings.
        size: Texts per side embedded at once.
        variables: The variables to differentiate.

    Returns:
        `(loss, embeddings, gradients)`, the gradients those of `loss` as on one device
        (`apply_gradients` scales them for the replicas and the loss scale).
    """
    sides = [tf.convert_to_tensor(side) for side in texts]
    states = seed_states(model)
    start = [tf.identity(state.value) for state in states]
    embeddings = embed_in_chunks(model, sides, size)
    with tf.GradientTape() as tape:
        tape.watch(embeddings)
        loss = loss_of(embeddings)
    cotangents = tape.gradient(loss, embeddings)
    scale = model.gradient_scale()
    if scale is not None:  # as apply_tape_gradients: the loss scale keeps float16 gradients
        cotangents = cotangents * tf.cast(scale, cotangents.dtype)
    for state, value in zip(states, start, strict=True):
        state.assign(value)  # the second pass draws the first pass's dropout masks
    gradients = chunk_gradients(model, sides, cotangents, size, variables)
    if scale is not None:
        gradients = [None if g is None else g / tf.cast(scale, g.dtype) for g in gradients]
    return loss, embeddings, gradients


def cached_train_step(model: Any, data: Any, size: int) -> dict:
    """One training step of a `SiameseModel` with the cached step (see the module).

    The same loss, metrics and update as `TapeModel.train_step` on the same batch: the
    gradients are the full batch's (equal to the ordinary step's when no dropout is drawn;
    with dropout, each chunk draws its own masks, reproduced in the second pass).

    Args:
        model: A compiled `SiameseModel` with `loss.cache_chunk_size`.
        data: One batch: `((texts_a, texts_b[, negatives]), labels[, sample_weight])`.
        size: Texts per side embedded at once.

    Returns:
        The metrics' current results by name (`loss` first).

    Raises:
        TapefitError: the model has regularization losses (their gradients do not flow
            through the embeddings): leave cache_chunk_size out for it.
    """
    texts, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    texts = model.checked_sides(texts)
    if model.losses:
        raise TapefitError(
            f"model.loss.cache_chunk_size: {type(model).__name__} has regularization losses, "
            "whose gradients the cached step cannot route through the embeddings; remove the "
            "regularizers or set model.loss.cache_chunk_size=null"
        )
    split = model.pretrained and splits_the_step(model)
    head, backbone = head_and_backbone(model) if split else (list(model.trainable_weights), [])
    outputs: dict[str, Any] = {}

    def loss_of(embeddings: tf.Tensor) -> tf.Tensor:
        outputs["step"] = model.output_of(texts, labels, sample_weight, embeddings, True)
        return checked_loss(outputs["step"].loss)

    loss, _, gradients = cached_step_gradients(model, texts, loss_of, size, head + backbone)
    model.track_loss(loss, texts)
    if split:
        apply_split_gradients(model, gradients, head, backbone)
    else:
        model.apply_gradients(gradients, head)
    step = outputs["step"]
    return model.compute_metrics(texts, step.y, step.y_pred, sample_weight=step.sample_weight)


def cached_test_step(model: Any, data: Any, size: int) -> dict:
    """One evaluation step of a `SiameseModel` with `loss.cache_chunk_size`: the batch
    embedded a chunk at a time (validation batches are as large as training's), then the
    loss and metrics on all embeddings, as `TapeModel.test_step` computes them.

    Args:
        model: A compiled `SiameseModel`.
        data: One batch, as for `cached_train_step`.
        size: Texts per side embedded at once.

    Returns:
        The metrics' current results by name (`loss` first).
    """
    texts, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    texts = model.checked_sides(texts)
    sides = [tf.convert_to_tensor(side) for side in texts]
    embeddings = embed_in_chunks(model, sides, size, training=False)
    step = model.output_of(texts, labels, sample_weight, embeddings, False)
    model.track_loss(checked_loss(step.loss), texts)
    return model.compute_metrics(texts, step.y, step.y_pred, sample_weight=step.sample_weight)
