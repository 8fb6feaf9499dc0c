"""Hydra composition: the schemas of `tapefit/config/schemas.py` in the ConfigStore, then
`conf/` composed as the CLI would."""

from __future__ import annotations

from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from tapefit.config.schemas import SCHEMAS, config_dir
from tapefit.errors import TapefitError
from tapefit.training.preemption import run_dir_name


def register_schemas() -> None:
    """Store the schemas in Hydra's ConfigStore and register tapefit's resolvers.

    Composing `conf/` needs both; calling it again changes nothing.
    """
    store = ConfigStore.instance()
    for (group, name), node in SCHEMAS.items():
        stored = store.repo.get(group, {}) if group else store.repo
        if f"{name}.yaml" not in stored:  # storing copies the schema: 0.1 s a composition
            store.store(group=group, name=name, node=node)
    OmegaConf.register_new_resolver("tapefit.run_name", run_dir_name, replace=True)


def compose(overrides: list[str] | None = None, config_name: str = "config") -> Any:
    """Compose the config tree as `python -m tapefit` would, for notebooks and tests.

    The same overrides as on the command line give the same config, checked against the
    schemas, so a notebook can build a run with `tapefit.run` and get what the CLI would.
    It starts Hydra afresh each time (clearing any Hydra already initialised).

    Args:
        overrides: Command-line style overrides (`"trainer.epochs=3"`, `"data=mnist"`,
            `"+experiment=..."`).
        config_name: The primary config under `conf/`.

    Returns:
        The composed `omegaconf.DictConfig`.

    Raises:
        TapefitError: an override names a key the config does not have: the closest real
            key and the keys of its group, in one line, as the command line says it.
        hydra.errors.ConfigCompositionException: an override gives a value its schema
            refuses, or an unknown choice (Hydra's own error, which names the choices).

    Examples:
        >>> import tapefit
        >>> cfg = tapefit.compose(["trainer.epochs=3", "data.batch_size=16"])
        >>> cfg.trainer.epochs, cfg.data.batch_size, cfg.data._target_
        (3, 16, 'tapefit.data.loaders.digits')
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import CompactHydraException

    from tapefit.config.override_errors import misspelt_override_line

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        try:
            return hydra_compose(config_name=config_name, overrides=list(overrides or []))
        except CompactHydraException as error:
            line = misspelt_override_line(error)  # not Hydra's advice to append with +
            if line is None:
                raise
            raise TapefitError(line) from None
