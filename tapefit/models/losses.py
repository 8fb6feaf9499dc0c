"""Pair losses for Siamese models, as `keras.losses.Loss` so `compile(loss=...)` takes them.

Every loss receives `y_pred` as the stacked, L2-normalised pair embeddings, shape
`(batch, 2, dim)`, so losses that need more than the cosine (in-batch negatives) can have it.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.choices import choice_enum, parse_choice
from tapefit.errors import TapefitError


def pair_cosine(pair_embeddings: tf.Tensor) -> tf.Tensor:
    """Cosine of each pair of already L2-normalised embeddings, shape `(batch,)`."""
    return tf.reduce_sum(pair_embeddings[:, 0] * pair_embeddings[:, 1], axis=-1)


@keras.saving.register_keras_serializable(package="tapefit")
class CosineLoss(keras.losses.Loss):
    """The GradientTape tutorial's objective: maximise each pair's cosine; labels are ignored.

    On its own it collapses: mapping every text to one vector gives every pair cosine 1.
    """

    label_type: ClassVar[str | None] = None  # the kind of labels the loss needs (None: any)

    def __init__(self, name: str = "cosine", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        return 1.0 - pair_cosine(y_pred)


@keras.saving.register_keras_serializable(package="tapefit")
class CosineMSELoss(keras.losses.Loss):
    """Regress the cosine onto a graded label rescaled from `label_range` to `target_range`."""

    label_type: ClassVar[str | None] = "graded"

    def __init__(
        self,
        label_range: Sequence[float] = (0.0, 5.0),
        target_range: Sequence[float] = (0.0, 1.0),
        name: str = "cosine_mse",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self.label_range = tuple(float(v) for v in label_range)
        self.target_range = tuple(float(v) for v in target_range)
        if self.label_range[1] <= self.label_range[0]:
            raise TapefitError(
                f"label_range={list(self.label_range)} must be [low, high], low < high"
            )
        if self.target_range not in ((0.0, 1.0), (-1.0, 1.0)):
            raise TapefitError(
                f"target_range={list(self.target_range)} must be [0, 1] or [-1, 1] (cosine's range)"
            )

    def rescale(self, labels: tf.Tensor) -> tf.Tensor:
        """Map labels linearly from `label_range` onto `target_range`."""
        (low, high), (target_low, target_high) = self.label_range, self.target_range
        return target_low + (labels - low) * (target_high - target_low) / (high - low)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        target = self.rescale(tf.reshape(y_true, [-1]))
        return tf.square(pair_cosine(y_pred) - target)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "label_range": list(self.label_range),
            "target_range": list(self.target_range),
        }


@keras.saving.register_keras_serializable(package="tapefit")
class ContrastiveLoss(keras.losses.Loss):
    """Binary labels, cosine distance d = 1 - cos: y * d^2 + (1 - y) * max(0, margin - d)^2."""

    label_type: ClassVar[str | None] = "binary"

    def __init__(self, margin: float = 0.5, name: str = "contrastive", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if not 0.0 < margin <= 2.0:
            raise TapefitError(f"contrastive margin={margin} must lie in (0, 2] (cosine distance)")
        self.margin = float(margin)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        labels = tf.reshape(y_true, [-1])
        distance = 1.0 - pair_cosine(y_pred)
        negative = tf.square(tf.nn.relu(self.margin - distance))
        return labels * tf.square(distance) + (1.0 - labels) * negative

    def get_config(self) -> dict:
        return {**super().get_config(), "margin": self.margin}


def batch_candidates(pair_embeddings: tf.Tensor, text_ids: tf.Tensor, across_replicas: bool):
    """The rows a batch's in-batch negatives are drawn from: this replica's rows, or, with
    `across_replicas` under a distribution strategy, every replica's (an all-gather).

    Why: each replica sees only its share of the global batch, so its anchors would meet
    batch/replicas - 1 negatives; gathering restores the global batch's. The all-gather is
    differentiable, so the other replicas' positives get their gradients too.

    Args:
        pair_embeddings: `(batch, 2, dim)`: anchors and positives of this replica's rows.
        text_ids: `(batch, 2)` text fingerprints of the rows.
        across_replicas: Gather every replica's rows when more than one is in sync.

    Returns:
        `(anchors, positives, ids, all_anchors, all_positives, all_ids, targets)`: this
        replica's rows, the candidate rows, and each row's own index among the candidates.

    Example:
        >>> import numpy as np
        >>> ids = np.arange(6).reshape(3, 2)
        >>> rows = batch_candidates(np.zeros((3, 2, 4), "float32"), ids, across_replicas=True)
        >>> rows[-1].numpy().tolist()  # one replica: a row is its own candidate
        [0, 1, 2]
    """
    pair_embeddings = tf.convert_to_tensor(pair_embeddings)
    anchors, positives = pair_embeddings[:, 0], pair_embeddings[:, 1]
    ids = _row_ids(text_ids, pair_embeddings)[:, :2]
    context = tf.distribute.get_replica_context()
    offset = tf.constant(0, tf.int32)
    all_anchors, all_positives, all_ids = anchors, positives, ids
    if across_replicas and context is not None and context.num_replicas_in_sync > 1:
        sizes = context.all_gather(tf.shape(anchors)[:1], axis=0)
        offset = tf.reduce_sum(sizes[: context.replica_id_in_sync_group])
        all_anchors = context.all_gather(anchors, axis=0)
        all_positives = context.all_gather(positives, axis=0)
        all_ids = context.all_gather(ids, axis=0)
    targets = offset + tf.range(tf.shape(anchors)[0])
    return anchors, positives, ids, all_anchors, all_positives, all_ids, targets


def _row_ids(text_ids: Any, embeddings: tf.Tensor) -> tf.Tensor:
    """The fingerprints as `(batch, texts per row)`, whatever shape Keras passed them in."""
    return tf.reshape(tf.convert_to_tensor(text_ids), [tf.shape(embeddings)[0], -1])


def hard_negative_candidates(
    embeddings: tf.Tensor, text_ids: tf.Tensor, across_replicas: bool
) -> tuple[tf.Tensor, tf.Tensor] | None:
    """The explicit hard negatives of a batch as extra candidates, or None without them.

    Why: in-batch negatives are mostly easy (another pair's unrelated text); a third text
    per row, chosen to be close but wrong (a contradiction, a near-duplicate question),
    teaches the finer distinctions. Every row's negative is a candidate for every anchor, as
    the other rows' positives are; a negative whose text is a row's own anchor or positive
    is masked for that row.

    Args:
        embeddings: `(batch, 3, dim)` anchors, positives and negatives (or `(batch, 2, dim)`,
            which has none).
        text_ids: `(batch, 3)` text fingerprints of the rows.
        across_replicas: Gather every replica's negatives when more than one is in sync.

    Returns:
        `(negatives, masked)`: the candidate negatives `(candidates, dim)` and where one is
        not a negative of a row `(batch, candidates)`; None for two texts per row.

    Example:
        >>> import numpy as np
        >>> rows = np.zeros((2, 3, 4), "float32")
        >>> ids = np.array([[1, 2, 3], [4, 5, 1]])  # row 1's negative is row 0's anchor text
        >>> negatives, masked = hard_negative_candidates(rows, ids, across_replicas=False)
        >>> masked.numpy().tolist()
        [[False, True], [False, False]]
    """
    embeddings = tf.convert_to_tensor(embeddings)
    if embeddings.shape[1] != 3:
        return None
    ids = _row_ids(text_ids, embeddings)
    negatives, negative_ids = embeddings[:, 2], ids[:, 2]
    context = tf.distribute.get_replica_context()
    if across_replicas and context is not None and context.num_replicas_in_sync > 1:
        negatives = context.all_gather(negatives, axis=0)
        negative_ids = context.all_gather(negative_ids, axis=0)
    masked = tf.equal(ids[:, None, 0], negative_ids[None, :]) | tf.equal(
        ids[:, None, 1], negative_ids[None, :]
    )
    return negatives, masked


def false_negatives(ids: tf.Tensor, candidate_ids: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Where candidate j is not a true negative of row i: another row that shares the
    anchor's or the positive's text (the same question twice is not a negative).

    Args:
        ids: `(batch, 2)` text fingerprints of the rows.
        candidate_ids: `(candidates, 2)` text fingerprints of the candidate rows.
        targets: `(batch,)` each row's own index among the candidates (never masked).

    Returns:
        `(batch, candidates)` booleans.

    Example:
        >>> import tensorflow as tf
        >>> ids = tf.constant([[1, 2], [1, 3]])  # the same anchor text twice
        >>> false_negatives(ids, ids, tf.range(2)).numpy().tolist()
        [[False, True], [True, False]]
    """
    same_anchor = tf.equal(ids[:, None, 0], candidate_ids[None, :, 0])
    same_positive = tf.equal(ids[:, None, 1], candidate_ids[None, :, 1])
    own = tf.equal(targets[:, None], tf.range(tf.shape(candidate_ids)[0])[None, :])
    return (same_anchor | same_positive) & ~own


@keras.saving.register_keras_serializable(package="tapefit")
class InBatchNegativesLoss(keras.losses.Loss):
    """Multiple-negatives ranking: softmax cross-entropy of each anchor over `scale * cos` with
    every positive in the batch, its own positive being the target.

    `y_true` holds `(anchor_id, positive_id)` text fingerprints per row: a column whose anchor or
    positive text equals the row's is another true positive, not a negative, so it is masked out.
    `symmetric` adds the reverse direction (each positive picks its anchor);
    `across_replicas` draws the negatives from the whole global batch under a distribution
    strategy (see `batch_candidates`). With `(batch, 3, dim)` embeddings, each row's third
    text is a hard negative, a candidate for every anchor beside the batch's positives
    (`hard_negative_candidates`).
    """

    label_type: ClassVar[str | None] = None
    uses_text_ids = True  # SiameseModel passes text fingerprints as y_true
    uses_negatives = True  # and a third text per row, when the data have one

    def __init__(
        self,
        scale: float = 20.0,
        symmetric: bool = False,
        across_replicas: bool = False,
        name: str = "in_batch_negatives",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)
        self.symmetric = bool(symmetric)
        self.across_replicas = bool(across_replicas)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        anchors, positives, ids, all_anchors, all_positives, all_ids, targets = batch_candidates(
            y_pred, y_true, self.across_replicas
        )
        masked = false_negatives(ids, all_ids, targets)

        def cross_entropy(queries: tf.Tensor, candidates: tf.Tensor, masked) -> tf.Tensor:
            scores = self.scale * tf.matmul(queries, candidates, transpose_b=True)
            scores = tf.where(masked, tf.cast(-1e9, scores.dtype), scores)
            return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=scores)

        candidates, candidates_masked = all_positives, masked
        hard = hard_negative_candidates(y_pred, y_true, self.across_replicas)
        if hard is not None:
            candidates = tf.concat([all_positives, hard[0]], axis=0)
            candidates_masked = tf.concat([masked, hard[1]], axis=1)
        loss = cross_entropy(anchors, candidates, candidates_masked)
        if not self.symmetric:
            return loss
        # each positive also picks its own anchor among the batch's anchors
        return (loss + cross_entropy(positives, all_anchors, masked)) / 2.0

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "scale": self.scale,
            "symmetric": self.symmetric,
            "across_replicas": self.across_replicas,
        }


