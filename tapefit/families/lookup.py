"""Which family runs a config: `TargetFamily` for a model named by `_target_`, else the
registered family `model.name`."""

from __future__ import annotations

from typing import Any

from tapefit.config.targets import has_target
from tapefit.errors import TapefitError
from tapefit.families.base import FAMILIES, Family, import_family_modules
from tapefit.families.target import TARGET_FAMILY
from tapefit.training.objective import Objective


def family_for(cfg: Any) -> Family:
    """The family of `cfg.model`: `TargetFamily` for a `_target_` model, else the registered
    family `cfg.model.name`, checked to accept `cfg.data.name`."""
    import_family_modules(cfg.get("families") or [])
    if has_target(cfg.model):
        return TARGET_FAMILY
    if has_target(cfg.data):
        raise TapefitError(
            f"data._target_ needs a model named by _target_ too; model={cfg.model.get('name')} "
            "brings its own datasets: pick one of them, or give model._target_"
        )
    name = cfg.model.get("name")
    family = FAMILIES.get(name)
    if family is None:
        raise TapefitError(
            f"model.name={name!r} is unknown: choose one of {', '.join(FAMILIES)}, give "
            "model._target_ (your own TapeModel class), or list the module that registers "
            "it in families=[...]"
        )
    if cfg.data.name not in family.datasets:
        raise TapefitError(
            f"data={cfg.data.name} does not fit model={name}: it takes {', '.join(family.datasets)}"
        )
    return family


def objective_of(cfg: Any) -> Objective:
    """The run's objective: `cfg.objective`, or the family's default validation metric, with
    its direction and mode (one line refuses a direction `auto` cannot know)."""
    return Objective.from_config(cfg, family_for(cfg).default_objective(cfg))
