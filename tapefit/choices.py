"""Closed sets of options as string Enums: Hydra checks them when the config is composed, and
the layer that uses an option owns its one list of allowed values."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any, TypeVar

from tapefit.errors import TapefitError

E = TypeVar("E", bound=Enum)


def choice_enum(name: str, values: Iterable[str]) -> type[Enum]:
    """A `str` Enum whose members are `values` (name == value), e.g. from a registry's keys."""
    return Enum(name, {value: value for value in values}, type=str)  # type: ignore[return-value]


def parse_choice(choices: type[E], value: Any, key: str) -> E:
    """`value` (a member or its string) as a member of `choices`, or a one-line error naming
    `key` and the allowed values."""
    if isinstance(value, choices):
        return value
    try:
        return choices(str(value))
    except ValueError:
        allowed = ", ".join(member.value for member in choices)
        raise TapefitError(f"{key}={value!r} is unknown: choose one of {allowed}") from None
