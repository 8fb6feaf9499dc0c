"""The composed config as flat `dotted.key: value` pairs: what a checkpoint records and a
resume compares, what HParams and an experiment tracker show, what a search saves."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf


def config_snapshot(cfg: Any) -> dict[str, Any]:
    """The resolved config as flat `dotted.key: value` pairs.

    Example:
        >>> from omegaconf import OmegaConf
        >>> config_snapshot(OmegaConf.create({"trainer": {"epochs": 3}, "seed": 0}))
        {'trainer.epochs': 3, 'seed': 0}
    """
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            flat[prefix[:-1]] = node

    walk(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True), "")
    return flat
