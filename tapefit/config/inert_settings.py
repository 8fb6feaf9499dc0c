"""Command-line settings that would do nothing in the composed config, refused by name.

`trainer.export_formats=[onnx]` without `trainer.export=true` used to export nothing and say
nothing; so did a callback's option while the callback is off, a search key without a search,
or Optuna's keys in a keras-tuner search. Each rule below names a group of keys, when the
composed config leaves them without effect, and the override that gives them one. Only the
overrides the user typed are judged: a value a config file sets for a switched-off feature is
a default, not a request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tapefit.errors import TapefitError

OPTUNA_ONLY = (
    "storage",
    "study_name",
    "sampler",
    "pruner",
    "pruner_startup_trials",
    "pruner_warmup_epochs",
)
CALLBACKS = (
    "tensorboard",
    "early_stopping",
    "model_checkpoint",
    "reduce_lr_on_plateau",
    "csv_logger",
    "step_telemetry",
)


@dataclass(frozen=True)
class InertRule:
    """Keys that do nothing while `inert(cfg)` holds, and what gives them an effect.

    Attributes:
        matches: whether an override's key belongs to the rule.
        inert: whether the composed config leaves those keys without effect.
        needs: the override(s) that would give them one, as a user types them.
    """

    matches: Callable[[str], bool]
    inert: Callable[[Any], bool]
    needs: Callable[[str, Any], str]


def _algorithm(tune: Any) -> str:
    """The `tune` node's algorithm, as its name."""
    value = tune.algorithm
    return str(getattr(value, "value", value))


# The Classifier's keys each body leaves unused (its config holds both bodies' keys).
CNN_ONLY = ("conv_blocks", "dense_units", "dropout", "bn_momentum")
MLP_ONLY = ("hidden_units",)


def _classifier_architecture(model: Any) -> str | None:
    """The Classifier's `architecture` (cnn, mlp), or None for a model of another shape."""
    if model is None or not all(key in model for key in ("architecture", *CNN_ONLY, *MLP_ONLY)):
        return None
    return str(getattr(model.architecture, "value", model.architecture))


def _callback_rule(name: str) -> InertRule:
    prefix = f"callbacks.{name}."
    return InertRule(
        matches=lambda key: key.startswith(prefix) and key != f"{prefix}enabled",
        inert=lambda cfg: not cfg.callbacks[name].enabled,
        needs=lambda key, cfg: f"callbacks.{name}.enabled=true",
    )


RULES: tuple[InertRule, ...] = (
    InertRule(
        matches=lambda key: key in ("trainer.export_formats", "trainer.export_tolerance"),
        inert=lambda cfg: not cfg.trainer.export,
        needs=lambda key, cfg: "trainer.export=true",
    ),
    *(_callback_rule(name) for name in CALLBACKS),
    InertRule(
        matches=lambda key: key.startswith("tune.") and key != "tune.algorithm",
        inert=lambda cfg: _algorithm(cfg.tune) == "none",
        needs=lambda key, cfg: (
            "a search: tune=random (or bayesian, hyperband, grid, optuna, lr_find)"
        ),
    ),
    InertRule(
        matches=lambda key: key.startswith("tune.lr_find."),
        inert=lambda cfg: _algorithm(cfg.tune) not in ("none", "lr_find"),
        needs=lambda key, cfg: "tune=lr_find",
    ),
    InertRule(
        matches=lambda key: key.startswith("tune.") and key.split(".")[1] in OPTUNA_ONLY,
        inert=lambda cfg: _algorithm(cfg.tune) not in ("none", "optuna"),
        needs=lambda key, cfg: "tune=optuna (the key is Optuna's)",
    ),
    InertRule(
        matches=lambda key: key in ("debug.batches", "debug.overfit_ratio"),
        inert=lambda cfg: str(getattr(cfg.debug.mode, "value", cfg.debug.mode)) == "none",
        needs=lambda key, cfg: "a debug preset: debug=fast_dev_run (or overfit)",
    ),
    InertRule(
        matches=lambda key: key.startswith("model.") and key.split(".")[1] in CNN_ONLY,
        inert=lambda cfg: _classifier_architecture(cfg.get("model")) == "mlp",
        needs=lambda key, cfg: "model.architecture=cnn (the key is the CNN's)",
    ),
    InertRule(
        matches=lambda key: key.startswith("model.") and key.split(".")[1] in MLP_ONLY,
        inert=lambda cfg: _classifier_architecture(cfg.get("model")) == "cnn",
        needs=lambda key, cfg: "model.architecture=mlp (the key is the MLP's)",
    ),
    InertRule(
        matches=lambda key: key == "checkpoint.save_last",
        inert=lambda cfg: not cfg.checkpoint.save_top_k,
        needs=lambda key, cfg: "checkpoint.save_top_k=K (K > 0)",
    ),
    InertRule(
        matches=lambda key: key == "force_resume",
        inert=lambda cfg: not cfg.resume,
        needs=lambda key, cfg: "resume=true",
    ),
    InertRule(
        matches=lambda key: key == "init_from_strict",
        inert=lambda cfg: cfg.init_from is None,
        needs=lambda key, cfg: "init_from=RUN_DIR (or a weights file)",
    ),
    InertRule(
        matches=lambda key: key == "trainer.shard_policy",
        inert=lambda cfg: (
            str(getattr(cfg.trainer.strategy, "value", cfg.trainer.strategy)) != "multi_worker"
        ),
        needs=lambda key, cfg: "trainer.strategy=multi_worker (several machines)",
    ),
)


def override_key(override: str) -> str | None:
    """The key an override sets (`+`/`++` dropped), or None for a deletion, a group choice's
    package form or Hydra's own keys.

    Examples:
        >>> override_key("++trainer.export_formats=[onnx]")
        'trainer.export_formats'
        >>> override_key("hydra.run.dir=out") is None
        True
    """
    if "=" not in override or override.startswith("~"):
        return None
    key = override.split("=", 1)[0].lstrip("+")
    if key.startswith("hydra.") or key.startswith("hydra/") or "@" in key:
        return None
    return key


def check_no_inert_overrides(cfg: Any, overrides: Sequence[str]) -> None:
    """Refuse a command-line override that the composed `cfg` leaves without effect.

    Args:
        cfg: the composed config.
        overrides: the overrides as typed (Hydra's `overrides.task`).

    Raises:
        TapefitError: one line naming the override and what would give it an effect.

    Examples:
        >>> from tapefit.runner.composition import compose
        >>> typed = ["trainer.export_formats=[onnx]"]
        >>> check_no_inert_overrides(compose(typed), typed)
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: trainer.export_formats=[onnx] does nothing in this run: ...
    """
    for override in overrides:
        key = override_key(override)
        if key is None:
            continue
        for rule in RULES:
            if rule.matches(key) and rule.inert(cfg):
                shown = override.lstrip("+")
                raise TapefitError(
                    f"{shown} does nothing in this run: it needs {rule.needs(key, cfg)}; add "
                    "that, or drop the override"
                )
