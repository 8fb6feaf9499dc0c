"""Checks of the composed config's `optimizer`/`optimizers` and `scheduler` nodes, made
before anything is built: the arguments their `_target_` takes, the ranges Hydra's schemas
cannot state, and one hand on the learning rate at a time."""

from __future__ import annotations

from typing import Any

from tapefit.config.targets import checked_target, has_target
from tapefit.errors import TapefitError
from tapefit.training.optimizers import TAPEFIT_KEYS
from tapefit.training.schedules import CONSTANT, SCHEDULE_ARGUMENTS


def optimizer_nodes(cfg: Any) -> dict[str, Any]:
    """The run's optimizer nodes by their keys: `optimizers.NAME` each, or the one `optimizer`.

    Example:
        >>> import tapefit
        >>> list(optimizer_nodes(tapefit.compose([])))
        ['optimizer']
    """
    return {f"optimizers.{n}": o for n, o in cfg.optimizers.items()} or {"optimizer": cfg.optimizer}


def missing_target(key: str) -> TapefitError:
    """The one-line refusal of an optimizer node without `_target_` at `key`.

    Example:
        >>> str(missing_target("optimizers.critic"))  # doctest: +ELLIPSIS
        'optimizers.critic needs _target_: ... optimizers.critic._target_=keras.optimizers.Adam'
    """
    choose = "optimizer=adamw, or " if key == "optimizer" else ""
    return TapefitError(
        f"{key} needs _target_: the optimizer class to build, e.g. {choose}"
        f"{key}._target_=keras.optimizers.Adam"
    )


def check_optimizer_node(node: Any, key: str = "optimizer") -> None:
    """Refuse an optimizer node whose arguments its `_target_` does not take or whose types or
    values are wrong.

    Raises:
        TapefitError: one line naming the key, e.g. `optimizer.beta1: Adam takes no argument
            'beta1' (did you mean optimizer.beta_1?)`.

    Example:
        >>> check_optimizer_node({"_target_": "keras.optimizers.Adam", "learning_rate": 0})
        Traceback (most recent call last):
        tapefit.errors.TapefitError: optimizer.learning_rate=0 must be > 0
    """
    if not has_target(node):
        raise missing_target(key)
    ema = node.get("ema")
    if ema is not None and not isinstance(ema, bool):
        raise TapefitError(f"{key}.ema={ema} must be true or false")
    checked_target(node, key, exclude=TAPEFIT_KEYS)
    learning_rate = node.get("learning_rate")
    if isinstance(learning_rate, int | float) and not learning_rate > 0:
        raise TapefitError(f"{key}.learning_rate={learning_rate} must be > 0")


def check_optimizers(cfg: Any) -> None:
    """`check_optimizer_node` for each of the run's optimizer nodes (`optimizer_nodes`)."""
    for key, node in optimizer_nodes(cfg).items():
        check_optimizer_node(node, key)


def changes_learning_rate(node: Any) -> bool:
    """Whether a `scheduler` node moves the learning rate during the run (anything but
    `scheduler=constant` without warmup), so nothing else may (ReduceLROnPlateau).

    Args:
        node: The `scheduler` config node, or None.

    Returns:
        True for a schedule that is not the constant learning rate.

    Example:
        >>> changes_learning_rate({"_target_": CONSTANT, "warmup_steps": 0})
        False
    """
    if node is None:
        return False
    if node.get("_target_") != CONSTANT:
        return True
    return bool(node.get("warmup_steps") or node.get("warmup_fraction"))


def check_scheduler(cfg: Any) -> None:
    """Refuse a `scheduler` node its `_target_` cannot take, and a schedule beside another
    hand on the learning rate: ReduceLROnPlateau, or a schedule node as the optimizer's own
    `learning_rate`.

    Example:
        >>> import tapefit
        >>> plateau = "callbacks.reduce_lr_on_plateau.enabled=true"
        >>> check_scheduler(tapefit.compose(["scheduler=cosine", plateau]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: scheduler._target_=... and ReduceLROnPlateau both set ...
    """
    node = cfg.get("scheduler")
    if node is None:
        return
    checked_target(node, "scheduler", supplied=SCHEDULE_ARGUMENTS)
    if not changes_learning_rate(node):
        return
    plateau = cfg.callbacks.reduce_lr_on_plateau.enabled or any(
        str(extra.get("_target_", "")).endswith("ReduceLROnPlateau")
        for extra in cfg.callbacks.extra.values()
    )
    if plateau:
        raise TapefitError(
            f"scheduler._target_={node._target_} and ReduceLROnPlateau both set the learning "
            "rate: choose one (scheduler=constant, or callbacks.reduce_lr_on_plateau.enabled"
            "=false)"
        )
    for key, options in optimizer_nodes(cfg).items():
        if has_target(options.get("learning_rate")):
            raise TapefitError(
                f"{key}.learning_rate is a schedule and scheduler._target_={node._target_} "
                f"is another: keep one (scheduler=constant, or a number as {key}.learning_rate)"
            )
