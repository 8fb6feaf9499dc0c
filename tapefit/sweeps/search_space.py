"""`tune.space`: keras-tuner hyperparameters declared from config entries (each named by the
dotted config key it sets), and a trial's values written back into the run's config."""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping
from contextlib import ExitStack
from typing import Any

import keras_tuner as kt
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from tapefit.config.schemas import ParamType, SpaceEntry
from tapefit.config.targets import has_target
from tapefit.errors import TapefitError

_MISSING = object()


def _check_entry(name: str, entry: SpaceEntry, declared: dict[str, SpaceEntry]) -> None:
    """One-line errors for an entry keras-tuner could not declare."""
    where = f"tune.space.{name}"
    kind = ParamType(entry.type)
    if kind in (ParamType.float, ParamType.int):
        if entry.min is None or entry.max is None or not entry.min < entry.max:
            raise TapefitError(
                f"{where}: a {kind.value} range needs min < max (got {entry.min}, {entry.max})"
            )
        if entry.sampling != "linear" and entry.min <= 0:
            raise TapefitError(
                f"{where}: {entry.sampling} sampling needs min > 0 (got {entry.min})"
            )
    if kind == ParamType.choice and not entry.values:
        raise TapefitError(f"{where}: a choice needs values: [...]")
    for parent, values in (entry.when or {}).items():
        if parent not in declared:
            raise TapefitError(
                f"{where}: when: {parent} must name an entry listed before it in tune.space"
            )
        if ParamType(declared[parent].type) not in (ParamType.choice, ParamType.bool):
            raise TapefitError(f"{where}: when: {parent} must be a choice or bool entry")
        if not values:
            raise TapefitError(f"{where}: when: {parent} needs a list of values")


def declare(space: Mapping[str, SpaceEntry]) -> kt.HyperParameters:
    """keras-tuner's `HyperParameters` for `space` (entries in order; `when` nests conditional
    scopes on earlier choice/bool entries)."""
    hp = kt.HyperParameters()
    declared: dict[str, SpaceEntry] = {}
    for name, entry in space.items():
        _check_entry(name, entry, declared)
        with ExitStack() as scopes:
            for parent, values in (entry.when or {}).items():
                scopes.enter_context(hp.conditional_scope(parent, list(values)))
            _declare_one(hp, name, entry)
        declared[name] = entry
    return hp


def _declare_one(hp: kt.HyperParameters, name: str, entry: SpaceEntry) -> None:
    kind = ParamType(entry.type)
    sampling = str(getattr(entry.sampling, "value", entry.sampling))
    if kind == ParamType.float:
        hp.Float(name, float(entry.min), float(entry.max), step=entry.step, sampling=sampling)
    elif kind == ParamType.int:
        step = int(entry.step) if entry.step is not None else None
        hp.Int(name, int(entry.min), int(entry.max), step=step, sampling=sampling)
    elif kind == ParamType.choice:
        hp.Choice(name, list(entry.values))
    else:
        hp.Boolean(name)


def active_values(hp: kt.HyperParameters, space: Collection[str]) -> dict[str, Any]:
    """The trial's values of the entries that are active (their `when` holds)."""
    return {name: hp.values[name] for name in space if name in hp.values and hp.is_active(name)}


def apply_values(cfg: Any, values: dict[str, Any]) -> Any:
    """A copy of `cfg` with each dotted key set to its value (checked against the schema).

    Example:
        >>> from omegaconf import OmegaConf
        >>> cfg = OmegaConf.create({"model": {"units": 8}})
        >>> apply_values(cfg, {"model.units": 16}).model.units, cfg.model.units
        (16, 8)
    """
    trial = copy.deepcopy(cfg)
    for key, value in values.items():
        missing = OmegaConf.select(trial, key, default=_MISSING) is _MISSING
        parent = OmegaConf.select(trial, key.rpartition(".")[0]) if "." in key else None
        # An argument of a `_target_` object may be searched without being in its YAML: the
        # run checks it against the target's signature.
        addable = missing and has_target(parent)
        if missing and not addable:
            raise TapefitError(
                f"tune.space.{key}: {key} is not a config key; name an existing key "
                "(python -m tapefit --cfg job lists them)"
            )
        try:
            OmegaConf.update(trial, key, value, merge=False, force_add=addable)
        except OmegaConfBaseException as error:
            first_line = str(error).splitlines()[0]
            raise TapefitError(
                f"tune.space.{key}: value {value!r} does not fit ({first_line})"
            ) from None
    return trial


def corner_values(space: Mapping[str, SpaceEntry]) -> list[dict[str, Any]]:
    """One value set per entry bound and choice (others left alone): what `check_space`
    tries, so a bound no run can use fails before the first trial.

    Example:
        >>> from tapefit.config.schemas import SpaceEntry
        >>> corner_values({"model.units": SpaceEntry("int", min=8, max=64)})
        [{'model.units': 8}, {'model.units': 64}]
    """
    corners = []
    for name, entry in space.items():
        kind = ParamType(entry.type)
        if kind in (ParamType.float, ParamType.int):
            cast = float if kind == ParamType.float else int
            corners += [{name: cast(entry.min)}, {name: cast(entry.max)}]
        elif kind == ParamType.choice:
            corners += [{name: value} for value in entry.values]
        else:
            corners += [{name: True}, {name: False}]
    return corners


def override_text(key: str, value: Any) -> str:
    """`key=value` as a Hydra command-line override.

    Example:
        >>> override_text("model.pooling", "mean"), override_text("model.bidirectional", True)
        ('model.pooling=mean', 'model.bidirectional=true')
    """
    if isinstance(value, bool):
        return f"{key}={str(value).lower()}"
    if isinstance(value, str):
        return (
            f"{key}={value}" if value.replace("_", "").isalnum() else f"{key}={json.dumps(value)}"
        )
    return f"{key}={value!r}"
