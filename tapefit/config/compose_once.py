"""One composition per command, where Hydra makes two.

Before it runs anything, Hydra's command line (`hydra.main`) calls `Hydra.get_mode`, which
composes the whole config only to read `hydra.mode` (a config may ask for a multirun), throws
it away, and `Hydra.run` composes the same config again (hydra-ecosystem/hydra#3440, open).
Within `composed_once`, the mode is read from a composition made the way `Hydra.run` makes its
own (run mode, its sweep checks, the `hydra.mode=RUN` override Hydra then appends), and
`Hydra.run` is handed that composition instead of making a second one: one composition of
tapefit's config took 0.21-0.36 s on a 2-core machine (docs/explanation/benchmark.md).

Nothing else changes: a command that sweeps (`seed=1,2`), asks for a multirun (`-m`, or
`hydra.mode: MULTIRUN` in a config), or whose composition fails takes Hydra's own road and
gets Hydra's own errors (a failed run composition is then made again as Hydra makes it); a
composition is handed over only to the one call that asks for exactly it (the same config
name, overrides and mode), once, and dropped when a multirun starts instead.

This is the one module that reads Hydra's private `hydra._internal`; `pyproject.toml` bounds
hydra-core to the 1.3 line, and tests/config/test_compose_once.py compares what it hands over
with Hydra's own composition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig

# What `hydra/_internal/utils.py:_run_app` appends to the overrides of a command that runs once
# and whose config names no mode, before `Hydra.run` composes them.
RUN_MODE_OVERRIDE = "hydra.mode=RUN"


def with_run_mode_override(cfg: DictConfig) -> DictConfig:
    """`cfg`, composed from some overrides, as if `hydra.mode=RUN` had ended them.

    A config override that changes no group: Hydra applies it after the others and lists it
    last among the `hydra.` overrides, as here (`ConfigLoaderImpl._load_configuration_impl`).

    Args:
        cfg: A config composed by Hydra's loader in run mode, whose `hydra.mode` is unset.

    Returns:
        The same object, changed.

    Examples:
        >>> from omegaconf import OmegaConf
        >>> cfg = OmegaConf.create({"hydra": {"mode": None, "overrides": {"hydra": []}}})
        >>> with_run_mode_override(cfg).hydra.mode, list(cfg.hydra.overrides.hydra)
        ('RUN', ['hydra.mode=RUN'])
    """
    override = OverridesParser.create().parse_overrides([RUN_MODE_OVERRIDE])
    ConfigLoaderImpl._apply_overrides_to_config(override, cfg)
    cfg.hydra.overrides.hydra.append(RUN_MODE_OVERRIDE)
    return cfg


def _drop_hand_over(loader: Any) -> None:
    """`loader.load_configuration` as its class defines it again."""
    vars(loader).pop("load_configuration", None)


def _hand_over_once(loader: Any, key: tuple[Any, ...], cfg: DictConfig) -> None:
    """Make `loader.load_configuration` return `cfg` to the first call asking for `key`
    (config name, overrides, run mode, from_shell, validate_sweep_overrides)."""
    load = loader.load_configuration

    def load_configuration(
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        asked = (config_name, tuple(overrides), run_mode, from_shell, validate_sweep_overrides)
        if asked == key:
            _drop_hand_over(loader)  # once
            return cfg
        return load(
            config_name=config_name,
            overrides=overrides,
            run_mode=run_mode,
            from_shell=from_shell,
            validate_sweep_overrides=validate_sweep_overrides,
        )

    loader.load_configuration = load_configuration


def _asks_for_a_sweep(overrides: list[str]) -> bool:
    """Whether an override sweeps (`seed=1,2`), or they do not parse: Hydra's road."""
    try:
        return any(
            o.is_sweep_override() for o in OverridesParser.create().parse_overrides(overrides)
        )
    except Exception:
        return True


@contextlib.contextmanager
def composed_once() -> Iterator[None]:
    """Within: a `hydra.main` command that runs once composes its config once, not twice.

    Examples:
        >>> from hydra._internal.hydra import Hydra
        >>> with composed_once():
        ...     Hydra.get_mode.__name__
        'get_mode_from_the_run_composition'
        >>> Hydra.get_mode.__name__
        'get_mode'
    """
    hydras_get_mode, hydras_multirun = Hydra.get_mode, Hydra.multirun

    def get_mode_from_the_run_composition(
        self: Hydra, config_name: str | None, overrides: list[str]
    ) -> Any:
        if _asks_for_a_sweep(overrides):  # a run composition would only fail
            return hydras_get_mode(self, config_name, overrides)
        loader = self.config_loader
        try:
            cfg = loader.load_configuration(
                config_name=config_name, overrides=list(overrides), run_mode=RunMode.RUN
            )
            mode = cfg.hydra.mode
        except Exception:  # a missing group, a mode that does not resolve: Hydra's road
            return hydras_get_mode(self, config_name, overrides)
        if mode == RunMode.MULTIRUN:
            return mode
        asked = [*overrides] if mode == RunMode.RUN else [*overrides, RUN_MODE_OVERRIDE]
        if mode is None:
            cfg = with_run_mode_override(cfg)
        _hand_over_once(loader, (config_name, tuple(asked), RunMode.RUN, True, True), cfg)
        return mode

    def multirun_composing_afresh(self: Hydra, *args: Any, **kwargs: Any) -> Any:
        _drop_hand_over(self.config_loader)  # `-m`: no call will ask for the run composition
        return hydras_multirun(self, *args, **kwargs)

    Hydra.get_mode, Hydra.multirun = get_mode_from_the_run_composition, multirun_composing_afresh
    try:
        yield
    finally:
        Hydra.get_mode, Hydra.multirun = hydras_get_mode, hydras_multirun