@keras.saving.register_keras_serializable(package="tapefit")
class TripletLoss(keras.losses.Loss):
    """Triplet margin loss over in-batch negatives: `max(0, cos(a, n) - cos(a, p) + margin)`.

    Why: the positive pairs of a batch supply every anchor's negatives (the other rows'
    positives), so triplets need no third column. `mining="hard"` takes each anchor's most
    similar negative (batch-hard, Hermans et al., 2017); `mining="all"` averages over every
    negative that still violates the margin (batch-all). Rows sharing a text are not
    negatives of each other. `across_replicas` draws the negatives from the whole global
    batch under a distribution strategy. With `(batch, 3, dim)` embeddings, each row's third
    text is one more negative for every anchor (`hard_negative_candidates`).

    Args:
        margin: How much more similar the positive must be than a negative, in (0, 2].
        mining: `hard` or `all`.
        across_replicas: Gather every replica's rows as candidates (`batch_candidates`).
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Raises:
        TapefitError: a margin outside (0, 2] or an unknown mining.

    Example:
        >>> import numpy as np
        >>> pairs = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]], "float32")
        >>> ids = np.array([[1, 2], [3, 4]])  # four different texts
        >>> float(TripletLoss(margin=0.5)(ids, pairs))  # each positive beats its negative by 1
        0.0
    """

    label_type: ClassVar[str | None] = None
    uses_text_ids = True
    uses_negatives = True

    def __init__(
        self,
        margin: float = 0.5,
        mining: str = "hard",
        across_replicas: bool = False,
        name: str = "triplet",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        if not 0.0 < margin <= 2.0:
            raise TapefitError(f"triplet margin={margin} must lie in (0, 2] (cosine difference)")
        if mining not in ("hard", "all"):
            raise TapefitError(f"triplet mining={mining!r} must be hard or all")
        self.margin, self.mining = float(margin), mining
        self.across_replicas = bool(across_replicas)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        anchors, positives, ids, _, all_positives, all_ids, targets = batch_candidates(
            y_pred, y_true, self.across_replicas
        )
        candidates = all_positives
        own = tf.equal(targets[:, None], tf.range(tf.shape(all_ids)[0])[None, :])
        not_negative = false_negatives(ids, all_ids, targets) | own
        hard = hard_negative_candidates(y_pred, y_true, self.across_replicas)
        if hard is not None:
            candidates = tf.concat([all_positives, hard[0]], axis=0)
            not_negative = tf.concat([not_negative, hard[1]], axis=1)
        similarities = tf.matmul(anchors, candidates, transpose_b=True)
        positive = tf.reduce_sum(anchors * positives, axis=-1)
        negatives = tf.where(not_negative, tf.cast(-3.0, similarities.dtype), similarities)
        violations = tf.nn.relu(negatives - positive[:, None] + self.margin)
        if self.mining == "hard":
            return tf.reduce_max(violations, axis=1)
        active = tf.cast(violations > 0, violations.dtype)
        return tf.reduce_sum(violations, axis=1) / tf.maximum(tf.reduce_sum(active, axis=1), 1.0)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "margin": self.margin,
            "mining": self.mining,
            "across_replicas": self.across_replicas,
        }


