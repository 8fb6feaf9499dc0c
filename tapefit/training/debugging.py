"""The `debug` presets' effects on a run (conf/debug/, as lightning-hydra-template's):
fewer batches (`fast_dev_run`, `overfit`), the overfit verdict, and TensorFlow's
check-numerics with its error in one line.

Why: smoke-testing a config, checking that a model can learn at all and finding the op that
first made a NaN are the three things people reach for before a long run; each is one
override (`debug=fast_dev_run`) instead of a hand-edited config.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tensorflow as tf

from tapefit.config.schemas import DebugConfig, DebugMode
from tapefit.errors import TapefitError

log = logging.getLogger("tapefit")

ANNOUNCEMENTS = {
    DebugMode.fast_dev_run: "debug=fast_dev_run: {batches} batch(es) of each split, one epoch, "
    "no checkpoints, model or TensorBoard; the metrics mean nothing",
    DebugMode.overfit: "debug=overfit: {batches} fixed training batches (validation and test "
    "on the same); the run passes when the training loss falls below {ratio} of its first "
    "epoch's",
    DebugMode.profile: "debug=profile: TensorBoard's profiler over batches {profile} "
    "(tensorboard/, Profile tab)",
    DebugMode.numerics: "debug=numerics: check-numerics on every op; the first NaN or "
    "infinity stops the run naming its op",
}


def announce(debug: DebugConfig, profile_batch: Any = None) -> None:
    """Log, once at the start, what the debug preset does to this run.

    Args:
        debug: The run's `debug` settings.
        profile_batch: `callbacks.tensorboard.profile_batch` (what `debug=profile` profiles).
    """
    if debug.mode is not DebugMode.none:
        text = ANNOUNCEMENTS[debug.mode].format(
            batches=debug.batches, ratio=debug.overfit_ratio, profile=profile_batch
        )
        log.info("%s", text)


def check_debug(debug: DebugConfig) -> None:
    """Refuse debug settings no run can use, in one line.

    Raises:
        TapefitError: `debug.batches` below 1 or `debug.overfit_ratio` outside (0, 1).

    Example:
        >>> check_debug(DebugConfig(DebugMode.overfit, batches=0))
        Traceback (most recent call last):
        tapefit.errors.TapefitError: debug.batches=0 must be at least 1
    """
    if debug.batches < 1:
        raise TapefitError(f"debug.batches={debug.batches} must be at least 1")
    if not 0.0 < debug.overfit_ratio < 1.0:
        raise TapefitError(
            f"debug.overfit_ratio={debug.overfit_ratio} must be in (0, 1): the share of the "
            "first epoch's training loss the last epoch must fall below"
        )


def limited(debug: DebugConfig, data: Any) -> Any:
    """`data` as the debug mode wants it: `fast_dev_run` keeps `debug.batches` batches of
    each split; `overfit` trains, validates and tests on the same `debug.batches` training
    batches, fixed (cached at their first pass: the same batches every epoch).

    Args:
        debug: The run's `debug` settings.
        data: The run's data object (a dataclass with `train`, `val`, `test`).

    Returns:
        The data, changed only in debug modes that limit batches.
    """
    if debug.mode is DebugMode.fast_dev_run:
        return dataclasses.replace(
            data,
            **{
                split: getattr(data, split).take(debug.batches)
                for split in ("train", "val", "test")
                if getattr(data, split) is not None
            },
        )
    if debug.mode is DebugMode.overfit:
        fixed = data.train.take(debug.batches).cache()
        return dataclasses.replace(data, train=fixed, val=fixed, test=fixed)
    return data


def overfit_verdict(debug: DebugConfig, history: dict[str, list[float]]) -> dict[str, Any]:
    """Under `debug=overfit`, whether the training loss fell below `overfit_ratio` of its
    first epoch's value ({} otherwise), logged and returned for `metrics.json`.

    Args:
        debug: The run's `debug` settings.
        history: The run's History (`loss` per epoch).

    Returns:
        `{"overfit": {"first_loss", "last_loss", "threshold", "passed"}}` or `{}`.

    Example:
        >>> debug = DebugConfig(DebugMode.overfit, overfit_ratio=0.1)
        >>> overfit_verdict(debug, {"loss": [2.0, 0.5, 0.1]})["overfit"]["passed"]
        True
    """
    losses = history.get("loss") or []
    if debug.mode is not DebugMode.overfit or not losses:
        return {}
    first, last = float(losses[0]), float(losses[-1])
    threshold = first * debug.overfit_ratio
    passed = math.isfinite(last) and last < threshold
    verdict = "the model can learn" if passed else "check the model, its loss and learning rate"
    log.info(
        "overfit %s: training loss %.4g -> %.4g over %d epochs (threshold %.4g): %s",
        "passed" if passed else "FAILED",
        first,
        last,
        len(losses),
        threshold,
        verdict,
    )
    return {
        "overfit": {
            "first_loss": first,
            "last_loss": last,
            "threshold": threshold,
            "passed": passed,
        }
    }


@contextmanager
def numerics_checked(debug: DebugConfig) -> Iterator[None]:
    """Inside the block, under `debug=numerics`, TensorFlow checks every op's output for NaN
    and infinity (functions traced inside it are instrumented); off again afterwards, so
    the process's later runs are not slowed."""
    if debug.mode is not DebugMode.numerics:
        yield
        return
    tf.debugging.enable_check_numerics()
    try:
        yield
    finally:
        tf.debugging.disable_check_numerics()


def explain_numerics(error: Exception) -> TapefitError | None:
    """The one-line account of a check-numerics failure (None for any other error): the op
    that first made a NaN or infinity, its node, and the line of user code that created it.

    Args:
        error: An exception from the run.

    Returns:
        A `TapefitError` naming the op, or None.

    Example:
        >>> message = (
        ...     "Detected at node model/Log/CheckNumericsV2 defined at ...\\n"
        ...     '!!! Detected Infinity or NaN in output 0 of graph op "Log" !!!\\n'
        ...     "    + /project/my_model.py (L12) forward\\n -> |   \\n"
        ... )
        >>> print(str(explain_numerics(tf.errors.InvalidArgumentError(None, None, message)))[:86])
        debug=numerics: op Log (node model/Log, created at /project/my_model.py (L12) forward)
    """
    text = getattr(error, "message", str(error))
    if "Detected Infinity or NaN" not in text:
        return None
    op_type = re.search(r'(?:graph|eagerly-executing) op "([^"]+)"', text)  # traced or eager
    node = re.search(r"Detected at node (\S+?)/CheckNumerics", text)
    frames = re.findall(r"\+ (.+? \(L\d+\) \S+)\n -> ", text)
    where = [f"node {node.group(1)}"] if node else []
    own = [f for f in frames if "site-packages" not in f] or frames  # the user's line first
    if own:
        where.append(f"created at {own[-1]}")
    detail = f" ({', '.join(where)})" if where else ""
    return TapefitError(
        f"debug=numerics: op {op_type.group(1) if op_type else '?'}{detail} produced the first "
        "NaN or infinity: look at its inputs (log or division of 0, an overflow, too high a "
        "learning rate)"
    )
