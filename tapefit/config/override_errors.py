"""Hydra's refusal of an override that names no key, as tapefit's one line.

Hydra answers `trainer.epoch=3` (a key the config does not hold) with `Could not override
'trainer.epoch'. To append to your config use +trainer.epoch=3` and exit code 1: advice that
is wrong for tapefit's typed groups, whose unknown keys are refused whichever form adds them.
`misspelt_override_line` turns that refusal into the line tapefit gives a misspelt key added
with `+` or `++`: the key, the closest key of its node, and the keys the node has
(docs/reference/errors.md, "a misspelt key"). Hydra's own `~KEY` message (`'KEY' does not
exist`) is already right, and stays.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError


def misspelt_override_line(error: BaseException) -> str | None:
    """tapefit's line for Hydra's refusal of an override whose key the config does not have,
    or None for any other error (Hydra reports those itself).

    Args:
        error: what Hydra's composition raised (a `ConfigCompositionException`).

    Returns:
        `KEY is not a config key (did you mean CLOSEST?): fix the override; NODE has ...`, or
        None.

    Examples:
        >>> from hydra import compose, initialize_config_dir
        >>> from tapefit.config.schemas import config_dir
        >>> from tapefit.runner.composition import register_schemas
        >>> register_schemas()
        >>> with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        ...     try:
        ...         compose(config_name="config", overrides=["trainer.epoch=3"])
        ...     except Exception as error:
        ...         print(misspelt_override_line(error).split(":")[0])
        trainer.epoch is not a config key (did you mean trainer.epochs?)
    """
    cause = error.__cause__
    if not isinstance(cause, ConfigAttributeError | ConfigKeyError):
        return None
    if not str(error).startswith("Could not override"):
        return None
    parent, full_key = cause.parent_node, cause.full_key
    if not isinstance(parent, DictConfig) or not full_key:
        return None
    key = str(cause.key) if cause.key is not None else full_key.rsplit(".", 1)[-1]
    prefix = full_key[: len(full_key) - len(key)] if full_key.endswith(key) else ""
    return _line(prefix, key, parent)


def _line(prefix: str, key: str, node: DictConfig) -> str:
    known = sorted(str(name) for name in node)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
    owner = prefix.rstrip(".") or "the root"
    has = f"{owner} has {', '.join(known)}" if known else f"{owner} has no keys"
    typed = dataclasses.is_dataclass(_schema(node))
    add = "" if typed else f" (to give {owner} a new argument, add it with +{prefix}{key}=VALUE)"
    return f"{prefix}{key} is not a config key{hint}: fix the override; {has}{add}"


def _schema(node: DictConfig) -> Any:
    try:
        return OmegaConf.get_type(node)
    except (ValueError, AttributeError):
        return None