def _computing_dtype(tensor: tf.Tensor) -> tf.DType:
    """float32 for half-precision inputs (mixed precision), the input's own dtype otherwise."""
    return tf.float32 if tensor.dtype in (tf.float16, tf.bfloat16) else tensor.dtype


def ranking_loss(labels: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
    """CoSENT's ranking of a batch's pairs: `log(1 + sum over y_i < y_j of exp(s_i - s_j))`.

    Every pair whose label is lower than another's but whose score is not is penalised, so
    the loss asks only for the labels' order, not their values.

    Args:
        labels: The pairs' graded labels, shape `(batch,)`.
        scores: The pairs' scaled similarities, shape `(batch,)`.

    Returns:
        The batch's loss, a scalar (float32 for half-precision scores).

    Example:
        >>> import tensorflow as tf
        >>> right = ranking_loss(tf.constant([0.0, 1.0]), tf.constant([-5.0, 5.0]))
        >>> wrong = ranking_loss(tf.constant([0.0, 1.0]), tf.constant([5.0, -5.0]))
        >>> bool(right < 0.001) and bool(wrong > 9.9)
        True
    """
    scores = tf.reshape(tf.convert_to_tensor(scores), [-1])
    scores = tf.cast(scores, _computing_dtype(scores))
    labels = tf.cast(tf.reshape(labels, [-1]), scores.dtype)
    differences = scores[:, None] - scores[None, :]
    lower = labels[:, None] < labels[None, :]
    terms = tf.where(
        lower, differences, tf.fill(tf.shape(differences), tf.cast(-1e12, scores.dtype))
    )
    flat = tf.concat([tf.zeros([1], scores.dtype), tf.reshape(terms, [-1])], axis=0)
    return tf.reduce_logsumexp(flat)


def angle_similarity(first: tf.Tensor, second: tf.Tensor) -> tf.Tensor:
    """AnglE's similarity: each embedding's halves are the real and imaginary parts of a
    complex vector; the quotient `first / second`, normalised by the two norms, summed over
    real and imaginary parts, in absolute value.

    Why: the cosine's gradient vanishes near cos = ±1 (saturated pairs stop learning); the
    angle difference in complex space keeps a gradient there (Li and Li, 2023). An odd
    width is padded with a zero, as sentence-transformers does.

    Args:
        first: Embeddings, shape `(batch, dim)`.
        second: Embeddings, shape `(batch, dim)`.

    Returns:
        The similarity of each row pair, shape `(batch,)`.

    Example:
        >>> import tensorflow as tf
        >>> x = tf.constant([[1.0, 2.0, 3.0, 4.0]])
        >>> round(float(angle_similarity(x, x)[0]), 6)
        1.0
        >>> e1, e2 = tf.constant([[1.0, 0.0, 0.0, 0.0]]), tf.constant([[0.0, 1.0, 0.0, 0.0]])
        >>> float(angle_similarity(e1, e2)[0])  # two orthogonal complex components
        0.0
    """
    first, second = tf.convert_to_tensor(first), tf.convert_to_tensor(second)
    dtype = _computing_dtype(first)
    first, second = tf.cast(first, dtype), tf.cast(second, dtype)
    if first.shape[-1] is not None and first.shape[-1] % 2:
        first = tf.pad(first, [[0, 0], [0, 1]])
        second = tf.pad(second, [[0, 0], [0, 1]])
    a, b = tf.split(first, 2, axis=-1)
    c, d = tf.split(second, 2, axis=-1)
    second_sq = tf.reduce_sum(c**2 + d**2, axis=-1, keepdims=True)
    scale = tf.sqrt(second_sq) / tf.sqrt(tf.reduce_sum(a**2 + b**2, axis=-1, keepdims=True))
    real = (a * c + b * d) / second_sq * scale
    imaginary = (b * c - a * d) / second_sq * scale
    return tf.abs(tf.reduce_sum(real, axis=-1) + tf.reduce_sum(imaginary, axis=-1))


@keras.saving.register_keras_serializable(package="tapefit")
class CoSENTLoss(keras.losses.Loss):
    """CoSENT: rank the batch's pairs by `scale * cos` in the order of their graded labels.

    Why: regressing the cosine onto rescaled labels (cosine_mse) asks for values the labels
    do not really give; CoSENT asks only that a pair labelled more similar score higher,
    which usually raises Spearman (Su, 2022; sentence-transformers' `CoSENTLoss`). The loss
    is one value per batch (under a distribution strategy, per replica's share).

    Args:
        scale: Multiplies the cosines before the ranking (an inverse temperature), > 0.
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Raises:
        TapefitError: `scale` is not positive.

    Example:
        >>> import numpy as np
        >>> pairs = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]], "float32")
        >>> loss = CoSENTLoss()  # the second pair is labelled more similar and scores higher
        >>> float(loss(np.array([0.0, 5.0]), pairs)) < 1e-6
        True
    """

    label_type: ClassVar[str | None] = "graded"

    def __init__(self, scale: float = 20.0, name: str = "cosent", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if not scale > 0:
            raise TapefitError(f"{name} scale={scale} must be > 0")
        self.scale = float(scale)

    def similarity(self, pair_embeddings: tf.Tensor) -> tf.Tensor:
        """The similarity ranked: the cosine of each pair."""
        return pair_cosine(pair_embeddings)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        similarity = self.similarity(y_pred)
        return ranking_loss(y_true, self.scale * tf.cast(similarity, _computing_dtype(similarity)))

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="tapefit")
class AnglELoss(CoSENTLoss):
    """AnglE: CoSENT's ranking over `angle_similarity` instead of the cosine.

    Why: near cos = ±1 the cosine's gradient vanishes; the angle in complex space keeps
    one, so saturated pairs still learn (Li and Li, 2023; sentence-transformers'
    `AnglELoss`).

    Args:
        scale: Multiplies the similarities before the ranking, > 0.
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Example:
        >>> import numpy as np
        >>> unlike = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
        >>> alike = [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
        >>> pairs = np.array([unlike, alike], "float32")
        >>> float(AnglELoss()(np.array([0.0, 5.0]), pairs)) < 1e-6
        True
    """

    def __init__(self, scale: float = 20.0, name: str = "angle", **kwargs: Any) -> None:
        super().__init__(scale=scale, name=name, **kwargs)

    def similarity(self, pair_embeddings: tf.Tensor) -> tf.Tensor:
        """The similarity ranked: AnglE's normalised angle similarity of each pair."""
        return angle_similarity(pair_embeddings[:, 0], pair_embeddings[:, 1])


PAIR_LOSSES = {
    "cosine": CosineLoss,
    "cosine_mse": CosineMSELoss,
    "cosent": CoSENTLoss,
    "angle": AnglELoss,
    "contrastive": ContrastiveLoss,
    "in_batch_negatives": InBatchNegativesLoss,
    "triplet": TripletLoss,
}
PairLoss = choice_enum("PairLoss", PAIR_LOSSES)


def make_pair_loss(name: str, **options: Any) -> keras.losses.Loss:
    """The pair loss called `name`, built from the `options` its constructor accepts (each loss
    reads only its own, so one options dict serves all of them)."""
    loss_class = PAIR_LOSSES[parse_choice(PairLoss, name, "model.loss.name").value]
    accepted = inspect.signature(loss_class.__init__).parameters
    return loss_class(**{key: value for key, value in options.items() if key in accepted})


def losses_for_labels(label_type: str) -> list[str]:
    """Names of the pair losses that train on `label_type` labels."""
    return [name for name, loss in PAIR_LOSSES.items() if loss.label_type == label_type]
