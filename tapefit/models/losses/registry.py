"""The pair losses by the name `model.loss.name` gives them, and which labels each takes."""

from __future__ import annotations

import inspect
from typing import Any

import keras

from tapefit.choices import choice_enum, parse_choice
from tapefit.models.losses.angle import AnglELoss
from tapefit.models.losses.contrastive import ContrastiveLoss
from tapefit.models.losses.cosent import CoSENTLoss
from tapefit.models.losses.cosine import CosineLoss
from tapefit.models.losses.cosine_mse import CosineMSELoss
from tapefit.models.losses.in_batch_negatives import InBatchNegativesLoss
from tapefit.models.losses.triplet import TripletLoss

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
