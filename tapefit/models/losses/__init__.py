"""Pair losses for Siamese models, one per module, as `keras.losses.Loss` so
`compile(loss=...)` takes them.

Every loss receives `y_pred` as the stacked, L2-normalised pair embeddings, shape
`(batch, 2, dim)`, so losses that need more than the cosine (in-batch negatives) can have it.
"""

from tapefit.models.losses.angle import AnglELoss, angle_similarity
from tapefit.models.losses.candidates import (
    batch_candidates,
    false_negatives,
    hard_negative_candidates,
)
from tapefit.models.losses.common import pair_cosine
from tapefit.models.losses.contrastive import ContrastiveLoss
from tapefit.models.losses.cosent import CoSENTLoss, ranking_loss
from tapefit.models.losses.cosine import CosineLoss
from tapefit.models.losses.cosine_mse import CosineMSELoss
from tapefit.models.losses.in_batch_negatives import InBatchNegativesLoss
from tapefit.models.losses.registry import PAIR_LOSSES, PairLoss, losses_for_labels, make_pair_loss
from tapefit.models.losses.triplet import TripletLoss

__all__ = [
    "PAIR_LOSSES",
    "AnglELoss",
    "CoSENTLoss",
    "ContrastiveLoss",
    "CosineLoss",
    "CosineMSELoss",
    "InBatchNegativesLoss",
    "PairLoss",
    "TripletLoss",
    "angle_similarity",
    "batch_candidates",
    "false_negatives",
    "hard_negative_candidates",
    "losses_for_labels",
    "make_pair_loss",
    "pair_cosine",
    "ranking_loss",
]
