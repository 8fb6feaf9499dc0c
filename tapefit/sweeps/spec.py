"""The search's specification: the composed config turned, once, at the sweep's edge, into a
frozen typed object. Below the edge (the engines, the trials, the search directory and its
records), functions take it or plain values, never the config.

What is resolved here is resolved once per search: the `tune` settings as their schema types
them (choices are enums, `tune.space`'s entries `SpaceEntry` objects), the objective the
trials are judged by, and the few run settings a search reads. The composed config itself
rides along as `config`, unread: each trial's config is made from it (`apply_values`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tapefit.config.schemas import TuneConfig
from tapefit.config.typed import typed
from tapefit.objective import Objective
from tapefit.runner.model_from_config import model_class
from tapefit.runner.spec import objective_of


@dataclass(frozen=True)
class SearchSpec:
    """One search's settings as typed objects.

    Attributes:
        tune: `tune`, typed: the algorithm, the trial budget, `space` (its entries in order,
            each a `SpaceEntry`) and the Optuna settings.
        objective: The metric the trials are judged by, with its direction.
        seed: `seed`: the first execution's seed, and the draws' when `tune.seed` is null.
        epochs: `trainer.epochs`: Hyperband's longest trial when `tune.max_epochs` is null.
        verbose: `trainer.verbose`: whether keras-tuner reports its progress.
        experiment_name: `experiment_name`: the Optuna study's when `tune.study_name` is null.
        force_resume: `force_resume`: continue a search directory whose config differs.
        configured: Each searched key's value in the config; None where the config lists
            none (a `_target_`'s argument a trial adds) or cannot select it (`check_space`
            refuses such a key in one line).
        logger: The `logger` node, which `search_tracker` builds; None: no tracker.
        config: The composed config, handed on unread: each trial's config is made from it
            (`apply_values`), checked (`check_config`) and snapshotted (`config_snapshot`).

    Example:
        >>> import tapefit
        >>> spec = SearchSpec.of(tapefit.compose(["tune=random", "tune.max_trials=3"]))
        >>> spec.tune.algorithm.value, spec.tune.max_trials, spec.objective.direction
        ('random', 3, 'max')
    """

    tune: TuneConfig
    objective: Objective
    seed: int
    epochs: int
    verbose: int
    experiment_name: str
    force_resume: bool
    configured: dict[str, Any]
    logger: Any
    config: DictConfig

    @property
    def tune_seed(self) -> int:
        """`tune.seed`, or `seed` when it is null: what the oracle's and the sampler's draws
        start from."""
        return self.tune.seed if self.tune.seed is not None else self.seed

    @property
    def unlisted(self) -> frozenset[str]:
        """The searched keys the config does not list: a re-run command adds them with `++`."""
        return frozenset(key for key, value in self.configured.items() if value is None)

    @classmethod
    def of(cls, cfg: DictConfig, located: Any = None) -> SearchSpec:
        """The specification of the composed `cfg` (checked before: `check_config`, which
        returns the model's class: `located`, not imported again).

        Raises:
            TapefitError: The objective's direction is `auto` and its name one `auto` does
                not know (the first thing a search refuses after `check_config`).
        """
        target = located or model_class(cfg.model)
        objective = objective_of(cfg, target)  # its direction stated or known, or refused
        tune = typed(TuneConfig, cfg.tune)
        configured = {}
        for key in tune.space:
            try:
                configured[key] = OmegaConf.select(cfg, key, default=None)
            except Exception:  # check_space meets the same failure and refuses the key
                configured[key] = None
        return cls(
            tune=tune,
            objective=objective,
            seed=cfg.seed,
            epochs=cfg.trainer.epochs,
            verbose=cfg.trainer.verbose,
            experiment_name=cfg.experiment_name,
            force_resume=cfg.force_resume,
            configured=configured,
            logger=cfg.get("logger"),
            config=cfg,
        )
