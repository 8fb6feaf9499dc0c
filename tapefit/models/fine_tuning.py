"""How a pretrained encoder is fine-tuned, as practitioners do it: its own (smaller) learning
rate, the backbone frozen while a new head settles, and no weight decay on LayerNorm and bias.

- A second optimizer named `backbone` (`optimizers: {head: ..., backbone: ...}` in a run's
  config, `compile(optimizer={"head": ..., "backbone": ...})` in Python) updates the
  backbone's variables; the first optimizer updates the rest and counts the steps.
- `freeze_backbone_steps=N` leaves the backbone untouched (no update, no optimizer state) for
  the first N optimizer steps; only the head (`model.encoder.projection`) trains meanwhile.
- `decay_norms_and_biases=False` (the default) excludes LayerNorm scales and offsets and every
  bias from AdamW's decoupled weight decay, as BERT's own fine-tuning recipe does.
Each is exact under resume: it depends only on the optimizer's step count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import tensorflow as tf

from tapefit.errors import TapefitError

BACKBONE_OPTIMIZER = "backbone"
# Variable names AdamW leaves out of weight decay (Keras matches them within each name).
NO_DECAY = ("bias", "gamma", "beta")


class FineTuningOptions(TypedDict, total=False):
    """`model.fine_tuning`: how a pretrained encoder is fine-tuned."""

    freeze_backbone_steps: int  # the first N steps train the head only
    decay_norms_and_biases: bool  # AdamW's weight decay also on LayerNorm and bias


def check_fine_tuning(options: Mapping[str, Any], pretrained: bool, head: bool) -> None:
    """Refuse fine-tuning settings that would do nothing or cannot work.

    Args:
        options: `model.fine_tuning`.
        pretrained: Whether the encoder is pretrained (`model.encoder.preset`).
        head: Whether the model has a head besides the backbone (`model.encoder.projection`).

    Raises:
        TapefitError: naming the key and the fix.

    Example:
        >>> check_fine_tuning({"freeze_backbone_steps": 100}, pretrained=True, head=False)
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.fine_tuning.freeze_backbone_steps=100 leaves ...
    """
    unknown = sorted(set(options) - set(FineTuningOptions.__annotations__))
    if unknown:
        raise TapefitError(
            f"model.fine_tuning.{unknown[0]} is not a fine-tuning option: it takes "
            f"{', '.join(FineTuningOptions.__annotations__)}"
        )
    steps = int(options.get("freeze_backbone_steps", 0) or 0)
    if steps < 0:
        raise TapefitError(f"model.fine_tuning.freeze_backbone_steps={steps} must be at least 0")
    changed = steps > 0 or options.get("decay_norms_and_biases", False)
    if changed and not pretrained:
        raise TapefitError(
            "model.fine_tuning applies to a pretrained encoder (model.encoder.preset); this "
            "model's encoder starts from scratch: leave model.fine_tuning out"
        )
    if steps > 0 and not head:
        raise TapefitError(
            f"model.fine_tuning.freeze_backbone_steps={steps} leaves nothing to train while the "
            "backbone is frozen: set model.encoder.projection (a head) or 0 steps"
        )


def exclude_norms_and_biases(optimizers: Mapping[str, Any]) -> None:
    """Leave LayerNorm scales, offsets and biases out of each optimizer's weight decay (those
    that decay weights: AdamW, Lion, ...), before the optimizers are built."""
    for optimizer in optimizers.values():
        inner = getattr(optimizer, "inner_optimizer", optimizer)  # under loss scaling
        if getattr(inner, "weight_decay", None) and hasattr(inner, "exclude_from_weight_decay"):
            inner.exclude_from_weight_decay(var_names=list(NO_DECAY))


def splits_the_step(model: Any) -> bool:
    """Whether `model`'s step updates backbone and head apart (a backbone optimizer, or a
    frozen start)."""
    return BACKBONE_OPTIMIZER in model.optimizers or model.freeze_backbone_steps > 0


def variables_by_optimizer(model: Any) -> dict[str, list]:
    """The variables each optimizer of a pretrained model's step updates, where it splits.

    With a `backbone` optimizer, the head's variables for the first optimizer and the
    backbone's for `backbone` (what `apply_split_gradients` updates with each); else `{}`.
    """
    if BACKBONE_OPTIMIZER not in model.optimizers:
        return {}
    head, backbone = head_and_backbone(model)
    return {next(iter(model.optimizers)): head, BACKBONE_OPTIMIZER: backbone}


def apply_fine_tuning_gradients(model: Any, tape: tf.GradientTape, loss: Any) -> list:
    """Differentiate `loss` once and update the head with the first optimizer, the backbone
    with the `backbone` optimizer (or the first), not before `freeze_backbone_steps` steps.

    Args:
        model: A `SiameseModel` with a pretrained encoder, compiled.
        tape: The tape that recorded the forward pass.
        loss: The step's loss.

    Returns:
        The gradients, head's first, as `apply_tape_gradients` returns them.
    """
    head, backbone = head_and_backbone(model)
    gradients = tape.gradient(loss, head + backbone)
    apply_split_gradients(model, gradients, head, backbone)
    return gradients


def head_and_backbone(model: Any) -> tuple[list, list]:
    """The trainable variables of a model over a pretrained backbone (its
    `pretrained_backbone`): the head's, the backbone's."""
    backbone = list(model.pretrained_backbone.trainable_variables)
    owned = {id(v) for v in backbone}
    return [v for v in model.trainable_variables if id(v) not in owned], backbone


def apply_split_gradients(model: Any, gradients: list, head: list, backbone: list) -> None:
    """Apply the (unscaled) gradients of `head + backbone`: the head with the first optimizer,
    the backbone with the `backbone` optimizer (or the first), not before
    `freeze_backbone_steps` steps (`apply_fine_tuning_gradients`'s second half, for a step
    that computed its gradients itself, such as the cached step)."""
    head_gradients, backbone_gradients = gradients[: len(head)], gradients[len(head) :]
    frozen = model.freeze_backbone_steps
    step = model.optimizer.iterations
    two = BACKBONE_OPTIMIZER in model.optimizers
    groups = {None: head, BACKBONE_OPTIMIZER: backbone} if two else {None: head + backbone}
    for name, variables in groups.items():  # slots made here, never inside a branch
        optimizer = model.get_optimizer(name)
        if not optimizer.built:
            optimizer.build(variables)
    if two:
        model.apply_gradients(head_gradients, head)
        if not backbone:  # frozen by its trainable flag: nothing to update
            return
        if frozen:
            tf.cond(
                step > frozen,  # the head's update above has counted this step
                lambda: model.apply_gradients(backbone_gradients, backbone, BACKBONE_OPTIMIZER),
                lambda: None,
            )
        else:
            model.apply_gradients(backbone_gradients, backbone, BACKBONE_OPTIMIZER)
        return
    tf.cond(
        step >= frozen,
        lambda: model.apply_gradients(gradients, head + backbone),
        lambda: model.apply_gradients(head_gradients, head),
    )
