"""What a `SiameseModel` is configured with (`model.encoder`, `model.loss`, `model.retrieval`):
the options' types, which a run checks the config against; the check of values no model can
use; and the pair loss the options and the labels choose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import keras

from tapefit.choices import parse_choice
from tapefit.errors import TapefitError
from tapefit.models.cached_step import check_cache_chunk_size
from tapefit.models.fine_tuning import check_fine_tuning
from tapefit.models.losses import PairLoss, losses_for_labels, make_pair_loss
from tapefit.models.losses.matryoshka import MatryoshkaLoss, check_matryoshka
from tapefit.models.siamese_pretrained import check_pretrained_options
from tapefit.text.wordpiece import Tokenizer


class EncoderOptions(TypedDict, total=False):
    """`model.encoder`: the shared text encoder (`tapefit.models.TextEncoder`'s arguments)."""

    embedding_dim: int
    rnn: Literal["lstm", "gru", "transformer", "none"]
    units: int
    num_layers: int
    bidirectional: bool
    pooling: Literal["last", "mean", "max", "first", "mean_sqrt_len", "cls"] | None
    recurrent_dropout: float
    dropout: float  # the RNN's input dropout (cuDNN-compatible, unlike recurrent_dropout)
    mask_padding: bool
    num_heads: int
    train_embeddings: bool
    projection: int | None  # a linear projection head of this width after the pooling
    vectors: str | None  # a GloVe/word2vec text file whose vectors start the embedding
    preset: str | None  # a pretrained encoder's KerasHub preset or folder (siamese_pretrained)


class RetrievalOptions(TypedDict, total=False):
    """`model.retrieval`: rank each split's corpus for its queries
    (`tapefit.evaluation.retrieval`)."""

    enabled: bool
    positive_label: float  # graded labels at or above it make a pair relevant


class PairLossOptions(TypedDict, total=False):
    """`model.loss`: the pair loss and its options (each loss reads only its own)."""

    name: Literal[
        "cosine", "cosine_mse", "cosent", "angle", "contrastive", "in_batch_negatives", "triplet"
    ]
    target_range: list[float]  # cosine_mse: the cosine range graded labels are mapped onto
    margin: float  # contrastive, triplet: how far apart different pairs are pushed
    scale: float  # cosent, angle, in_batch_negatives: multiplies the similarities
    symmetric: bool  # in_batch_negatives: also pick each positive's anchor
    mining: Literal["hard", "all"]  # triplet: the hardest negative, or every violating one
    across_replicas: bool  # in_batch_negatives, triplet: gather negatives from every replica
    cache_chunk_size: int | None  # in_batch_negatives, triplet: the cached step's chunk
    matryoshka_dims: list[int] | None  # any loss: also train these leading dimensions alone
    matryoshka_weights: list[float] | None  # the weight of each of those dimensions' losses


def check_siamese_options(options: Mapping[str, Any]) -> None:
    """Refuse encoder sizes and dropout no model can use, before anything is built.

    Args:
        options: The configured constructor arguments (`encoder`, `loss`, `retrieval`,
            `tokenizer`).

    Raises:
        TapefitError: naming the key, e.g. `model.encoder.units=0 must be at least 1`.

    Examples:
        >>> check_siamese_options({"encoder": {"units": 8}, "loss": {"name": "cosent"}})
        >>> check_siamese_options({"encoder": {"units": 0}})
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: model.encoder.units=0 must be at least 1
    """
    if "tokenizer" in options:
        parse_choice(Tokenizer, options["tokenizer"], "model.tokenizer")
    encoder = dict(options.get("encoder") or {})
    if "preset" in encoder:  # a pretrained encoder: its own keys only
        check_pretrained_options(encoder, str(options.get("tokenizer", "pretrained")))
    check_fine_tuning(
        dict(options.get("fine_tuning") or {}), "preset" in encoder, bool(encoder.get("projection"))
    )
    for key in ("embedding_dim", "units", "num_layers"):
        if key in encoder and encoder[key] < 1:
            raise TapefitError(f"model.encoder.{key}={encoder[key]} must be at least 1")
    projection = encoder.get("projection")
    if projection is not None and projection < 1:
        raise TapefitError(
            f"model.encoder.projection={projection} must be null (no head) or at least 1"
        )
    for key in ("recurrent_dropout", "dropout"):
        dropout = encoder.get(key, 0.0)
        if not 0.0 <= dropout < 1.0:
            raise TapefitError(f"model.encoder.{key}={dropout} must lie in [0, 1)")
    loss = dict(options.get("loss") or {})
    if "name" in loss:
        parse_choice(PairLoss, loss["name"], "model.loss.name")
    check_cache_chunk_size(loss.get("cache_chunk_size"), str(loss.get("name", "cosine_mse")))
    check_matryoshka(loss.get("matryoshka_dims"), loss.get("matryoshka_weights"))
    retrieval = dict(options.get("retrieval") or {})
    unknown = sorted(set(retrieval) - set(RetrievalOptions.__annotations__))
    if unknown:
        raise TapefitError(
            f"model.retrieval.{unknown[0]} is not a retrieval option: it takes "
            f"{', '.join(RetrievalOptions.__annotations__)}"
        )


def configured_pair_loss(
    loss_settings: Mapping[str, Any],
    label_range: Sequence[float],
    label_type: str,
    hard_negatives: bool,
) -> keras.losses.Loss:
    """The pair loss `model.loss` names (cosine_mse unless it names one), fit to the labels.

    Args:
        loss_settings: `model.loss`: `name` and the loss's own options.
        label_range: `[low, high]` of graded labels, which the loss rescales from.
        label_type: `graded` or `binary`: the labels the loss must fit.
        hard_negatives: Whether the training inputs bring a hard negative per pair.

    Returns:
        The loss, built.

    Raises:
        TapefitError: for a loss that needs the other kind of labels, naming both fixes,
            or hard negatives for a loss that cannot use them.

    Examples:
        >>> type(configured_pair_loss({}, [0.0, 5.0], "graded", False)).__name__
        'CosineMSELoss'
        >>> configured_pair_loss({"name": "contrastive"}, [0.0, 5.0], "graded", False)
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: loss=contrastive needs binary 0/1 labels: set ...
    """
    options = dict(loss_settings)
    name = options.pop("name", "cosine_mse")
    loss = make_pair_loss(name, label_range=label_range, **options)
    if hard_negatives and not getattr(loss, "uses_negatives", False):
        raise TapefitError(
            f"data.negative_column gives hard negatives, which model.loss.name={name} "
            "cannot use: set model.loss.name=in_batch_negatives or triplet, or "
            "data.negative_column=null"
        )
    if loss.label_type not in (None, label_type):
        others = losses_for_labels(label_type)
        words = {"graded": "graded", "binary": "binary 0/1"}
        raise TapefitError(
            f"loss={name} needs {words[loss.label_type]} labels: set "
            f"data.label_type={loss.label_type}, or use model.loss.name={others[0]} for "
            f"{label_type} labels"
        )
    dims = options.get("matryoshka_dims")
    if dims is not None:  # MatryoshkaLoss checks the dimensions and their weights
        loss = MatryoshkaLoss(loss, dims, options.get("matryoshka_weights"))
    return loss
