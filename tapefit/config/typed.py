"""A node of the composed config as the typed object its schema describes, made once at the
run's edge: code below it reads attributes that exist, with enums for choices, not a config.
"""

from __future__ import annotations

from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

Schema = TypeVar("Schema")


def typed(schema: type[Schema], node: Any) -> Schema:
    """`node` (a composed config node, a dict, or None for the defaults) as an instance of the
    dataclass `schema`, its values checked and converted by OmegaConf (choices become enums).

    Args:
        schema: A dataclass of `tapefit.config.schemas`, e.g. `TrainerConfig`.
        node: Its values; keys the schema does not have are refused by OmegaConf.

    Returns:
        A `schema` instance.

    Example:
        >>> from tapefit.config.schemas import DebugConfig, DebugMode
        >>> typed(DebugConfig, {"mode": "overfit"}).mode is DebugMode.overfit
        True
    """
    if isinstance(node, schema):
        return node
    if isinstance(node, DictConfig) and OmegaConf.get_type(node) is schema:
        return OmegaConf.to_object(node)  # interpolations resolve through the whole config
    merged = OmegaConf.structured(schema)
    if node is not None:
        values = (
            OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
        )
        merged = OmegaConf.merge(merged, OmegaConf.create(dict(values)))
    return OmegaConf.to_object(merged)
