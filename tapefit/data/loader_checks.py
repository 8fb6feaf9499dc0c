"""The checks a loader runs on its configured options before anything is loaded: attached as
its `check_options` (`checked_by`), with the loader's defaults filled in (`with_defaults`),
each failing in one line that names its `data.<key>`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from tapefit.errors import TapefitError


def checked_by(check: Callable[[Mapping[str, Any]], None]) -> Callable:
    """Decorator: attach `check` as the loader's `check_options`.

    The run calls it with the configured arguments before anything is loaded, so a bad
    value fails at once with its config key.

    Args:
        check: Takes the configured arguments; raises `TapefitError` for a bad value.

    Returns:
        A decorator that returns the loader itself, `check` attached.

    Examples:
        >>> def positive(options):
        ...     at_least_or_null(options.get("size"), 1, "size")
        >>> @checked_by(positive)
        ... def loader(size=8, seed=0):
        ...     return size
        >>> loader.check_options({"size": 0})
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: data.size=0 must be at least 1 or null
    """

    def attach(loader: Callable) -> Callable:
        loader.check_options = check
        return loader

    return attach


def with_defaults(loader: Callable, given: Mapping[str, Any]) -> dict[str, Any]:
    """The configured arguments of `loader`, its defaults filling in those not given.

    Args:
        loader: The loader whose signature holds the defaults.
        given: The configured arguments.

    Returns:
        Every argument with a default, then `given` over them.

    Examples:
        >>> def loader(batch_size=32, cache=True, seed=0): ...
        >>> with_defaults(loader, {"batch_size": 8})
        {'batch_size': 8, 'cache': True, 'seed': 0}
    """
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(loader).parameters.items()
        if parameter.default is not parameter.empty
    }
    return {**defaults, **given}


def at_least_or_null(value: Any, minimum: int, key: str, null: bool = True) -> None:
    """A one-line error naming `data.<key>` unless `value >= minimum` (or null, if `null`).

    Args:
        value: The configured value.
        minimum: The smallest value allowed.
        key: The key under `data` the error names.
        null: Whether None is allowed.

    Raises:
        TapefitError: `value` is below `minimum` (or None where not allowed).

    Examples:
        >>> at_least_or_null(None, 1, "train_limit")
        >>> at_least_or_null(0, 1, "batch_size", null=False)
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: data.batch_size=0 must be at least 1
    """
    if value is None and null:
        return
    if value is None or value < minimum:
        allowed = " or null" if null else ""
        raise TapefitError(f"data.{key}={value} must be at least {minimum}{allowed}")
